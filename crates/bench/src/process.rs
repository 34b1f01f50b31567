//! The `herald` process under test: where its binary is, the config it is
//! given, its start timed to the ready line on stderr, and what `/proc`
//! says about its memory and CPU time.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// What `herald run` logs once its channels, workers and scheduler are started.
pub const READY_LINE: &str = "herald is running";
/// Lines of Herald's stderr kept for error messages.
const KEPT_LINES: usize = 200;
/// Warning and error lines kept for the report.
const KEPT_WARNINGS: usize = 10;
/// Linux reports CPU times in clock ticks of 1/100 s (`USER_HZ`).
const TICKS_PER_SECOND: f64 = 100.0;

/// `--herald`, or `herald` beside this program (both are built into
/// `target/release` by `cargo build --release`).
pub fn locate_herald(flag: Option<PathBuf>) -> Result<PathBuf> {
    let path = match flag {
        Some(path) => path,
        None => std::env::current_exe()
            .context("finding this program's own path")?
            .with_file_name("herald"),
    };
    if !path.is_file() {
        bail!(
            "no herald binary at {}: build it with `cargo build --release -p herald` or pass --herald PATH",
            path.display()
        );
    }
    Ok(path)
}

/// Writes `herald.yaml` into `dir`: SQLite in `dir` unless `extra` names
/// other storage, the scripted model at `model_url`, `channels` (entries
/// indented by two spaces) and `extra` top-level keys.
pub fn write_config(dir: &Path, model_url: &str, channels: &str, extra: &str) -> Result<PathBuf> {
    let config = dir.join("herald.yaml");
    let storage = if extra.contains("storage:") {
        String::new()
    } else {
        format!("storage:\n  url: sqlite://{}\n", dir.join("herald.db").display())
    };
    let channels = if channels.is_empty() {
        String::new()
    } else {
        format!("channels:\n{channels}")
    };
    let text = format!(
        "{storage}llm:\n  base_url: {model_url}\n  api_key: bench-key\n  model: scripted\n\
         heartbeat:\n  every: 0\n{extra}{channels}"
    );
    std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
    Ok(config)
}

/// A free TCP address on 127.0.0.1 for Herald to listen on (`/metrics`).
pub fn free_address() -> Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?)
}

/// Resident memory of a process, from `/proc/PID/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_kib: u64,
    /// `VmHWM`: the most it was ever resident.
    pub hwm_kib: u64,
    /// `RssAnon`: the resident part that is the process's own (heap, stacks).
    pub anon_kib: u64,
    /// `RssFile`: resident pages of mapped files, mostly the binary's code;
    /// shared with other processes running it and reclaimable.
    pub file_kib: u64,
}

impl Memory {
    pub fn of(pid: u32) -> Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("reading /proc/{pid}/status"))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .with_context(|| format!("no {name} in /proc/{pid}/status"))
        };
        Ok(Self {
            rss_kib: field("VmRSS:")?,
            hwm_kib: field("VmHWM:")?,
            anon_kib: field("RssAnon:")?,
            file_kib: field("RssFile:")?,
        })
    }
}

/// User plus system CPU time a process used so far, in seconds; `pid`
/// `None` is this process.
pub fn cpu_seconds(pid: Option<u32>) -> Result<f64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name is in parentheses and may hold spaces; fields after
    // it start with the state (field 3); utime and stime are fields 14, 15.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|value| value.parse::<u64>().ok())
            .with_context(|| format!("unexpected {path}"))
    };
    Ok((ticks(11)? + ticks(12)?) as f64 / TICKS_PER_SECOND)
}

/// What Herald wrote to stderr: the last lines, and the first warnings.
#[derive(Default)]
struct Log {
    tail: VecDeque<String>,
    warnings: Vec<String>,
    warning_count: usize,
}

/// `text` without terminal colour sequences (`ESC [ … letter`).
fn strip_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for code in chars.by_ref() {
                if code.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// A running `herald --config CONFIG run`; killed when dropped.
pub struct Herald {
    child: Child,
    pid: u32,
    log: Arc<Mutex<Log>>,
    /// From just before the spawn to the ready line arriving on stderr.
    pub ready_after: Duration,
}

impl Herald {
    /// Starts Herald and waits (up to `timeout`) for its ready line.
    pub async fn start(binary: &Path, config: &Path, timeout: Duration) -> Result<Self> {
        let spawned_at = Instant::now();
        let mut child = Command::new(binary)
            .arg("--config")
            .arg(config)
            .arg("run")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let pid = child.id().context("herald exited at once")?;
        let log = Arc::new(Mutex::new(Log::default()));
        let (ready_tx, mut ready) = watch::channel(None::<Instant>);
        let mut lines = BufReader::new(child.stderr.take().context("herald's stderr")?).lines();
        let sink = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let line = strip_ansi(&line);
                if line.contains(READY_LINE) && ready_tx.borrow().is_none() {
                    ready_tx.send_replace(Some(Instant::now()));
                }
                let mut log = sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if line.contains(" WARN ") || line.contains(" ERROR ") {
                    log.warning_count += 1;
                    if log.warnings.len() < KEPT_WARNINGS {
                        log.warnings.push(line.clone());
                    }
                }
                if log.tail.len() == KEPT_LINES {
                    log.tail.pop_front();
                }
                log.tail.push_back(line);
            }
        });
        let mut herald = Self {
            child,
            pid,
            log,
            ready_after: Duration::ZERO,
        };
        let ready_at = tokio::select! {
            ready_at = ready.wait_for(Option::is_some) => ready_at.ok().and_then(|at| *at),
            status = herald.child.wait() => bail!("herald exited ({status:?}) before it was ready:\n{}", herald.log_tail()),
            () = tokio::time::sleep(timeout) => bail!("herald was not ready within {timeout:?}:\n{}", herald.log_tail()),
        };
        let Some(ready_at) = ready_at else {
            // The reader ends when Herald closes stderr, that is when it exits.
            let status = herald.child.wait().await;
            bail!("herald exited ({status:?}) before it was ready:\n{}", herald.log_tail());
        };
        herald.ready_after = ready_at.duration_since(spawned_at);
        Ok(herald)
    }

    pub fn memory(&self) -> Result<Memory> {
        Memory::of(self.pid)
    }

    pub fn cpu_seconds(&self) -> Result<f64> {
        cpu_seconds(Some(self.pid))
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The last lines Herald wrote to stderr.
    pub fn log_tail(&self) -> String {
        self.log().tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Lines of the tail that contain `needle`.
    pub fn log_lines_with(&self, needle: &str) -> Vec<String> {
        self.log()
            .tail
            .iter()
            .filter(|line| line.contains(needle))
            .cloned()
            .collect()
    }

    /// How many warning and error lines Herald logged, and the first few.
    pub fn warnings(&self) -> (usize, Vec<String>) {
        let log = self.log();
        (log.warning_count, log.warnings.clone())
    }

    /// Kills the process and waits for it to be gone.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stripped_from_log_lines() {
        assert_eq!(
            strip_ansi("\u{1b}[2m2026\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m x"),
            "2026  WARN x"
        );
        assert_eq!(strip_ansi("plain"), "plain");
    }
}
