//! Running a file from a skill's `scripts/`, as safely as a plain process
//! allows: in a temporary copy of the skill folder, with an environment
//! scrubbed down to `PATH`, a temporary `HOME` and `LANG=C`, a timeout after
//! which the whole process group is killed, and at most 1 MiB of combined
//! output kept.
//!
//! This is not a sandbox: the script runs as Herald's user. That is why
//! `run_skill_script` is elevated and dangerous.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use crate::budget::{MODEL_OUTPUT_BYTES, STORED_ARGUMENT_BYTES, STORED_OUTPUT_BYTES, cut_end, cut_middle};
use crate::catalog::{list_files, resolve_inside};
use crate::error::SkillError;

pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// How long output is still read after the script ended (a descendant that
/// left the process group may hold the pipe open).
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

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
}

/// What happened, as stored and as shown to the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptReceipt {
    pub script: String,
    pub args: Vec<String>,
    /// The exit code, when the script exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Standard output and error, interleaved as written, at most 1 MiB.
    pub output: String,
    pub truncated: bool,
}

impl ScriptReceipt {
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// What the store keeps of a run: the output and each argument cut to
    /// their caps, the cuts marked, so a receipt costs kilobytes whatever
    /// the script printed.
    pub(crate) fn stored(&self) -> serde_json::Value {
        let (output, left_out) = cut_middle(&self.output, STORED_OUTPUT_BYTES);
        let args: Vec<String> = self
            .args
            .iter()
            .map(|arg| cut_end(arg, STORED_ARGUMENT_BYTES))
            .collect();
        serde_json::json!({
            "script": self.script,
            "args": args,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "duration_ms": self.duration_ms,
            "output": output,
            "output_bytes": self.output.len(),
            "output_truncated": self.truncated || left_out > 0,
        })
    }

    /// What the model reads: the status line and the output, within
    /// [`MODEL_OUTPUT_BYTES`].
    pub(crate) fn for_model(&self) -> String {
        cut_middle(&format!("{}\n{}", self.status(), self.output), MODEL_OUTPUT_BYTES).0
    }

    /// One line: `exit 0 in 120 ms` / `killed after timeout (30000 ms)`.
    pub fn status(&self) -> String {
        match (self.timed_out, self.exit_code, self.signal) {
            (true, _, _) => format!("killed after the timeout ({} ms)", self.duration_ms),
            (false, Some(code), _) => format!("exit {code} in {} ms", self.duration_ms),
            (false, None, Some(signal)) => format!("ended by signal {signal} after {} ms", self.duration_ms),
            (false, None, None) => format!("ended after {} ms", self.duration_ms),
        }
    }
}

/// Runs the script and waits for it, at most `timeout` (and never over 60s).
pub async fn run_skill_script(request: ScriptRequest<'_>) -> Result<ScriptReceipt, SkillError> {
    crate::catalog::check_relative(request.script)?;
    let script = request.script.trim_start_matches("./");
    let script = script.strip_prefix("scripts/").unwrap_or(script);
    let relative = format!("scripts/{script}");
    let original = resolve_inside(request.folder, &relative)?;
    let scripts_dir = request
        .folder
        .join("scripts")
        .canonicalize()
        .map_err(|err| SkillError::io("opening", request.folder.join("scripts"), err))?;
    if !original.starts_with(&scripts_dir) || !original.is_file() {
        return Err(SkillError::refused(format!(
            "`{relative}` is not a file in the skill's scripts/"
        )));
    }

    let sandbox = tempfile::Builder::new()
        .prefix("herald-skill-")
        .tempdir()
        .map_err(|err| SkillError::io("creating a temporary folder in", std::env::temp_dir(), err))?;
    let work = sandbox.path().join("skill");
    let home = sandbox.path().join("home");
    copy_skill(request.folder, &work)?;
    std::fs::create_dir_all(&home).map_err(|err| SkillError::io("creating", &home, err))?;
    let copied = work.join(&relative);

    let (reader, writer) = std::io::pipe().map_err(|err| SkillError::io("creating a pipe for", &copied, err))?;
    let writer_for_stderr = writer
        .try_clone()
        .map_err(|err| SkillError::io("creating a pipe for", &copied, err))?;
    let mut command = interpreter(&copied)?;
    command
        .args(request.args)
        .current_dir(&work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into()))
        .env("HOME", &home)
        .env("LANG", "C")
        .stdin(if request.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer_for_stderr))
        .process_group(0)
        .kill_on_drop(true);

    let started = tokio::time::Instant::now();
    let mut child = command
        .spawn()
        .map_err(|err| SkillError::io("starting", &copied, err))?;
    // The command holds our copies of the pipe's write end; without dropping
    // it the reader would never see the end of the output.
    drop(command);
    let group = child.id();
    let collector = tokio::task::spawn_blocking(move || collect_output(reader));
    if let (Some(input), Some(mut pipe)) = (request.stdin, child.stdin.take()) {
        let input = input.to_owned();
        tokio::spawn(async move {
            // A script that does not read its input closes the pipe; that is fine.
            let _ = pipe.write_all(input.as_bytes()).await;
        });
    }

    let timeout = request.timeout.min(crate::config::MAX_SCRIPT_TIMEOUT);
    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (
            status.map_err(|err| SkillError::io("waiting for", &copied, err))?,
            false,
        ),
        Err(_) => {
            if let Some(group) = group {
                kill_process_group(group);
            }
            let status = child
                .wait()
                .await
                .map_err(|err| SkillError::io("waiting for", &copied, err))?;
            (status, true)
        }
    };
    let duration = started.elapsed();
    // Whatever the script left running in its group goes with it.
    if let Some(group) = group {
        kill_process_group(group);
    }
    let (output, truncated) = match tokio::time::timeout(OUTPUT_GRACE, collector).await {
        Ok(Ok(collected)) => collected,
        _ => (b"[output unavailable: a process kept the output open]".to_vec(), true),
    };
    use std::os::unix::process::ExitStatusExt;
    let mut output = String::from_utf8_lossy(&output).into_owned();
    if truncated {
        output.push_str("\n[output truncated at 1 MiB]");
    }
    Ok(ScriptReceipt {
        script: script.to_owned(),
        args: request.args.to_vec(),
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        duration_ms: duration.as_millis() as u64,
        output,
        truncated,
    })
}

/// How to start a script: itself when it is executable, otherwise by its
/// extension.
fn interpreter(script: &Path) -> Result<tokio::process::Command, SkillError> {
    use std::os::unix::fs::PermissionsExt;
    let executable = script.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    if executable {
        return Ok(tokio::process::Command::new(script));
    }
    let program = match script.extension().and_then(|e| e.to_str()) {
        Some("sh") => "sh",
        Some("bash") => "bash",
        Some("py") => "python3",
        Some("js" | "mjs") => "node",
        _ => {
            return Err(SkillError::refused(format!(
                "`{}` is not executable and has no known extension (.sh, .bash, .py, .js)",
                script
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            )));
        }
    };
    let mut command = tokio::process::Command::new(program);
    command.arg(script);
    Ok(command)
}

/// Copies the skill's files (those [`resolve_inside`] accepts, each checked
/// again right before it is read) into `to`.
fn copy_skill(from: &Path, to: &Path) -> Result<(), SkillError> {
    for file in list_files(from) {
        let source = resolve_inside(from, &file)?;
        let target: PathBuf = to.join(&file);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|err| SkillError::io("creating", parent, err))?;
        }
        std::fs::copy(&source, &target).map_err(|err| SkillError::io("copying", &source, err))?;
    }
    Ok(())
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

/// Sends SIGKILL to every process of the group led by the script.
#[allow(unsafe_code)]
fn kill_process_group(group: u32) {
    let Ok(group) = libc::pid_t::try_from(group) else {
        return;
    };
    if group <= 1 {
        return;
    }
    // SAFETY: killpg takes two integers and only sends a signal; no memory of
    // this process is touched. The group was created for the script by
    // `process_group(0)`, so it holds the script and its descendants only.
    let result = unsafe { libc::killpg(group, libc::SIGKILL) };
    if result != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ESRCH) {
            tracing::warn!(error = %err, group, "could not kill a skill script's process group");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill_with(scripts: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let folder = crate::test_support::write_skill(dir.path(), "tool", "Tool.", "Run scripts.");
        std::fs::create_dir_all(folder.join("scripts")).unwrap();
        for (name, text) in scripts {
            std::fs::write(folder.join("scripts").join(name), text).unwrap();
        }
        (dir, folder)
    }

    fn request<'a>(folder: &'a Path, script: &'a str, args: &'a [String]) -> ScriptRequest<'a> {
        ScriptRequest {
            folder,
            script,
            args,
            stdin: None,
            timeout: Duration::from_secs(20),
        }
    }

    #[tokio::test]
    async fn a_script_runs_in_a_copy_with_a_scrubbed_environment() {
        let (_dir, folder) = skill_with(&[(
            "env.sh",
            "echo \"args=$*\"; echo \"home=$HOME\"; echo \"lang=$LANG\"; env | cut -d= -f1 | sort | tr '\\n' ' ';\
             echo; cat SKILL.md | head -1; echo changed > SKILL.md; echo oops >&2; exit 3",
        )]);
        let args = vec!["a".to_owned(), "b c".to_owned()];
        let receipt = run_skill_script(request(&folder, "env.sh", &args)).await.unwrap();
        assert_eq!(receipt.exit_code, Some(3), "{receipt:?}");
        assert!(receipt.output.contains("args=a b c"), "{}", receipt.output);
        assert!(receipt.output.contains("home=/"), "{}", receipt.output);
        assert!(
            !receipt
                .output
                .contains(&format!("home={}", std::env::var("HOME").unwrap_or_default()))
        );
        assert!(receipt.output.contains("lang=C"));
        let names_line = receipt.output.lines().find(|l| l.contains("PATH")).unwrap();
        let mut names: Vec<&str> = names_line.split_whitespace().collect();
        names.retain(|n| !["PWD", "SHLVL", "_", "OLDPWD"].contains(n));
        assert_eq!(names, vec!["HOME", "LANG", "PATH"], "{names_line}");
        assert!(receipt.output.contains("---"));
        assert!(receipt.output.contains("oops"), "stderr is captured");
        assert!(
            std::fs::read_to_string(folder.join("SKILL.md"))
                .unwrap()
                .starts_with("---")
        );
        assert_eq!(receipt.status().split(" in ").next(), Some("exit 3"));
    }

    #[tokio::test]
    async fn stdin_reaches_the_script() {
        let (_dir, folder) = skill_with(&[("upper.sh", "tr a-z A-Z")]);
        let mut req = request(&folder, "scripts/upper.sh", &[]);
        req.stdin = Some("hello");
        let receipt = run_skill_script(req).await.unwrap();
        assert!(receipt.succeeded());
        assert_eq!(receipt.output, "HELLO");
    }

    #[tokio::test]
    async fn only_files_in_scripts_may_run() {
        let (_dir, folder) = skill_with(&[("ok.sh", "true"), ("data.txt", "x")]);
        std::fs::write(folder.join("outside.sh"), "true").unwrap();
        for (script, fragment) in [
            ("../outside.sh", "`..`"),
            ("/bin/sh", "relative"),
            ("missing.sh", "no file `scripts/missing.sh`"),
            ("data.txt", "not executable"),
        ] {
            let err = run_skill_script(request(&folder, script, &[]))
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(fragment), "{script}: {err}");
        }
    }

    #[tokio::test]
    async fn output_is_capped_at_one_mebibyte() {
        let (_dir, folder) = skill_with(&[("loud.sh", "head -c 3000000 /dev/zero | tr '\\0' x")]);
        let receipt = run_skill_script(request(&folder, "loud.sh", &[])).await.unwrap();
        assert!(receipt.truncated);
        assert!(receipt.output.len() < MAX_OUTPUT_BYTES + 100);
        assert!(receipt.output.ends_with("[output truncated at 1 MiB]"));
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_process_group() {
        let (_dir, folder) = skill_with(&[("hang.sh", "sleep 300 &\necho \"child $!\"\nsleep 300\n")]);
        let mut req = request(&folder, "hang.sh", &[]);
        req.timeout = Duration::from_millis(500);
        let receipt = run_skill_script(req).await.unwrap();
        assert!(receipt.timed_out, "{receipt:?}");
        assert_eq!(receipt.signal, Some(libc::SIGKILL));
        let child: u32 = receipt
            .output
            .lines()
            .find_map(|l| l.strip_prefix("child "))
            .and_then(|pid| pid.trim().parse().ok())
            .unwrap_or_else(|| panic!("no child pid in {:?}", receipt.output));
        // The background `sleep` was in the group: it must be gone (or a
        // zombie waiting for init), not sleeping on.
        let mut alive = true;
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
            if stat.is_empty() || state == Some("Z") || state == Some("X") {
                alive = false;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive, "background child {child} survived the timeout");
    }
}
