//! Hostile files against the real `herald run` binary and the fake Bot API:
//! a PDF of ten million tiny objects and a crowd of huge images. Each must
//! cost a reader process of bounded memory, never Herald's own, however
//! many arrive at once; and another person's plain message is answered
//! while they are read.

#[macro_use]
#[allow(unused_macros)]
mod conformance;

use std::io::Cursor;
use std::time::{Duration, Instant};

use conformance::{Options, REPLY, Running, Setup};
use herald_testkit::openai::last_user_text;
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::telegram::files::FakeFile;
use herald_testkit::{FakePlatform, FakeUser};
use tokio_util::sync::CancellationToken;

/// Readers a Herald process runs at once (`herald_agent`'s sandbox).
const READERS_AT_ONCE: usize = 2;

fn person(n: u64) -> FakeUser {
    FakeUser {
        id: (7_000_000_000 + n).to_string(),
        name: format!("Person {n}"),
    }
}

async fn open_setup(llm: &str) -> Setup<FakeTelegram> {
    let options = Options {
        access_unknown: "allow",
        llm: llm.to_owned(),
        ..Options::default()
    };
    Setup::with_options(FakeTelegram::start().await, options).await
}

/// What a sampler saw of Herald while it ran.
struct Watched {
    /// The most resident memory Herald held, over what it held at the start.
    growth: u64,
    /// The most file readers (children of Herald) running at once.
    readers: usize,
}

/// Samples Herald's resident memory and its file-reader children until
/// `stop`.
fn watch(herald: &Running, stop: CancellationToken) -> tokio::task::JoinHandle<Watched> {
    let pid = herald.pid();
    let before = herald_testkit::attack::resident_bytes(pid).expect("herald's memory");
    tokio::spawn(async move {
        let mut most = before;
        let mut readers = 0;
        while !stop.is_cancelled() {
            if let Some(now) = herald_testkit::attack::resident_bytes(pid) {
                most = most.max(now);
            }
            readers = readers.max(file_readers_of(pid));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!(
            "herald: {} KiB before, {} KiB at most; {readers} readers at once at most",
            before / 1024,
            most / 1024
        );
        Watched {
            growth: most.saturating_sub(before),
            readers,
        }
    })
}

/// Children of `parent` that are file readers.
fn file_readers_of(parent: u32) -> usize {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return 0;
    };
    processes
        .filter_map(Result::ok)
        .filter(|entry| {
            let path = entry.path();
            let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
            let is_child = status
                .lines()
                .find_map(|line| line.strip_prefix("PPid:"))
                .is_some_and(|ppid| ppid.trim() == parent.to_string());
            is_child
                && std::fs::read(path.join("cmdline"))
                    .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("__herald-read-file"))
        })
        .count()
}

fn document(name: &str, mime: &str, bytes: Vec<u8>) -> FakeFile {
    FakeFile {
        name: Some(name.into()),
        mime: Some(mime.into()),
        ..FakeFile::new("document", bytes)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_of_ten_million_objects_costs_its_reader_process_not_herald() {
    let setup = open_setup("").await;
    let herald = setup.start().await;
    // 20 MB of `0 `: no compressed stream for a pre-scan to weigh, ten
    // million objects for a parser to build.
    let pdf = herald_testkit::pdf::many_objects_pdf("Hello", 10_000_000);
    assert!(pdf.len() < 20 * 1024 * 1024, "{} bytes", pdf.len());
    let stop = CancellationToken::new();
    let watching = watch(&herald, stop.clone());
    let senders: Vec<FakeUser> = (1..=3).map(person).collect();
    for sender in &senders {
        setup.platform.send_file(
            sender,
            document("zeros.pdf", "application/pdf", pdf.clone()),
            Some("read it"),
        );
    }
    let sent = setup.sent(3, Duration::from_secs(120), &herald).await;
    stop.cancel();
    let watched = watching.await.unwrap();
    assert_eq!(sent.len(), 3, "{sent:#?}");
    for request in setup.model.requests() {
        let said = last_user_text(&request).unwrap_or_default();
        assert!(
            said.contains(
                "a PDF Herald did not read: reading it needs more than the 256 MB of memory Herald gives one file"
            ),
            "{said}"
        );
    }
    assert!(watched.readers >= 1, "the PDFs were read in reader processes");
    assert!(
        watched.readers <= READERS_AT_ONCE,
        "{} readers ran at once",
        watched.readers
    );
    // Herald itself holds the files' bytes on their way (20 MB each), never
    // what parsing them would take (over a gigabyte each).
    assert!(
        watched.growth < 256 * 1024 * 1024,
        "Herald grew {} MiB",
        watched.growth / 1024 / 1024
    );
}

/// A `width`×`height` PNG of one colour: a few hundred kilobytes whatever
/// its size, many megabytes once decoded.
fn png(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbImage::from_pixel(width, height, image::Rgb([10, 120, 200]));
    let mut bytes = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
        .unwrap();
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_huge_images_at_once_cost_readers_and_another_person_is_answered_meanwhile() {
    let setup = open_setup("  vision: true\n").await;
    let herald = setup.start().await;
    // Just under the 40 megapixels Herald decodes: 120 MB of pixels each.
    let big = png(6320, 6320);
    let stop = CancellationToken::new();
    let watching = watch(&herald, stop.clone());
    for n in 1..=6 {
        setup
            .platform
            .send_file(&person(n), document("huge.png", "image/png", big.clone()), Some("look"));
    }
    // Once the readers are at work, someone else says hello.
    let busy = tokio::time::timeout(REPLY, async {
        while file_readers_of(herald.pid()) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(busy.is_ok(), "no reader started:\n{}", herald.stderr());
    let asked = Instant::now();
    let other = person(99);
    setup.platform.send_dm(&other, "hello").await;
    let answered = tokio::time::timeout(REPLY, async {
        loop {
            let sent = setup.platform.sent();
            if sent.iter().any(|m| m.text == "echo: hello") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let took = asked.elapsed();
    assert!(answered.is_ok(), "hello was not answered:\n{}", herald.stderr());
    assert!(took < Duration::from_secs(1), "hello was answered after {took:?}");

    setup.sent(7, Duration::from_secs(180), &herald).await;
    stop.cancel();
    let watched = watching.await.unwrap();
    assert!(
        watched.readers <= READERS_AT_ONCE,
        "{} readers ran at once",
        watched.readers
    );
    assert!(
        watched.growth < 64 * 1024 * 1024,
        "Herald grew {} MiB",
        watched.growth / 1024 / 1024
    );
    let shown = setup
        .model
        .requests()
        .iter()
        .filter(|request| last_user_text(request).is_some_and(|said| said.contains("shown to you as an image")))
        .count();
    assert_eq!(shown, 6, "every image reached the model downscaled");
}
