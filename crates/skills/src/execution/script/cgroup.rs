//! A cgroup v2 of its own for each script run, created below the cgroup
//! Herald runs in: the script joins it before it starts, every process it
//! starts is born in it (`setsid`, double forks and all), and writing
//! `cgroup.kill` ends them all at once.
//!
//! Herald can create one when it runs as root on a writable cgroup v2
//! hierarchy, or under systemd with `Delegate=yes`. Elsewhere creating one
//! fails and the caller falls back to the subreaper supervisor.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The prefix of script cgroups; the rest is Herald's pid and a counter.
const PREFIX: &str = "herald-script-";
/// How long ending a cgroup may wait for its processes to be gone.
const EMPTY_WAIT: Duration = Duration::from_secs(10);

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// One script's cgroup; dropping it kills what is left in it and removes it.
#[derive(Debug)]
pub(crate) struct ScriptCgroup {
    path: PathBuf,
    procs: Arc<File>,
}

impl ScriptCgroup {
    /// Creates a new cgroup below Herald's own.
    pub fn create() -> std::io::Result<Self> {
        let parent = parent()?;
        let path = parent.join(format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&path)?;
        // Opened by Herald: the kernel checks the opener's rights when the
        // script, already switched to its own user, moves itself in.
        let procs = match OpenOptions::new().write(true).open(path.join("cgroup.procs")) {
            Ok(file) => file,
            Err(err) => {
                let _ = std::fs::remove_dir(&path);
                return Err(err);
            }
        };
        Ok(Self {
            path,
            procs: Arc::new(procs),
        })
    }

    /// `cgroup.procs`, for the script to write `0` to (itself) before it starts.
    pub fn procs(&self) -> Arc<File> {
        Arc::clone(&self.procs)
    }

    /// Kills every process in the cgroup and waits until none is left.
    pub fn kill_all(&self) -> std::io::Result<()> {
        kill_and_wait(&self.path)
    }
}

impl Drop for ScriptCgroup {
    fn drop(&mut self) {
        // Usually empty by now; after a cancelled run, ended here.
        if let Err(err) = kill_and_wait(&self.path) {
            tracing::warn!(error = %err, cgroup = %self.path.display(), "could not end a script's cgroup");
        }
        if let Err(err) = std::fs::remove_dir(&self.path) {
            tracing::warn!(error = %err, cgroup = %self.path.display(), "script cgroup not removed");
        }
    }
}

/// Kills what is in the cgroup at `path`, waiting until it is empty.
fn kill_and_wait(path: &Path) -> std::io::Result<()> {
    match std::fs::write(path.join("cgroup.kill"), "1") {
        Ok(()) => {}
        // Before Linux 5.14 there is no cgroup.kill: kill what is listed
        // until nothing is.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => kill_listed(path)?,
        Err(err) => return Err(err),
    }
    let deadline = Instant::now() + EMPTY_WAIT;
    while is_populated(path)? {
        if Instant::now() > deadline {
            return Err(std::io::Error::other(
                "processes are still in the cgroup after it was killed",
            ));
        }
        kill_listed(path)?;
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

fn kill_listed(path: &Path) -> std::io::Result<()> {
    for pid in std::fs::read_to_string(path.join("cgroup.procs"))?.split_whitespace() {
        if let Ok(pid) = pid.parse::<i32>() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
    Ok(())
}

fn is_populated(path: &Path) -> std::io::Result<bool> {
    Ok(std::fs::read_to_string(path.join("cgroup.events"))?
        .lines()
        .any(|line| line.trim() == "populated 1"))
}

/// The cgroup Herald runs in, found once; script cgroups go below it.
fn parent() -> std::io::Result<PathBuf> {
    static PARENT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let parent = own_cgroup().map_err(|err| err.to_string())?;
            remove_stale(&parent);
            Ok(parent)
        })
        .clone()
        .map_err(std::io::Error::other)
}

/// The directory of this process's cgroup v2: its `0::` line in
/// `/proc/self/cgroup`, below the mount point of the cgroup2 file system.
fn own_cgroup() -> std::io::Result<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")?;
    let relative = cgroups
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or_else(|| std::io::Error::other("this process is in no cgroup v2"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mount = cgroup2_mount(&mountinfo).ok_or_else(|| std::io::Error::other("no cgroup2 file system is mounted"))?;
    Ok(mount.join(relative.trim_start_matches('/')))
}

/// The mount point of the cgroup2 file system in a `mountinfo` text.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (mount, filesystem) = line.split_once(" - ")?;
        let fields: Vec<&str> = mount.split(' ').collect();
        if filesystem.split(' ').next() != Some("cgroup2") {
            return None;
        }
        fields.get(4).map(PathBuf::from)
    })
}

/// Ends the script cgroups a Herald that is no longer running left behind.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|name| name.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if owner == std::process::id() || Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let path = entry.path();
        if kill_and_wait(&path).is_ok() && std::fs::remove_dir(&path).is_ok() {
            tracing::info!(cgroup = %path.display(), "removed a script cgroup an earlier Herald left behind");
        }
    }
}

/// Writes `0` (the writing process) to `procs`: the script joins its
/// cgroup. Called in the child between fork and exec, so it only makes one
/// `write` system call and allocates nothing.
pub(crate) fn join(procs: &File) -> std::io::Result<()> {
    let mut procs = procs;
    procs.write_all(b"0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_read_from_mountinfo() {
        let hybrid = "24 18 0:21 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro\n\
                      35 24 0:30 / /sys/fs/cgroup/unified rw,nosuid,nodev - cgroup2 cgroup2 rw\n\
                      36 24 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu";
        assert_eq!(cgroup2_mount(hybrid), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        let unified = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw";
        assert_eq!(cgroup2_mount(unified), Some(PathBuf::from("/sys/fs/cgroup")));
        assert_eq!(
            cgroup2_mount("36 24 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu"),
            None
        );
    }
}
