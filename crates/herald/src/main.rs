//! The `herald` binary; everything lives in the library beside it.

fn main() -> std::process::ExitCode {
    herald::main()
}
