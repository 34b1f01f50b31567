//! Link settings of the `herald` binary.
//!
//! On Linux with glibc the binary's relative relocations are packed
//! (`DT_RELR`): a position-independent executable otherwise carries one
//! 24-byte record per pointer to fix up at start (1.7 MB of Herald's 25),
//! and the loader reads every page of them into memory. Packed, they take a
//! few kilobytes. glibc 2.36 or later runs such a binary (Debian 12, Ubuntu
//! 22.10, the Docker image); a linker that does not know the option (GNU ld
//! before 2.38) warns and links as before.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
