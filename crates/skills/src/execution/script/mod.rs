//! Running a file from a skill's `scripts/`: in a temporary copy of the
//! skill folder, with the files of the message being answered in `files/`
//! beside it ([`files`]), with an environment scrubbed down to `PATH`, a
//! temporary `HOME`, `LANG=C` and, when there are files,
//! `HERALD_FILES_DIR`, as an unprivileged user when Herald runs as root
//! ([`user`]), in a session of its own, and within a timeout.
//!
//! Every process a script starts ends with it: the script runs in a cgroup
//! of its own ([`cgroup`]) or, where Herald cannot create one, under the
//! subreaper supervisor ([`supervisor`]). Either way a child that escaped
//! with `setsid` or a double fork is killed when the script ends, so the
//! output is read to its end at once and no run waits on a leftover.
//! At most 1 MiB of combined output is kept, and the files it left in
//! `out/` ([`outputs`]).
//!
//! Scripts are still programs Herald runs on its host, with the network
//! and the files their user can reach: that is why `run_skill_script` is
//! elevated and dangerous.

mod cgroup;
mod files;
mod outputs;
mod prepare;
mod receipt;
mod supervisor;
#[cfg(test)]
mod tests;
mod user;

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;

pub use files::{FILES_DIR_VARIABLE, ScriptFile};
pub use outputs::ScriptFiles;
pub use receipt::ScriptReceipt;
pub use supervisor::{SUPERVISOR_ARG, script_supervisor_entry};

use crate::config::ScriptContainment;
use crate::error::SkillError;
use cgroup::ScriptCgroup;
use prepare::{Prepared, prepare};
use supervisor::{Invocation, Outcome};

pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// How long output is still read once every process of the script is gone.
/// Nothing should hold the pipe then; this only keeps a bug from hanging a
/// turn.
const OUTPUT_GRACE: Duration = Duration::from_secs(5);
/// How long the supervisor gets past the timeout to end the script and
/// report, before Herald stops waiting for it.
const SUPERVISOR_GRACE: Duration = Duration::from_secs(5);

/// What to run.
#[derive(Clone, Debug)]
pub struct ScriptRequest<'a> {
    /// The skill folder as loaded (canonical): a folder that is no longer
    /// there, or became a link, is refused.
    pub folder: &'a Path,
    /// A file under `scripts/`, with or without that prefix.
    pub script: &'a str,
    pub args: &'a [String],
    pub stdin: Option<&'a str>,
    pub timeout: Duration,
    /// `skills.script_user`.
    pub script_user: Option<&'a str>,
    /// `skills.script_containment`.
    pub containment: ScriptContainment,
    /// The files of the message being answered, written to `files/`.
    pub files: &'a [ScriptFile],
}

/// How this run holds the script's processes.
enum Hold {
    Cgroup(ScriptCgroup),
    Subreaper(&'static Path),
}

/// How the script ended.
struct Ended {
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
}

/// Runs the script and waits for it, at most `timeout` (and never over 60s).
pub async fn run_skill_script(request: ScriptRequest<'_>) -> Result<ScriptReceipt, SkillError> {
    let folder = request.folder.to_path_buf();
    let script = request.script.to_owned();
    let script_user = request.script_user.map(str::to_owned);
    let files = request.files.to_vec();
    let prepared = tokio::task::spawn_blocking(move || prepare(&folder, &script, script_user.as_deref(), &files))
        .await
        .map_err(|err| SkillError::refused(format!("preparing the script failed: {err}")))??;
    let hold = tokio::task::spawn_blocking(move || choose(request.containment))
        .await
        .map_err(|err| SkillError::refused(format!("preparing the script failed: {err}")))??;

    let (reader, writer) = std::io::pipe().map_err(|err| SkillError::io("creating a pipe for", &prepared.work, err))?;
    let writer_for_stderr = writer
        .try_clone()
        .map_err(|err| SkillError::io("creating a pipe for", &prepared.work, err))?;
    let collector = tokio::task::spawn_blocking(move || collect_output(reader));
    let timeout = request.timeout.min(crate::config::MAX_SCRIPT_TIMEOUT);
    let output = (Stdio::from(writer), Stdio::from(writer_for_stderr));
    let started = tokio::time::Instant::now();
    let ended = match hold {
        Hold::Cgroup(cgroup) => run_in_cgroup(&prepared, &request, timeout, output, cgroup).await?,
        Hold::Subreaper(program) => run_supervised(&prepared, &request, timeout, output, program).await?,
    };
    let duration = started.elapsed();
    // Every process that could write to the pipe is gone: the reader ends.
    let (output, truncated) = match tokio::time::timeout(OUTPUT_GRACE, collector).await {
        Ok(Ok((bytes, truncated))) => {
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            if truncated {
                text.push_str("\n[output truncated at 1 MiB]");
            }
            (text, truncated)
        }
        _ => {
            tracing::warn!(script = %prepared.script, "script output still open after every process ended");
            (
                "[output incomplete: it was still open after the script ended]".to_owned(),
                false,
            )
        }
    };
    let out = prepared.out.clone();
    let files = tokio::task::spawn_blocking(move || outputs::collect(&out))
        .await
        .unwrap_or_default();
    Ok(ScriptReceipt {
        files,
        script: prepared.script.clone(),
        args: request.args.to_vec(),
        exit_code: ended.exit_code,
        signal: ended.signal,
        timed_out: ended.timed_out,
        duration_ms: duration.as_millis() as u64,
        output,
        truncated,
        inputs: prepared.file_names.clone(),
    })
}

/// Why scripts could not run with this `skills.script_user`, if they could
/// not: for a warning at start rather than a surprise at the first script.
pub(crate) fn script_user_problem(script_user: Option<&str>) -> Option<SkillError> {
    user::RunAs::resolve(script_user).err()
}

/// Decides how this run holds the script's processes. Blocking (a cgroup
/// is created).
fn choose(containment: ScriptContainment) -> Result<Hold, SkillError> {
    let supervisor = || {
        supervisor::program().ok_or_else(|| {
            SkillError::refused(
                "skill scripts need the script supervisor of the `herald` binary (or a cgroup Herald can create), \
                 and this process has neither; the script was not run",
            )
        })
    };
    match containment {
        ScriptContainment::Cgroup => ScriptCgroup::create().map(Hold::Cgroup).map_err(|err| {
            SkillError::refused(format!(
                "skills.script_containment is `cgroup`, but Herald cannot create a cgroup here ({err}); the \
                 script was not run"
            ))
        }),
        ScriptContainment::Subreaper => supervisor().map(Hold::Subreaper),
        ScriptContainment::Auto => match ScriptCgroup::create() {
            Ok(cgroup) => {
                say_once("a cgroup per script", None);
                Ok(Hold::Cgroup(cgroup))
            }
            Err(err) => {
                let program = supervisor()?;
                say_once("the subreaper supervisor", Some(&err));
                Ok(Hold::Subreaper(program))
            }
        },
    }
}

/// Logs once which way `auto` holds scripts.
fn say_once(how: &str, cgroup_error: Option<&std::io::Error>) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        match cgroup_error {
            None => tracing::info!(containment = how, "skill scripts are contained"),
            Some(err) => tracing::info!(containment = how, cgroup_error = %err, "skill scripts are contained"),
        }
    }
}

/// The environment a script gets, and nothing else of Herald's.
fn script_environment(prepared: &Prepared) -> Vec<(&'static str, OsString)> {
    let mut environment = vec![
        ("PATH", std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into())),
        ("HOME", prepared.home.clone().into()),
        ("LANG", "C".into()),
        ("HERALD_OUT_DIR", prepared.out.clone().into()),
    ];
    if let Some(files_dir) = &prepared.files_dir {
        environment.push((FILES_DIR_VARIABLE, files_dir.clone().into()));
    }
    environment
}

/// Starts the script itself, joined to `cgroup` in a session of its own;
/// at the end (or the timeout) every process in the cgroup is killed.
async fn run_in_cgroup(
    prepared: &Prepared,
    request: &ScriptRequest<'_>,
    timeout: Duration,
    (stdout, stderr): (Stdio, Stdio),
    cgroup: ScriptCgroup,
) -> Result<Ended, SkillError> {
    let mut command = tokio::process::Command::new(&prepared.program);
    command
        .args(&prepared.leading_args)
        .args(request.args)
        .current_dir(&prepared.work)
        .env_clear()
        .envs(script_environment(prepared))
        .stdin(if request.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true);
    if let Some((uid, gid)) = prepared.run_as.ids() {
        command.uid(uid.as_raw()).gid(gid.as_raw());
    }
    let procs = cgroup.procs();
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed. It makes two system calls,
    // setsid(2) and write(2) on a file opened before the fork, allocates
    // nothing, and its errors are plain errno values.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid()?;
            cgroup::join(&procs)
        });
    }
    let mut child = command.spawn().map_err(|err| {
        if err.kind() == std::io::ErrorKind::NotFound {
            return SkillError::io("starting", &prepared.program, err);
        }
        // Otherwise the join is the likeliest failure: a cgroup Herald may
        // create but not move processes into (controllers enabled above it,
        // or a kernel before 5.16 checking the script's own user).
        SkillError::refused(format!(
            "`{}` could not be started in its cgroup ({err}); the script was not run. If this host's cgroups do \
             not let Herald move processes, set skills.script_containment: subreaper",
            prepared.script
        ))
    })?;
    // The command holds copies of the output pipe; the reader sees the end
    // only once every copy is closed.
    drop(command);
    if let (Some(input), Some(mut pipe)) = (request.stdin, child.stdin.take()) {
        let input = input.to_owned();
        tokio::spawn(async move {
            // A script that does not read its input closes the pipe; that is fine.
            let _ = pipe.write_all(input.as_bytes()).await;
        });
    }
    let cgroup = std::sync::Arc::new(cgroup);
    let kill_all = || {
        let cgroup = std::sync::Arc::clone(&cgroup);
        async move {
            let ended = tokio::task::spawn_blocking(move || cgroup.kill_all()).await;
            if let Ok(Err(err)) | Err(err) = ended.map_err(std::io::Error::other) {
                tracing::warn!(error = %err, "could not end every process of a skill script");
            }
        }
    };
    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (status, false),
        Err(_) => {
            kill_all().await;
            (child.wait().await, true)
        }
    };
    let status = status.map_err(|err| SkillError::io("waiting for", &prepared.program, err))?;
    // Whatever the script left running goes with it.
    kill_all().await;
    Ok(ended_by(status, timed_out))
}

fn ended_by(status: ExitStatus, timed_out: bool) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    Ended {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
    }
}

/// Starts the script under the subreaper supervisor, which ends it and
/// everything it started and reports how it ended.
async fn run_supervised(
    prepared: &Prepared,
    request: &ScriptRequest<'_>,
    timeout: Duration,
    (stdout, stderr): (Stdio, Stdio),
    program: &'static Path,
) -> Result<Ended, SkillError> {
    let top = prepared.sandbox.path();
    let stdin_file = match request.stdin {
        Some(input) => {
            let path = top.join("stdin");
            std::fs::write(&path, input).map_err(|err| SkillError::io("writing", &path, err))?;
            Some(path)
        }
        None => None,
    };
    let status_file = top.join("status.json");
    let invocation = Invocation {
        timeout,
        status_file: status_file.clone(),
        ids: prepared.run_as.ids().map(|(uid, gid)| (uid.as_raw(), gid.as_raw())),
        stdin_file,
        program: prepared.program.clone(),
        args: prepared
            .leading_args
            .iter()
            .cloned()
            .chain(request.args.iter().map(OsString::from))
            .collect(),
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(invocation.to_args())
        .current_dir(&prepared.work)
        .env_clear()
        .envs(script_environment(prepared))
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(stderr)
        // Killing the supervisor would leave the script's processes behind;
        // closing its control pipe makes it end them all and exit.
        .kill_on_drop(false);
    let mut supervisor = command
        .spawn()
        .map_err(|err| SkillError::io("starting the script supervisor", program, err))?;
    drop(command);
    let control = supervisor.stdin.take();
    let status = match tokio::time::timeout(timeout + SUPERVISOR_GRACE, supervisor.wait()).await {
        Ok(status) => status,
        Err(_) => {
            drop(control);
            match tokio::time::timeout(SUPERVISOR_GRACE, supervisor.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    tracing::warn!("the script supervisor did not end; killing it");
                    let _ = supervisor.start_kill();
                    supervisor.wait().await
                }
            }
        }
    }
    .map_err(|err| SkillError::io("waiting for the script supervisor", program, err))?;
    let outcome: Outcome = std::fs::read(&status_file)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| {
            SkillError::refused(format!(
                "the script supervisor ended ({status}) without saying how the script did"
            ))
        })?;
    if outcome.killed_descendants > 0 {
        tracing::info!(
            script = %prepared.script,
            processes = outcome.killed_descendants,
            "processes the script left behind were killed"
        );
    }
    Ok(Ended {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        timed_out: outcome.timed_out,
    })
}

/// Reads until every writer is gone, keeping at most [`MAX_OUTPUT_BYTES`].
fn collect_output(mut reader: std::io::PipeReader) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buffer = [0u8; 8192];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let room = MAX_OUTPUT_BYTES - kept.len();
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    (kept, truncated)
}
