//! Keeping the secrets Herald holds inside its own process.
//!
//! Herald reads API keys and bot tokens from its environment, and it runs
//! code it did not write: skill scripts and, later, MCP servers, as children.
//! A child runs with an environment scrubbed down to what it is given, but
//! on Linux any process of the same user can read another's memory and its
//! start-up environment (`/proc/PID/environ`, `/proc/PID/mem`) unless that
//! process is non-dumpable. So at start Herald makes itself non-dumpable
//! (its `/proc` files then belong to root, and it cannot be traced), and once
//! the configuration is loaded it removes the variables the file read from
//! its environment, so nothing it starts later can inherit them. Scripts
//! still must not run as Herald's own user when that user is root, who may
//! read anything: see `skills.script_user`.

/// Makes this process non-dumpable: no core dumps, no `ptrace` attach, and
/// `/proc/PID/{environ,mem,…}` readable by root only.
pub fn keep_memory_private() {
    if let Err(err) = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable) {
        eprintln!("warning: could not make Herald's memory private (PR_SET_DUMPABLE): {err}");
    }
}

/// Removes `names` from the process environment.
///
/// Must be called before any other thread runs: `main` calls it before the
/// async runtime starts, when the configuration has been read and nothing
/// else reads the environment.
pub fn forget_environment(names: &[String]) {
    for name in names {
        // SAFETY: the process is single-threaded here (see above), so no
        // other thread can read the environment while it changes.
        #[allow(unsafe_code)]
        unsafe {
            std::env::remove_var(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_becomes_non_dumpable_and_forgets_what_it_loaded() {
        keep_memory_private();
        assert_eq!(
            rustix::process::dumpable_behavior().unwrap(),
            rustix::process::DumpableBehavior::NotDumpable
        );
        // This test is alone in its process's environment use: nothing else
        // here sets or reads HERALD_HARDENING_TEST_SECRET.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("HERALD_HARDENING_TEST_SECRET", "sk-canary");
        }
        forget_environment(&["HERALD_HARDENING_TEST_SECRET".to_owned()]);
        assert!(std::env::var("HERALD_HARDENING_TEST_SECRET").is_err());
    }
}
