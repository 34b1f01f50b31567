//! Attacks on what the `herald` binary itself promises, end to end: secrets
//! stay out of messages and files, hostile input on stdin loses nothing.
//! (The skill registry's and the channels' attack suites are beside this
//! file: `security_skills.rs`, `security_channels.rs`.)

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use common::{Herald, reply_texts, stderr};
use tokio::io::AsyncWriteExt;

const CANARY: &str = "sk-canary-7d1e9b";

#[tokio::test]
async fn a_config_type_error_names_the_variable_and_never_echoes_its_value() {
    let herald = Herald::start("").await;
    let config = std::fs::read_to_string(&herald.config).unwrap();
    std::fs::write(
        &herald.config,
        config.replace("max_retries: 1", "max_retries: ${HERALD_CANARY}"),
    )
    .unwrap();
    let output = herald
        .command(&["chat", "--user", "ann"])
        .env("HERALD_CANARY", CANARY)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(!err.contains(CANARY), "the secret was printed: {err}");
    assert!(
        err.contains("${HERALD_CANARY}") && err.contains("llm.max_retries"),
        "{err}"
    );
}

#[tokio::test]
async fn doctor_never_prints_a_password_in_the_model_url() {
    let herald = Herald::start("").await;
    let base = herald.model.base_url();
    let with_password = base.replacen("http://", &format!("http://herald:{CANARY}@"), 1);
    let config = std::fs::read_to_string(&herald.config).unwrap();
    std::fs::write(&herald.config, config.replace(&base, &with_password)).unwrap();
    let output = herald
        .command(&["doctor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
    assert!(!printed.contains(CANARY), "{printed}");
    assert!(printed.contains("herald:***@"), "the URL is shown, redacted: {printed}");
}

#[tokio::test]
async fn a_config_others_can_read_with_a_secret_in_it_is_reported() {
    let herald = Herald::start("").await;
    std::fs::set_permissions(&herald.config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = herald
        .command(&["doctor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    let line = report.lines().find(|l| l.contains("config")).unwrap_or_default();
    assert!(
        line.starts_with("FAIL") && line.contains("llm.api_key") && line.contains("chmod 600"),
        "{report}"
    );
    assert!(!report.contains("test-key"), "the secret itself is not shown: {report}");

    let chat = herald.chat("ann", "hi\n").await;
    assert!(
        stderr(&chat).contains("can be read by other users"),
        "{}",
        stderr(&chat)
    );

    std::fs::set_permissions(&herald.config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let chat = herald.chat("ann", "hi\n").await;
    assert!(
        !stderr(&chat).contains("can be read by other users"),
        "{}",
        stderr(&chat)
    );
}

/// The forms a line-by-line check of key names missed: flow style, a
/// password in a URL, an MCP server's headers and env, under keys of any
/// name. Only the key paths are shown, never the values.
#[tokio::test]
async fn secrets_in_flow_style_urls_and_mcp_settings_of_a_readable_config_are_reported() {
    let herald = Herald::start(
        "mcp: {servers: {tracker: {url: \"http://127.0.0.1:9/mcp\", headers: {X-Api: mcp-header-literal}}, \
         files: {command: \"true\", env: {ANY_NAME: mcp-env-literal}}}}\n",
    )
    .await;
    let config = std::fs::read_to_string(&herald.config).unwrap();
    let base = config.lines().find_map(|l| l.strip_prefix("  base_url: ")).unwrap();
    let block = format!(
        "llm:\n  base_url: {base}\n  api_key: test-key\n  model: scripted\n  max_retries: 1\n  retry_base: 10ms\n  retry_max: 50ms\n"
    );
    let flow = format!(
        "llm: {{base_url: \"{}\", api_key: flow-literal, model: scripted, max_retries: 1}}\n",
        base.replacen("://", "://me:url-literal@", 1)
    );
    assert!(config.contains(&block), "{config}");
    let config = config.replace(&block, &flow);
    std::fs::write(&herald.config, config).unwrap();
    std::fs::set_permissions(&herald.config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = herald
        .command(&["doctor"])
        .stdout(Stdio::piped())
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    let line = report.lines().find(|l| l.contains("config")).unwrap_or_default();
    for key in [
        "llm.api_key",
        "llm.base_url",
        "mcp.servers.tracker.headers.X-Api",
        "mcp.servers.files.env.ANY_NAME",
    ] {
        assert!(line.starts_with("FAIL") && line.contains(key), "{key}: {report}");
    }
    assert!(
        !report.contains("literal"),
        "the secrets themselves are not shown: {report}"
    );
}

#[tokio::test]
async fn bytes_that_are_not_utf8_are_read_lossily_and_leave_no_task_behind() {
    let herald = Herald::start("").await;
    let mut child = herald.spawn_chat("ann");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"caf\xe9 au lait\n\xff\xfe\nstill here\n")
        .await
        .unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        reply_texts(&output),
        [
            "echo: caf\u{fffd} au lait",
            "echo: \u{fffd}\u{fffd}",
            "echo: still here"
        ]
    );
    // Nothing is left leased or queued for the next run to trip over.
    let again = herald.chat("ann", "").await;
    assert!(reply_texts(&again).is_empty());
}

/// The hardening of `hardening.rs` on the running binary, not on a test
/// process calling its functions: once `herald chat` has answered, its
/// `/proc` files belong to root though it runs as another user (the kernel
/// does that only for a non-dumpable process, which cannot be traced or
/// dumped, and whose environment and memory other users cannot read).
#[tokio::test]
async fn the_running_binary_is_non_dumpable_so_its_environment_is_root_only() {
    use std::os::unix::fs::MetadataExt;
    use tokio::io::{AsyncBufReadExt, BufReader};

    let herald = Herald::start("").await;
    // The API key comes from the environment, as the docs ask.
    let config = std::fs::read_to_string(&herald.config).unwrap();
    let config = config.replace("api_key: test-key", "api_key: ${HERALD_TEST_CANARY_KEY}");
    std::fs::write(&herald.config, config).unwrap();
    // Run as a user other than root, so ownership by root tells.
    let user = if rustix::process::geteuid().is_root() {
        65534
    } else {
        rustix::process::geteuid().as_raw()
    };
    for entry in walk(herald.dir.path()) {
        std::os::unix::fs::chown(&entry, Some(user), Some(user)).unwrap();
    }
    let mut command = herald.command(&["chat", "--json", "--user", "ann"]);
    command
        .uid(user)
        .gid(user)
        .env("HERALD_TEST_CANARY_KEY", "sk-canary-from-the-environment")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = command.spawn().unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut replies = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin.write_all(b"hello\n").await.unwrap();
    let reply = tokio::time::timeout(std::time::Duration::from_secs(30), replies.next_line())
        .await
        .expect("herald answers")
        .unwrap()
        .expect("a reply line");
    assert!(reply.contains("echo: hello"), "{reply}");

    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid_line.split_whitespace().skip(1).all(|id| id == user.to_string()),
        "{uid_line}"
    );
    for file in ["status", "environ", "mem"] {
        let owner = std::fs::metadata(format!("/proc/{pid}/{file}")).unwrap().uid();
        assert_eq!(owner, 0, "/proc/{pid}/{file} of a process running as {user}");
    }
    drop(stdin);
    let _ = child.wait().await;
}

/// `dir` and everything in it.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = vec![dir.to_owned()];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}
