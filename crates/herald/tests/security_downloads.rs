//! Files on their way in, against the real `herald run` binary and the fake
//! Bot API: downloads happen at turn time, a few at once, so one person's
//! large files never hold another person's message; an album is one
//! message; a file whose size Telegram does not state is fetched and held
//! to the cap on its bytes.

#[macro_use]
#[allow(unused_macros)]
mod conformance;

use std::io::Cursor;
use std::time::Duration;

use conformance::{Options, REPLY, Setup};
use herald_testkit::openai::{image_urls, last_user_text};
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::telegram::files::{FakeFile, Serve};
use herald_testkit::{FakePlatform, FakeUser};

fn person(n: u64) -> FakeUser {
    FakeUser {
        id: (7_100_000_000 + n).to_string(),
        name: format!("Person {n}"),
    }
}

/// Herald on the fake Bot API with `llm` keys added and `channels` keys
/// (attachment caps), open to anyone.
async fn setup(llm: &str, channels: &str) -> Setup<FakeTelegram> {
    let options = Options {
        access_unknown: "allow",
        llm: llm.to_owned(),
        extra: channels.to_owned(),
        ..Options::default()
    };
    Setup::with_options(FakeTelegram::start().await, options).await
}

fn png(side: u32, shade: u8) -> Vec<u8> {
    let image = image::RgbImage::from_pixel(side, side, image::Rgb([shade, 80, 160]));
    let mut bytes = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
        .unwrap();
    bytes
}

fn text_document(name: &str, bytes: Vec<u8>) -> FakeFile {
    FakeFile {
        name: Some(name.into()),
        mime: Some("text/plain".into()),
        ..FakeFile::new("document", bytes)
    }
}

/// Five people each send a 16 MiB document that Telegram serves at 4 MiB/s
/// (four seconds each at best); someone else's "hello" is answered before
/// any of those documents has been answered, and every document is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_slow_downloads_do_not_hold_another_persons_hello() {
    let setup = setup("", "").await;
    let herald = setup.start().await;
    let big = vec![b'a'; 16 * 1024 * 1024];
    for n in 1..=5 {
        let file = FakeFile {
            serve: Serve::Rate(4 * 1024 * 1024),
            ..text_document("big.txt", big.clone())
        };
        setup.platform.send_file(&person(n), file, Some("read it"));
    }
    // Once the downloads are under way, someone else says hello.
    let started = tokio::time::timeout(REPLY, async {
        while setup.platform.file_downloads().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(started.is_ok(), "no download started:\n{}", herald.stderr());
    setup.platform.send_dm(&person(99), "hello").await;
    // The echo of a document comes in several chunks: wait for the five
    // answers' first chunks.
    let answered =
        |sent: &[herald_testkit::SentMessage]| sent.iter().filter(|m| m.text.starts_with("echo: read it")).count();
    let done = tokio::time::timeout(Duration::from_secs(120), async {
        while answered(&setup.platform.sent()) < 5 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let sent = setup.platform.sent();
    assert!(
        done.is_ok(),
        "{} documents answered:\n{}",
        answered(&sent),
        herald.stderr()
    );
    assert_eq!(
        sent[0].text, "echo: hello",
        "hello waited for the downloads: {:?}",
        sent[0]
    );
    assert_eq!(sent.iter().filter(|m| m.text == "echo: hello").count(), 1);
    let inputs = setup.model_inputs();
    let read = inputs
        .iter()
        .filter(|input| input.starts_with("read it") && input.contains("aaaa"))
        .count();
    assert_eq!(read, 5, "every document reached the model");
    assert_eq!(setup.platform.file_downloads().len(), 5);
}

/// Six photos sent as one album: one turn, one answer, the caption as its
/// text, and `attachments.max_images` (4) applied to the album as a whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_album_is_one_turn_with_one_answer_and_the_image_cap_applies_to_it() {
    let setup = setup("  vision: true\n", "").await;
    let herald = setup.start().await;
    let sender = person(1);
    let photos = (0..6).map(|n| FakeFile::new("photo", png(64, n * 40))).collect();
    setup.platform.send_album(&sender, photos, Some("our trip"));
    let sent = setup.sent(1, REPLY, &herald).await;
    assert!(sent[0].text.starts_with("echo: our trip"), "{:?}", sent[0].text);
    // A later message of the same conversation is answered after anything
    // the album could still cause there: then the count is final.
    setup.platform.send_dm(&sender, "anything else?").await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert_eq!(sent[1].text, "echo: anything else?");
    let requests = setup.model.requests();
    assert_eq!(requests.len(), 2, "one turn for the album, one for the message");
    assert_eq!(image_urls(&requests[0]).len(), 4, "max_images applies to the album");
    let said = last_user_text(&requests[0]).unwrap();
    assert_eq!(
        said.matches("an image beyond the images sent per message").count(),
        2,
        "{said}"
    );
}

/// A document and a photo without `file_size` (the Bot API may leave it
/// out) are fetched; one over `max_file_bytes` is stopped at the cap on its
/// bytes and described as too large.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_without_a_stated_size_are_fetched_and_held_to_the_cap_on_their_bytes() {
    let setup = setup(
        "  vision: true\n",
        "  attachments:\n    max_file_bytes: 1048576\n    max_message_bytes: 4194304\n",
    )
    .await;
    let herald = setup.start().await;
    let sender = person(1);
    let notes = FakeFile {
        hide_size: true,
        ..text_document("notes.txt", b"atlas is the build server".to_vec())
    };
    setup.platform.send_file(&sender, notes, Some("what is atlas?"));
    let photo = FakeFile {
        hide_size: true,
        ..FakeFile::new("photo", png(64, 10))
    };
    setup.platform.send_file(&sender, photo, Some("and this?"));
    let huge = FakeFile {
        hide_size: true,
        ..text_document("huge.txt", vec![b'z'; 3 * 1024 * 1024])
    };
    setup.platform.send_file(&sender, huge, Some("and this one?"));
    setup.sent(3, REPLY, &herald).await;
    let inputs = setup.model_inputs();
    assert!(inputs[0].contains("atlas is the build server"), "{}", inputs[0]);
    assert_eq!(image_urls(&setup.model.requests()[1]).len(), 1, "{}", inputs[1]);
    assert!(inputs[2].contains("it is larger than the 1 MB limit"), "{}", inputs[2]);
    assert!(
        !inputs[2].contains("zzzz"),
        "nothing of the oversize file reached the model"
    );
    assert_eq!(setup.platform.file_downloads().len(), 3, "all three were fetched");
}
