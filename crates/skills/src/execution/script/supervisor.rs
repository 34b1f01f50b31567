//! The subreaper supervisor: where Herald cannot create a cgroup, a script
//! runs under a small process of its own that adopts every descendant the
//! script orphans (`PR_SET_CHILD_SUBREAPER`, so `setsid` and double forks
//! do not escape it), and kills and reaps them all when the script ends,
//! times out, or Herald goes away.
//!
//! The supervisor is the `herald` binary started again with
//! [`SUPERVISOR_ARG`]; the binary's `main` calls
//! [`script_supervisor_entry`] first thing, which runs the supervisor when
//! asked to and otherwise makes this executable the one scripts run under.
//!
//! Protocol: the supervisor's standard output and error are the script's;
//! its standard input is Herald's control pipe, whose end (Herald done with
//! the run, or gone) means "stop now"; the outcome is written as JSON to a
//! status file Herald names, in a folder only Herald writes.
//!
//! The supervisor starts its own session, so the script has no terminal of
//! Herald's and signals aimed at Herald's process group miss it. It never
//! reads Herald's configuration and gets only the scrubbed environment the
//! script gets.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// The first argument that makes `herald` a script supervisor.
pub const SUPERVISOR_ARG: &str = "__herald-skill-script-supervisor";

/// How often the supervisor looks at the script, the clock and the pipe.
const POLL: Duration = Duration::from_millis(5);

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Call first thing in `main`. When this process was started as a script
/// supervisor, runs it and returns the exit code to end with; otherwise
/// makes this executable the supervisor of skill scripts and returns `None`.
pub fn script_supervisor_entry() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().as_deref() != Some(SUPERVISOR_ARG.as_ref()) {
        // `/proc/self/exe` names this very binary even if the file on disk
        // is replaced by an upgrade while Herald runs.
        let _ = PROGRAM.set(PathBuf::from("/proc/self/exe"));
        return None;
    }
    Some(match Invocation::parse(args.collect()) {
        Ok(invocation) => supervise(invocation),
        Err(reason) => {
            eprintln!("herald script supervisor: {reason}");
            ExitCode::from(2)
        }
    })
}

/// The program scripts run under, when the binary registered itself.
pub(crate) fn program() -> Option<&'static Path> {
    PROGRAM.get().map(PathBuf::as_path)
}

/// How the script ended, as the supervisor reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Outcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Herald closed the control pipe before the script ended.
    pub stopped: bool,
    /// Descendants killed after the script itself had ended or was killed.
    pub killed_descendants: usize,
}

/// What the supervisor is asked to run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Invocation {
    pub timeout: Duration,
    pub status_file: PathBuf,
    pub ids: Option<(u32, u32)>,
    pub stdin_file: Option<PathBuf>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

impl Invocation {
    /// The arguments after [`SUPERVISOR_ARG`].
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            SUPERVISOR_ARG.into(),
            self.timeout.as_millis().to_string().into(),
            self.status_file.clone().into(),
            self.ids
                .map_or_else(|| "-".into(), |(uid, gid)| format!("{uid}:{gid}"))
                .into(),
            self.stdin_file.clone().map_or_else(|| "-".into(), OsString::from),
            "--".into(),
            self.program.clone(),
        ];
        args.extend(self.args.iter().cloned());
        args
    }

    fn parse(args: Vec<OsString>) -> Result<Self, String> {
        let text = |arg: Option<&OsString>, what: &str| {
            arg.and_then(|a| a.to_str())
                .map(str::to_owned)
                .ok_or_else(|| format!("missing or unreadable {what}"))
        };
        let timeout_ms: u64 = text(args.first(), "timeout")?
            .parse()
            .map_err(|_| "the timeout is not a number".to_owned())?;
        let status_file = PathBuf::from(args.get(1).ok_or("missing status file")?);
        let ids = match text(args.get(2), "user")?.as_str() {
            "-" => None,
            ids => {
                let (uid, gid) = ids.split_once(':').ok_or("user is not UID:GID")?;
                Some((uid.parse().map_err(|_| "bad uid")?, gid.parse().map_err(|_| "bad gid")?))
            }
        };
        let stdin_file = match args.get(3).ok_or("missing input file")? {
            dash if dash == "-" => None,
            path => Some(PathBuf::from(path)),
        };
        if args.get(4).map(OsString::as_os_str) != Some("--".as_ref()) {
            return Err("expected `--` before the program".into());
        }
        let program = args.get(5).ok_or("missing program")?.clone();
        Ok(Self {
            timeout: Duration::from_millis(timeout_ms),
            status_file,
            ids,
            stdin_file,
            program,
            args: args[6..].to_vec(),
        })
    }
}

fn supervise(invocation: Invocation) -> ExitCode {
    let outcome = match run(&invocation) {
        Ok(outcome) => outcome,
        Err(reason) => {
            eprintln!("herald script supervisor: {reason}");
            return ExitCode::from(2);
        }
    };
    let status = serde_json::to_vec(&outcome).expect("an outcome serialises");
    if let Err(err) = std::fs::write(&invocation.status_file, status) {
        eprintln!("herald script supervisor: cannot write the status: {err}");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

fn run(invocation: &Invocation) -> Result<Outcome, String> {
    nix::unistd::setsid().map_err(|err| format!("cannot start a session: {err}"))?;
    nix::sys::prctl::set_child_subreaper(true).map_err(|err| format!("cannot become a subreaper: {err}"))?;
    let stdin = match &invocation.stdin_file {
        Some(path) => Stdio::from(std::fs::File::open(path).map_err(|err| format!("cannot open the input: {err}"))?),
        None => Stdio::null(),
    };
    let mut command = std::process::Command::new(&invocation.program);
    command.args(&invocation.args).stdin(stdin);
    if let Some((uid, gid)) = invocation.ids {
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(gid);
    }
    let started = Instant::now();
    let script = command
        .spawn()
        .map_err(|err| format!("cannot start {}: {err}", invocation.program.to_string_lossy()))?;
    let script = Pid::from_raw(script.id() as i32);

    // Herald's end of the control pipe closing means: stop now.
    let (stop_tx, stop_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = stop_tx.send(());
    });

    let mut outcome = Outcome::default();
    let mut ended = false;
    while !ended {
        // Reap whatever ended: the script, or orphans adopted meanwhile.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == script => {
                    outcome.exit_code = Some(code);
                    ended = true;
                }
                Ok(WaitStatus::Signaled(pid, signal, _)) if pid == script => {
                    outcome.signal = Some(signal as i32);
                    ended = true;
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        if ended {
            break;
        }
        if started.elapsed() >= invocation.timeout {
            outcome.timed_out = true;
            break;
        }
        if stop_rx.try_recv().is_ok() {
            outcome.stopped = true;
            break;
        }
        std::thread::sleep(POLL);
    }
    outcome.killed_descendants = kill_and_reap_all(script, &mut outcome);
    Ok(outcome)
}

/// Kills every child of this process, and the children that dying ones
/// leave to it, until there is none: then no descendant is left. The
/// script's status is recorded if it is reaped here.
fn kill_and_reap_all(script: Pid, outcome: &mut Outcome) -> usize {
    let me = nix::unistd::getpid();
    let mut killed = std::collections::HashSet::new();
    loop {
        for child in children_of(me) {
            if kill(child, Signal::SIGKILL).is_ok() && child != script {
                killed.insert(child);
            }
        }
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == script => outcome.exit_code = Some(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == script => outcome.signal = Some(signal as i32),
            Ok(_) => {}
            // ECHILD: no child is left, so no descendant is.
            Err(_) => return killed.len(),
        }
    }
}

/// The processes whose parent is `parent`, from `/proc`.
fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| parent_in_stat(&stat))
                == Some(parent.as_raw())
        })
        .map(Pid::from_raw)
        .collect()
}

/// The parent pid in a `/proc/PID/stat` line: the field after the state,
/// which follows the last `)` (a command name may contain anything).
fn parent_in_stat(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invocation_survives_its_arguments() {
        for invocation in [
            Invocation {
                timeout: Duration::from_millis(30_000),
                status_file: "/tmp/run/status.json".into(),
                ids: Some((65534, 65534)),
                stdin_file: Some("/tmp/run/stdin".into()),
                program: "sh".into(),
                args: vec!["/tmp/run/skill/scripts/x.sh".into(), "--".into(), "a b".into()],
            },
            Invocation {
                timeout: Duration::from_millis(1),
                status_file: "s".into(),
                ids: None,
                stdin_file: None,
                program: "/tmp/x".into(),
                args: Vec::new(),
            },
        ] {
            let args = invocation.to_args();
            assert_eq!(args[0], SUPERVISOR_ARG);
            assert_eq!(Invocation::parse(args[1..].to_vec()).unwrap(), invocation);
        }
        assert!(Invocation::parse(vec!["soon".into()]).is_err());
    }

    #[test]
    fn the_parent_is_read_after_the_command_name() {
        assert_eq!(parent_in_stat("42 (sh) S 7 42 42 0"), Some(7));
        assert_eq!(parent_in_stat("42 (a) b) (c) R 9 1"), Some(9));
        assert_eq!(parent_in_stat("garbage"), None);
    }
}
