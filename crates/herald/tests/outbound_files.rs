//! A script's output file is sent back on each channel, end to end: the
//! real binary, a skill whose script writes `out/report.txt`, the scripted
//! model running it and calling `send_message` with the file attached, and
//! the platform's fake receiving the upload as the real API takes it.

mod common;
#[macro_use]
#[allow(unused_macros)]
mod conformance;

use conformance::{REPLY, Setup};
use herald_testkit::discord::FakeDiscord;
use herald_testkit::openai::tool_results;
use herald_testkit::slack::FakeSlack;
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::{FakePlatform, Reply};
use serde_json::json;

const REPORT: &str = "city,temp\nOslo,-3\nLima,19\n";

/// A skill folder with `report` (its script writes `out/report.txt`),
/// and the config keys that load it with full autonomy.
fn report_skill() -> (tempfile::TempDir, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    std::fs::create_dir_all(skills.join("report/scripts")).unwrap();
    std::fs::write(
        skills.join("report/SKILL.md"),
        "---\nname: report\ndescription: Write the weather report as a file.\n---\n\nRun scripts/report.sh.\n",
    )
    .unwrap();
    std::fs::write(
        skills.join("report/scripts/report.sh"),
        format!(
            "#!/bin/sh\nprintf '{}' > \"$HERALD_OUT_DIR/report.txt\"\necho written\n",
            REPORT.replace('\n', "\\n")
        ),
    )
    .unwrap();
    // Scripts run as `nobody` when the tests run as root.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let extra = format!("skills:\n  dirs: [{}]\n  autonomy: full\n", skills.display());
    (dir, extra)
}

fn run_report() -> Reply {
    Reply::tool_call("run_skill_script", json!({"name": "report", "script": "report.sh"}))
}

/// The model runs the script, then sends its file with a message.
async fn a_scripts_file_is_sent_back<P: FakePlatform>(platform: P) {
    let (_skills, extra) = report_skill();
    let setup = Setup::with_extra(platform, &extra).await;
    setup.model.push(run_report());
    setup.model.push(Reply::tool_call(
        "send_message",
        json!({"text": "Here is the report.", "attachments": ["report.txt"]}),
    ));
    setup.model.push(Reply::text("done"));
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    setup
        .platform
        .send_dm(&admin, "the weather report as a file, please")
        .await;
    let sent = setup.sent(2, REPLY, &herald).await;
    let requests = setup.model.requests();
    let ran = tool_results(&requests[1]);
    assert!(
        ran[0].1.contains("out/report.txt (text/plain, 26 bytes)"),
        "the model is told of the file: {ran:?}"
    );
    let uploads = setup.platform.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:?}\n{}", herald.stderr());
    assert_eq!(uploads[0].name, "report.txt");
    assert_eq!(uploads[0].content_type.as_deref(), Some("text/plain"));
    assert_eq!(uploads[0].bytes, REPORT.as_bytes());
    assert_eq!(uploads[0].chat, setup.platform.dm_chat(&admin));
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    let with_file = uploads[0].text.as_deref();
    assert!(
        texts.contains(&"Here is the report.") || with_file == Some("Here is the report."),
        "{texts:?} {with_file:?}"
    );
    assert_eq!(texts.last(), Some(&"done"));
    let said = tool_results(&setup.model.requests()[2]);
    assert!(said[1].1.contains("Attached: report.txt."), "{said:?}");
}

/// Names of files the task's scripts did not leave send nothing: a path,
/// a host file, and a file a script left in an earlier task.
async fn only_files_this_tasks_scripts_left_can_be_attached<P: FakePlatform>(platform: P) {
    let (_skills, extra) = report_skill();
    let setup = Setup::with_extra(platform, &extra).await;
    // First task: the script runs and leaves report.txt; nothing is sent with it.
    setup.model.push(run_report());
    setup.model.push(Reply::text("ran it"));
    // Second task: the model tries to attach what it did not make in this task.
    for name in ["../report.txt", "/etc/passwd", "report.txt"] {
        setup.model.push(Reply::tool_call(
            "send_message",
            json!({"text": format!("sending {name}"), "attachments": [name]}),
        ));
    }
    setup.model.push(Reply::text("could not"));
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "run the report").await;
    setup.sent(1, REPLY, &herald).await;
    setup.platform.send_dm(&admin, "now send me its file").await;
    let sent = setup.sent(2, REPLY, &herald).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["ran it", "could not"], "nothing else was sent");
    assert!(setup.platform.uploads().is_empty(), "{:?}", setup.platform.uploads());
    let requests = setup.model.requests();
    let refused = tool_results(requests.last().unwrap());
    assert_eq!(refused.len(), 3, "{refused:?}");
    for (_, result) in &refused {
        assert!(
            result.contains("is not a file a script of this task left in out/")
                && result.contains("no script of this task left any")
                && result.contains("nothing was sent"),
            "{result}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_a_scripts_file_is_sent_back_as_a_document() {
    a_scripts_file_is_sent_back(FakeTelegram::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_only_files_this_tasks_scripts_left_can_be_attached() {
    only_files_this_tasks_scripts_left_can_be_attached(FakeTelegram::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_a_scripts_file_is_sent_back_with_the_message() {
    a_scripts_file_is_sent_back(FakeDiscord::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_only_files_this_tasks_scripts_left_can_be_attached() {
    only_files_this_tasks_scripts_left_can_be_attached(FakeDiscord::start().await).await;
}

/// A file over what the platform takes is not uploaded; the text is sent
/// and says so, and the model is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_a_file_over_the_upload_limit_is_named_in_the_text_and_not_sent() {
    let (_skills, extra) = report_skill();
    let setup = Setup::with_extra(FakeDiscord::start().await, &extra).await;
    let config = std::fs::read_to_string(&setup.config).unwrap();
    std::fs::write(
        &setup.config,
        config.replacen("  discord:\n", "  discord:\n    max_upload_bytes: 10\n", 1),
    )
    .unwrap();
    setup.model.push(run_report());
    setup.model.push(Reply::tool_call(
        "send_message",
        json!({"text": "Here is the report.", "attachments": ["out/report.txt"]}),
    ));
    setup.model.push(Reply::text("done"));
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "the report, please").await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(
        sent[0].text,
        "Here is the report.\n\n(report.txt was not attached: it is 26 bytes, over what discord takes (10 bytes).)"
    );
    assert!(setup.platform.uploads().is_empty());
    let said = tool_results(&setup.model.requests()[2]);
    assert!(
        said[1].1.contains("report.txt was not attached") && said[1].1.contains("the person was told"),
        "{said:?}"
    );
}

/// By mail, the file is attached to the one reply mail, and the real
/// servers deliver it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_a_scripts_file_is_attached_to_the_reply_mail() {
    use common::email::{ALICE, EmailOptions, mail};
    use mail_parser::MimeHeaders;
    let (_skills, extra) = report_skill();
    let setup = common::email::Setup::with_options(EmailOptions::default()).await;
    let config = std::fs::read_to_string(&setup.config).unwrap();
    std::fs::write(&setup.config, format!("{config}{extra}")).unwrap();
    setup.model.push(run_report());
    setup.model.push(Reply::tool_call(
        "send_message",
        json!({"text": "Here is the report.", "attachments": ["report.txt"]}),
    ));
    setup.model.push(Reply::text("done"));
    let herald = setup.start().await;
    setup
        .mail
        .send(
            ALICE,
            &mail(ALICE, "ask@alice.test", "Weather", "", "The report as a file, please."),
        )
        .await;
    let answers = setup.answers("alice", 2, &herald).await;
    let with_file = answers
        .iter()
        .find(|answer| answer.raw.contains("report.txt"))
        .unwrap_or_else(|| panic!("no mail with the file: {answers:#?}"));
    let parsed = mail_parser::MessageParser::default()
        .parse(with_file.raw.as_bytes())
        .unwrap();
    assert_eq!(parsed.body_text(0).unwrap().trim(), "Here is the report.");
    let attachment = parsed.attachment(0).expect("an attachment");
    assert_eq!(attachment.attachment_name(), Some("report.txt"));
    assert_eq!(
        attachment
            .content_type()
            .map(|t| format!("{}/{}", t.ctype(), t.subtype().unwrap_or_default())),
        Some("text/plain".to_owned())
    );
    assert_eq!(attachment.contents(), REPORT.as_bytes());
    assert_eq!(with_file.header("in-reply-to"), Some("<ask@alice.test>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_a_scripts_file_is_sent_back_by_the_external_upload() {
    a_scripts_file_is_sent_back(FakeSlack::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_only_files_this_tasks_scripts_left_can_be_attached() {
    only_files_this_tasks_scripts_left_can_be_attached(FakeSlack::start().await).await;
}
