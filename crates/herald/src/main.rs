//! The `herald` binary; everything lives in the library beside it.

fn main() -> std::process::ExitCode {
    // First of all: this binary is also the supervisor skill scripts run
    // under (`herald __herald-skill-script-supervisor …`), which must read no
    // configuration and parse no command line of Herald's.
    if let Some(code) = herald_skills::script_supervisor_entry() {
        return code;
    }
    // It is also the reader a sender's files are decoded in, out of the
    // gateway's memory (`herald __herald-read-file …`).
    if let Some(code) = herald_agent::file_reader_entry() {
        return code;
    }
    herald::memory::limit_allocator_arenas();
    herald::main()
}
