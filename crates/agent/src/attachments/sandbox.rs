//! A sender's file read in a child process of its own, so no file can make
//! Herald hold more memory or time than a fixed bound, whatever it is and
//! however many arrive at once.
//!
//! A PDF parser builds an object for every token it reads (ten million
//! zeros in an array are ten million objects, a gigabyte); an image decoder
//! allocates its pixels. Neither can be bounded from the outside while it
//! runs in Herald's own process. Here the herald binary runs itself again
//! (`/proc/self/exe __herald-read-file …`), with an empty environment, at a
//! lower CPU priority, with at most [`MEMORY_LIMIT`] of heap
//! (`RLIMIT_DATA`) and [`CPU_LIMIT`] of CPU; the file goes in on stdin and
//! what was read comes back as one JSON value on stdout, capped. At most
//! [`AT_ONCE`] such readers run at a time, whatever the core count, and one
//! that runs past its deadline is killed. A reader that runs out of memory
//! or crashes costs its own process: the model is told the file could not
//! be read, and Herald goes on.
//!
//! Without the binary's entry ([`file_reader_entry`] not called: a library
//! test), files are read on the blocking pool, as many at once.

use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use super::{image, pdf};

/// The argument that makes the herald binary a file reader.
const READER_ARG: &str = "__herald-read-file";
/// Heap a reader may take.
pub const MEMORY_LIMIT: u64 = 256 * 1024 * 1024;
/// CPU seconds a reader may use; the wall-clock deadline is the caller's.
const CPU_LIMIT: u64 = 30;
/// Readers running at once in one Herald process.
pub const AT_ONCE: usize = 2;
/// The most a reader's answer may be (an image's JPEG data URL is the
/// largest, well under it).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// The most a reader reads from stdin.
const MAX_INPUT_BYTES: u64 = 256 * 1024 * 1024;

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// What a reader is asked to do with the file on its stdin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "job", rename_all = "snake_case")]
pub(super) enum Job {
    /// A PDF's text layer, at most about `max_chars` of it.
    PdfText { max_chars: usize },
    /// An image, downscaled to `max_side` and encoded as a JPEG data URL.
    Image { max_side: u32 },
}

/// What a reader answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Answer {
    PdfText(pdf::PdfText),
    Image {
        data_url: String,
    },
    /// Why the file could not be read, as a phrase for the model.
    Refused(String),
}

/// Call first thing in `main`, before anything else reads the command line.
/// When this process was started as a file reader, reads the file and
/// returns the exit code to end with; otherwise registers this binary as
/// the program readers run as and returns `None`.
pub fn file_reader_entry() -> Option<ExitCode> {
    let mut args = std::env::args();
    let _program = args.next();
    if args.next().as_deref() != Some(READER_ARG) {
        // `/proc/self/exe` names this very binary even after an upgrade
        // replaced the file on disk.
        let _ = PROGRAM.set(PathBuf::from("/proc/self/exe"));
        return None;
    }
    let job = args.next().and_then(|job| serde_json::from_str::<Job>(&job).ok());
    let Some(job) = job else {
        eprintln!("herald file reader: no job given");
        return Some(ExitCode::from(2));
    };
    confine();
    let mut input = Vec::new();
    if let Err(err) =
        std::io::Read::read_to_end(&mut std::io::Read::take(std::io::stdin(), MAX_INPUT_BYTES), &mut input)
    {
        eprintln!("herald file reader: reading the file: {err}");
        return Some(ExitCode::from(2));
    }
    let answer = read(&job, &input);
    let mut stdout = std::io::stdout().lock();
    match serde_json::to_writer(&mut stdout, &answer) {
        Ok(()) => Some(ExitCode::SUCCESS),
        Err(err) => {
            eprintln!("herald file reader: writing the answer: {err}");
            Some(ExitCode::from(2))
        }
    }
}

/// The reader's own limits, set before it reads a byte of the file.
fn confine() {
    use rustix::process::{Resource, Rlimit, setrlimit};
    for (resource, limit) in [
        (Resource::Data, MEMORY_LIMIT),
        (Resource::Cpu, CPU_LIMIT),
        (Resource::Core, 0),
    ] {
        let limit = Rlimit {
            current: Some(limit),
            maximum: Some(limit),
        };
        if let Err(err) = setrlimit(resource, limit) {
            eprintln!("herald file reader: setrlimit {resource:?}: {err}");
        }
    }
    // The gateway's own threads go first when the CPU is contended.
    let _ = rustix::process::nice(10);
}

/// The job done in this process. Blocking.
fn read(job: &Job, input: &[u8]) -> Answer {
    match job {
        Job::PdfText { max_chars } => match pdf::read_text_blocking(input, *max_chars) {
            Ok(text) => Answer::PdfText(text),
            Err(why) => Answer::Refused(why),
        },
        Job::Image { max_side } => match image::to_part(input, *max_side) {
            Ok(part) => Answer::Image {
                data_url: part.data_url,
            },
            Err(why) => Answer::Refused(why),
        },
    }
}

/// Readers running now, in the whole process (whatever reads files).
static RUNNING: Semaphore = Semaphore::const_new(AT_ONCE);

/// A reader's place, taken before the file is even read from the store.
#[derive(Debug)]
pub(super) struct Slot(#[allow(dead_code)] tokio::sync::SemaphorePermit<'static>);

/// Waits for a reader to be free.
pub(super) async fn slot() -> Slot {
    Slot(RUNNING.acquire().await.expect("the readers' semaphore is never closed"))
}

impl Slot {
    /// What a reader made of `input`, or why there is nothing, as a phrase
    /// for the model; within `deadline`.
    pub(super) async fn run(self, job: Job, input: Vec<u8>, deadline: Duration) -> Result<Answer, String> {
        let answer = match PROGRAM.get() {
            Some(program) => in_child(program, &job, input, deadline).await,
            None => {
                let reading = tokio::task::spawn_blocking(move || read(&job, &input));
                match tokio::time::timeout(deadline, reading).await {
                    Ok(Ok(answer)) => Ok(answer),
                    Ok(Err(_)) => Err("reading it failed".to_owned()),
                    Err(_) => Err(too_slow(deadline)),
                }
            }
        };
        drop(self);
        answer
    }
}

fn too_slow(deadline: Duration) -> String {
    format!("reading it took longer than {} seconds", deadline.as_secs().max(1))
}

async fn in_child(program: &PathBuf, job: &Job, input: Vec<u8>, deadline: Duration) -> Result<Answer, String> {
    let job_text = serde_json::to_string(job).map_err(|err| err.to_string())?;
    let mut child = tokio::process::Command::new(program)
        .arg(READER_ARG)
        .arg(job_text)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| {
            warn!(error = %err, "could not start a file reader");
            "Herald could not start its file reader".to_owned()
        })?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let work = async {
        // The file goes in while the answer comes out: a reader that
        // answers early (a refusal) must not wait on a full pipe.
        let feed = async move {
            let _ = stdin.write_all(&input).await;
            drop(stdin);
        };
        let mut answer = Vec::new();
        let mut complaint = Vec::new();
        let collect = async {
            let _ = (&mut stdout)
                .take(MAX_ANSWER_BYTES as u64 + 1)
                .read_to_end(&mut answer)
                .await;
        };
        let complain = async {
            let _ = (&mut stderr).take(4096).read_to_end(&mut complaint).await;
        };
        tokio::join!(feed, collect, complain);
        let status = child.wait().await;
        (status, answer, complaint)
    };
    let Ok((status, answer, complaint)) = tokio::time::timeout(deadline, work).await else {
        // Dropping the child kills it (kill_on_drop).
        return Err(too_slow(deadline));
    };
    let status = status.map_err(|err| format!("its reader could not be waited for: {err}"))?;
    if !complaint.is_empty() {
        debug!(stderr = %String::from_utf8_lossy(&complaint).trim(), "file reader stderr");
    }
    if !status.success() {
        return Err(crashed(status));
    }
    if answer.len() > MAX_ANSWER_BYTES {
        return Err("what it holds is more than Herald takes from one file".to_owned());
    }
    serde_json::from_slice(&answer).map_err(|_| "its reader gave no answer".to_owned())
}

/// Why a reader that did not exit cleanly gave nothing, for the model.
fn crashed(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        // An allocation over the limit aborts; the CPU limit sends SIGXCPU
        // (then SIGKILL).
        Some(6) => format!(
            "reading it needs more than the {} of memory Herald gives one file",
            herald_core::human_size(MEMORY_LIMIT)
        ),
        Some(24 | 9) => "reading it took more CPU time than Herald gives one file".to_owned(),
        _ => "it is not a file Herald can read (its reader failed)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_and_answers_keep_their_shape_on_the_wire() {
        let job = Job::PdfText { max_chars: 100 };
        let text = serde_json::to_string(&job).unwrap();
        assert_eq!(text, r#"{"job":"pdf_text","max_chars":100}"#);
        assert_eq!(serde_json::from_str::<Job>(&text).unwrap(), job);
        let answer = Answer::Refused("it is encrypted".into());
        let text = serde_json::to_string(&answer).unwrap();
        assert_eq!(serde_json::from_str::<Answer>(&text).unwrap(), answer);
    }

    #[tokio::test]
    async fn without_the_binary_files_are_read_on_the_blocking_pool() {
        let pdf = herald_testkit::pdf::pdf_with_text("Hello sandbox");
        let answer = slot()
            .await
            .run(Job::PdfText { max_chars: 100 }, pdf, Duration::from_secs(10))
            .await
            .unwrap();
        let Answer::PdfText(read) = answer else {
            panic!("{answer:?}")
        };
        assert_eq!(read.text.trim(), "Hello sandbox");
    }

    #[test]
    fn a_crash_is_told_by_its_signal() {
        use std::os::unix::process::ExitStatusExt;
        let aborted = crashed(std::process::ExitStatus::from_raw(6));
        assert!(aborted.contains("256 MB of memory"), "{aborted}");
        let killed = crashed(std::process::ExitStatus::from_raw(24));
        assert!(killed.contains("CPU time"), "{killed}");
        assert!(crashed(std::process::ExitStatus::from_raw(11)).contains("its reader failed"));
    }
}
