//! Photos, voice notes and files reach the model, end to end: the real
//! binary with the fake Bot API serving files as Telegram does, and the
//! scripted model (chat completions and `/audio/transcriptions`).

#[macro_use]
#[allow(unused_macros)]
mod conformance;

use std::io::Cursor;

use base64::Engine as _;
use conformance::{REPLY, Setup};
use herald_testkit::FakePlatform;
use herald_testkit::Reply;
use herald_testkit::discord::FakeDiscord;
use herald_testkit::openai::{TranscriptionReply, content_text, image_urls, last_user_text, messages};
use herald_testkit::slack::FakeSlack;
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::telegram::files::FakeFile;

/// A `width`×`height` PNG.
fn png(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbImage::from_pixel(width, height, image::Rgb([10, 120, 200]));
    let mut bytes = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
        .unwrap();
    bytes
}

/// The setup with `llm` keys added (vision, transcription) and `channels`
/// keys (attachment caps).
async fn setup(llm: &str, channels: &str) -> Setup<FakeTelegram> {
    setup_on(FakeTelegram::start().await, llm, channels).await
}

async fn setup_on<P: FakePlatform>(platform: P, llm: &str, channels: &str) -> Setup<P> {
    let setup = Setup::with_extra(platform, channels).await;
    let config = std::fs::read_to_string(&setup.config).unwrap();
    let transcription = format!(
        "  transcription:\n    base_url: {}\n    model: whisper-1\n",
        setup.model.base_url()
    );
    let llm = llm.replace("TRANSCRIPTION\n", &transcription);
    let config = config.replacen("  model: scripted\n", &format!("  model: scripted\n{llm}"), 1);
    std::fs::write(&setup.config, config).unwrap();
    setup
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captionless_photo_reaches_the_model_as_an_image_and_history_keeps_a_reference() {
    let setup = setup("  vision: true\n", "").await;
    let herald = setup.start().await;
    let ada = setup.platform.admin();
    setup
        .platform
        .send_file(&ada, FakeFile::new("photo", png(2400, 1200)), None);
    setup.sent(1, REPLY, &herald).await;
    let requests = setup.model.requests();
    let images = image_urls(&requests[0]);
    assert_eq!(images.len(), 1, "{:?}", last_user_text(&requests[0]));
    let data = images[0]
        .strip_prefix("data:image/jpeg;base64,")
        .expect("a JPEG data URL");
    let sent = image::load_from_memory(&base64::engine::general_purpose::STANDARD.decode(data).unwrap()).unwrap();
    assert_eq!(
        (sent.width(), sent.height()),
        (1024, 512),
        "downscaled to the default bound"
    );
    let said = last_user_text(&requests[0]).unwrap();
    assert!(said.contains("[photo \"photo.jpg\" (image/png"), "{said}");

    // The next turn's history names the photo but sends no image again.
    setup.platform.send_dm(&ada, "and now?").await;
    setup.sent(2, REPLY, &herald).await;
    let requests = setup.model.requests();
    let body = requests[1].to_string();
    assert!(!body.contains("data:image"), "history keeps a reference, not the bytes");
    assert!(body.contains("photo.jpg"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_vision_a_photo_is_described() {
    let setup = setup("", "").await;
    let herald = setup.start().await;
    let ada = setup.platform.admin();
    setup
        .platform
        .send_file(&ada, FakeFile::new("photo", png(20, 20)), Some("what is it?"));
    setup.sent(1, REPLY, &herald).await;
    let request = &setup.model.requests()[0];
    assert!(image_urls(request).is_empty());
    let said = last_user_text(request).unwrap();
    assert!(said.starts_with("what is it?"), "{said}");
    assert!(said.contains("this model is not sent images"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_and_the_transcript_answered() {
    let setup = setup("TRANSCRIPTION\n", "").await;
    setup
        .model
        .push_transcription(TranscriptionReply::Text("what is the weather in Oslo".into()));
    let herald = setup.start().await;
    let ada = setup.platform.admin();
    let voice = b"OggS\0\x02 an opus voice note".to_vec();
    setup
        .platform
        .send_file(&ada, FakeFile::new("voice", voice.clone()), None);
    let sent = setup.sent(1, REPLY, &herald).await;
    assert!(
        sent[0]
            .text
            .contains("[Transcript of the voice note]: what is the weather in Oslo"),
        "{}",
        sent[0].text
    );
    let uploads = setup.model.transcription_requests();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].model, "whisper-1");
    assert_eq!(uploads[0].filename, "voice.ogg");
    assert_eq!(uploads[0].content_type.as_deref(), Some("audio/ogg"));
    assert_eq!(uploads[0].bytes, voice);
    assert_eq!(uploads[0].authorization.as_deref(), Some("Bearer test-key"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_transcription_tells_the_user_why() {
    let setup = setup("TRANSCRIPTION\n", "").await;
    setup.model.push_transcription(TranscriptionReply::Error {
        status: 503,
        message: "the speech model is overloaded".into(),
    });
    let herald = setup.start().await;
    let ada = setup.platform.admin();
    setup
        .platform
        .send_file(&ada, FakeFile::new("voice", b"OggS\0\x02 voice".to_vec()), None);
    let sent = setup.sent(2, REPLY, &herald).await;
    assert!(
        sent[0].text.contains("I could not transcribe your voice note")
            && sent[0].text.contains("the speech model is overloaded"),
        "{}",
        sent[0].text
    );
    let said = setup.model_inputs()[0].clone();
    assert!(said.contains("not transcribed"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_video_is_described_and_a_text_file_is_read() {
    let setup = setup("", "").await;
    let herald = setup.start().await;
    let ada = setup.platform.admin();
    let video = FakeFile {
        claimed_size: Some(40 * 1024 * 1024),
        ..FakeFile::new("video", Vec::new())
    };
    setup.platform.send_file(&ada, video, Some("see this"));
    let notes = FakeFile {
        name: Some("notes.csv".into()),
        mime: Some("text/csv".into()),
        ..FakeFile::new("document", b"city,temp\nOslo,-3\n".to_vec())
    };
    setup.platform.send_file(&ada, notes, Some("summarise"));
    setup.sent(2, REPLY, &herald).await;
    let inputs = setup.model_inputs();
    assert!(
        inputs[0].contains("video \"video.mp4\" (video/mp4, 40 MB): not available to you: it is 40 MB"),
        "{}",
        inputs[0]
    );
    assert!(inputs[1].contains("city,temp\nOslo,-3"), "{}", inputs[1]);
    assert!(setup.platform.file_downloads().len() == 1, "the video was not fetched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discord_attachment_is_fetched_from_its_cdn_url() {
    let setup = setup_on(FakeDiscord::start().await, "  vision: true\n", "").await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    setup
        .platform
        .send_dm_with_file(&admin, "", "screenshot.png", "image/png", png(64, 48), None)
        .await;
    setup
        .platform
        .send_dm_with_file(
            &admin,
            "and this",
            "movie.mp4",
            "video/mp4",
            Vec::new(),
            Some(60 * 1024 * 1024),
        )
        .await;
    setup.sent(2, REPLY, &herald).await;
    let requests = setup.model.requests();
    assert_eq!(image_urls(&requests[0]).len(), 1, "{:?}", last_user_text(&requests[0]));
    let said = last_user_text(&requests[1]).unwrap();
    assert!(said.contains("60 MB") && said.contains("not downloaded"), "{said}");
    assert_eq!(
        setup.platform.cdn_downloads().len(),
        1,
        "the oversize movie was not fetched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slack_file_is_fetched_with_the_bot_token_and_a_forged_url_gets_no_token() {
    let setup = setup_on(FakeSlack::start().await, "  vision: true\n", "").await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    setup
        .platform
        .send_dm_with_file(&admin, "", "chart.png", "image/png", png(32, 32), None);
    setup.sent(1, REPLY, &herald).await;
    setup.platform.send_dm_with_file(
        &admin,
        "and this one",
        "secrets.txt",
        "text/plain",
        b"x".to_vec(),
        Some("https://evil.example/files-pri/T0-F0/secrets.txt"),
    );
    setup.sent(2, REPLY, &herald).await;
    let requests = setup.model.requests();
    assert_eq!(image_urls(&requests[0]).len(), 1, "{:?}", last_user_text(&requests[0]));
    let said = last_user_text(&requests[1]).unwrap();
    assert!(said.contains("not on Slack's file host"), "{said}");
    let downloads = setup.platform.file_downloads();
    assert_eq!(downloads.len(), 1, "{downloads:?}");
    assert!(downloads[0].1, "url_private was fetched with the bot token");
}

/// A skill `reader` whose script prints each file of the message being
/// answered, from `$HERALD_FILES_DIR`; kept alive as long as the test.
fn reader_skill() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("reader");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: reader\ndescription: Read the files someone sent.\n---\n\nRun scripts/read.sh.\n",
    )
    .unwrap();
    std::fs::write(
        skill.join("scripts/read.sh"),
        "for f in \"$HERALD_FILES_DIR\"/*; do echo \"<$(basename \"$f\")> $(cat \"$f\")\"; done\n\
         ls -a \"$HERALD_FILES_DIR/..\" | tr '\\n' ' '\n",
    )
    .unwrap();
    let yaml = format!("skills:\n  dirs: [{}]\n  autonomy: full\n", dir.path().display());
    (dir, yaml)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_reads_the_documents_of_the_message_and_a_climbing_name_stays_inside() {
    let (_skills, yaml) = reader_skill();
    let setup = setup("", &yaml).await;
    // The model runs the script, then answers with what the script printed
    // (in a code block, as models show output, so Markdown leaves it as it is).
    setup.model.set_fallback(|request| {
        let last = messages(request).last().cloned().unwrap_or_default();
        if last["role"] == "tool" {
            Reply::text(format!("```\n{}\n```", content_text(&last).unwrap_or_default()))
        } else {
            Reply::tool_call(
                "run_skill_script",
                serde_json::json!({"name": "reader", "script": "read.sh"}),
            )
        }
    });
    let herald = setup.start().await;
    let ada = setup.platform.admin();
    let report = FakeFile {
        name: Some("report.txt".into()),
        mime: Some("text/plain".into()),
        ..FakeFile::new("document", b"quarterly numbers: 42".to_vec())
    };
    setup.platform.send_file(&ada, report, Some("what does it say?"));
    let sent = setup.sent(1, REPLY, &herald).await;
    assert!(
        sent[0].text.contains("<report.txt> quarterly numbers: 42"),
        "the script read the file: {}",
        sent[0].text
    );
    assert!(
        sent[0].text.contains("files in $HERALD_FILES_DIR: report.txt"),
        "{}",
        sent[0].text
    );

    let hostile = FakeFile {
        name: Some("../../etc/x".into()),
        mime: Some("text/plain".into()),
        ..FakeFile::new("document", b"climbed?".to_vec())
    };
    setup.platform.send_file(&ada, hostile, None);
    let sent = setup.sent(2, REPLY, &herald).await;
    let reply = &sent[1].text;
    assert!(reply.contains("<_.._etc_x> climbed?"), "{reply}");
    let beside = reply.lines().last().unwrap_or_default();
    assert!(!beside.contains("etc"), "nothing landed beside files/: {beside}");
    assert!(!std::path::Path::new("/etc/x").exists());
}

/// A Telegram document named `name` with `bytes`, claimed to be a PDF.
fn pdf_document(name: &str, bytes: Vec<u8>) -> FakeFile {
    FakeFile {
        name: Some(name.into()),
        mime: Some("application/pdf".into()),
        ..FakeFile::new("document", bytes)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdfs_text_reaches_the_model_and_a_bomb_or_a_broken_pdf_is_described() {
    let setup = setup("", "").await;
    let herald = setup.start().await;
    let ada = setup.platform.admin();
    let letter = pdf_document("letter.pdf", herald_testkit::pdf::pdf_with_text("Hello PDF from Oslo"));
    setup.platform.send_file(&ada, letter, Some("what does it say?"));
    // 2 GiB of zeros, a few MiB sent.
    let bomb = herald_testkit::pdf::bomb_pdf(2048);
    assert!(bomb.len() < 4 * 1024 * 1024, "{} bytes", bomb.len());
    setup.platform.send_file(&ada, pdf_document("bomb.pdf", bomb), None);
    let mut broken = b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog".to_vec();
    broken.extend_from_slice(&[0xff; 64]);
    setup.platform.send_file(&ada, pdf_document("broken.pdf", broken), None);
    setup.sent(3, REPLY, &herald).await;
    let peak = herald.peak_memory();
    assert!(
        peak < 256 * 1024 * 1024,
        "the bomb was not inflated in memory: Herald peaked at {} MiB",
        peak / 1024 / 1024
    );

    let requests = setup.model.requests();
    let said = last_user_text(&requests[0]).unwrap();
    assert!(
        said.contains("[file \"letter.pdf\" (application/pdf") && said.contains("its text follows"),
        "{said}"
    );
    assert!(
        requests[0].to_string().contains("Hello PDF from Oslo"),
        "the text layer was sent"
    );
    let said = last_user_text(&requests[1]).unwrap();
    assert!(
        said.contains("a PDF Herald did not read: its compressed streams would expand to more than 32 MB"),
        "{said}"
    );
    let said = last_user_text(&requests[2]).unwrap();
    assert!(said.contains("a PDF Herald did not read"), "{said}");
    // The next turn's history keeps the reference, not the text.
    setup.platform.send_dm(&ada, "and now?").await;
    setup.sent(4, REPLY, &herald).await;
    let said: Vec<String> = messages(&setup.model.requests()[3])
        .iter()
        .filter(|message| message["role"] == "user")
        .filter_map(content_text)
        .collect();
    assert!(said[0].contains("letter.pdf"), "{said:?}");
    assert!(!said.iter().any(|text| text.contains("Hello PDF")), "{said:?}");
}
