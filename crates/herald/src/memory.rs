//! Keeping Herald's resident memory to what the running gateway uses.
//!
//! Two things grow a long-running Herald without serving anyone:
//! - glibc's allocator gives each thread that allocates under contention an
//!   arena of its own, up to eight per core, and memory freed in one arena
//!   is reused only there. Herald's threads (the runtime's workers, one per
//!   SQLite connection, the Discord gateway's) would hold that many
//!   half-empty arenas; two are enough for a process that spends its time
//!   waiting ([`limit_allocator_arenas`]). In a 20-minute soak this kept
//!   3.0 MiB of growth where the default kept 4.5 (`docs/benchmarks.md`);
//!   a `malloc_trim` every minute on top of it changed nothing, so there is
//!   none.
//! - start-up runs code that never runs again (configuration, migrations,
//!   TLS set-up, every channel's connect), and each page of it the kernel
//!   mapped in stays counted as Herald's. Once every channel is connected,
//!   Herald unmaps its code pages ([`release_startup_code`]); the code the
//!   gateway runs from then on is mapped in again from the page cache as it
//!   runs, a minor fault per page. Only the executable mapping is touched:
//!   its pages are never written, so they read back as they were (the
//!   relocated, read-only data after it is left alone).

use std::time::Duration;

use herald_core::ChannelStatus;
use tracing::{debug, info};

/// Allocator arenas Herald's threads share.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// Caps glibc's allocator arenas at [`ARENAS`]; nothing elsewhere. Call it
/// first thing, before threads start. `MALLOC_ARENA_MAX` in the environment
/// still wins.
pub fn limit_allocator_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a parameter of the allocator; it is
        // called before any other thread exists.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
    }
}

/// How long start-up may take before its pages are let go anyway.
const STARTUP_AT_MOST: Duration = Duration::from_secs(60);

/// Waits until `channels` ingresses reported connected (or
/// [`STARTUP_AT_MOST`]), then lets go of the code pages start-up mapped in.
pub async fn release_startup_code(status: ChannelStatus, channels: usize) {
    let started = tokio::time::Instant::now();
    while started.elapsed() < STARTUP_AT_MOST {
        let connected = status.snapshot().iter().filter(|(_, connected)| *connected).count();
        if connected >= channels {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The first polls and the gateway's first heartbeat run right after.
    tokio::time::sleep(Duration::from_secs(1)).await;
    match unmap_code() {
        Ok(bytes) => info!(kib = bytes / 1024, "start-up done; its code pages were let go"),
        Err(reason) => debug!(reason, "start-up code pages kept"),
    }
}

/// Unmaps the pages of this executable's code mapping(s); returns the bytes
/// of address space advised.
#[cfg(target_os = "linux")]
fn unmap_code() -> Result<usize, String> {
    let exe = std::fs::read_link("/proc/self/exe").map_err(|err| err.to_string())?;
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|err| err.to_string())?;
    let mut advised = 0;
    for (start, end) in code_mappings(&maps, &exe.to_string_lossy()) {
        // SAFETY: the range is a whole mapping of this executable's code,
        // read-only and never written (see the module documentation), so
        // its pages fault back in from the file unchanged.
        #[allow(unsafe_code)]
        let done = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if done != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        advised += end - start;
    }
    Ok(advised)
}

#[cfg(not(target_os = "linux"))]
fn unmap_code() -> Result<usize, String> {
    Err("only on Linux".into())
}

/// The address ranges of `/proc/self/maps` lines that map `exe` readable and
/// executable, never writable.
fn code_mappings(maps: &str, exe: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?;
            if path != exe || perms.get(..3) != Some("r-x") {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start < end).then_some((start, end))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55f6cc38e000-55f6cc9bd000 r--p 00000000 fd:01 1234                       /usr/local/bin/herald
55f6cc9bd000-55f6cda0f000 r-xp 0062f000 fd:01 1234                       /usr/local/bin/herald
55f6cda0f000-55f6cdbc4000 r--p 01681000 fd:01 1234                       /usr/local/bin/herald
55f6cdbc4000-55f6cdbce000 rw-p 01836000 fd:01 1234                       /usr/local/bin/herald
55f6d28a5000-55f6d2b09000 rw-p 00000000 00:00 0                          [heap]
7f8918c83000-7f8918dd9000 r-xp 00028000 fd:01 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
7f8918f53000-7f8918f79000 rwxp 00000000 fd:01 1234                       /usr/local/bin/herald
";

    #[test]
    fn only_the_executables_read_only_code_is_let_go() {
        assert_eq!(
            code_mappings(MAPS, "/usr/local/bin/herald"),
            [(0x55f6cc9bd000, 0x55f6cda0f000)],
            "not its data, not the relocated read-only data, not a writable mapping, not a library"
        );
        assert!(code_mappings(MAPS, "/usr/local/bin/other").is_empty());
    }

    /// This test's own process lets go of its code pages (nextest runs each
    /// test in a process of its own) and runs on: the pages come back from
    /// the file as they were.
    #[test]
    fn code_runs_on_after_its_pages_are_let_go() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let code: usize = code_mappings(&maps, &exe.to_string_lossy())
            .iter()
            .map(|(start, end)| end - start)
            .sum();
        assert!(code > 0, "the test binary's code is found");
        assert_eq!(unmap_code(), Ok(code));
        let mut words: Vec<String> = "the pages come back as they were"
            .split(' ')
            .map(str::to_owned)
            .collect();
        words.sort();
        assert_eq!(words.join(" "), "as back come pages the they were");
        assert_eq!(
            format!("{:?}", code_mappings(MAPS, "/usr/local/bin/herald")),
            "[(94518483079168, 94518500192256)]"
        );
    }
}
