//! One trust for every connection: with `tls.extra_ca_file` naming a
//! private CA, every adapter reaches servers whose certificates that CA
//! signed; without it, every one refuses them. Each server sits behind a
//! TLS front of the testkit (the fakes, the real Dovecot and Postfix, the
//! real MCP `everything` server over streamable HTTP), and `herald doctor`
//! makes each adapter connect the way it does when it runs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use herald_testkit::discord::FakeDiscord;
use herald_testkit::mailserver::{self, MailServers};
use herald_testkit::slack::FakeSlack;
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::tls::{PrivateCa, TlsFront};
use herald_testkit::{FakePlatform, ScriptedModel};
use tokio::process::Command;

/// `127.0.0.1:PORT` of a fake's `http://127.0.0.1:PORT/...` URL.
fn addr_of(url: &str) -> SocketAddr {
    let rest = url.strip_prefix("http://").expect("a plain fake");
    rest.split('/').next().unwrap().parse().expect("an address")
}

/// The same URL through `front`: `https://localhost:PORT/...`.
fn through(front: &TlsFront, url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("");
    format!("{}{path}", front.https_url())
}

fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-servers")
}

/// The MCP reference server over streamable HTTP on a port of its own.
async fn everything_over_http() -> (tokio::process::Child, SocketAddr) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(script.exists(), "{} is missing: run bash .ci/test", script.display());
    let mut server = Command::new("node")
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(server.stderr.take().unwrap()));
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("listening on port") {
            break;
        }
    }
    (server, SocketAddr::from(([127, 0, 0, 1], port)))
}

struct Fronts {
    model: TlsFront,
    telegram: TlsFront,
    discord: TlsFront,
    slack: TlsFront,
    imap: TlsFront,
    smtp: TlsFront,
    mcp: TlsFront,
}

impl Fronts {
    fn all(&self) -> [(&'static str, &TlsFront); 7] {
        [
            ("model", &self.model),
            ("telegram", &self.telegram),
            ("discord", &self.discord),
            ("slack", &self.slack),
            ("imap", &self.imap),
            ("smtp", &self.smtp),
            ("mcp", &self.mcp),
        ]
    }
}

async fn doctor(config: &Path) -> String {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("--config")
            .arg(config)
            .arg("doctor")
            .env_remove("RUST_LOG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("doctor finishes")
    .expect("herald doctor runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_adapter_trusts_the_extra_ca_file_and_nothing_else() {
    let ca = PrivateCa::new();
    let model = ScriptedModel::start().await;
    let telegram = FakeTelegram::start().await;
    let discord = FakeDiscord::start().await;
    let slack = FakeSlack::start().await;
    let mail = MailServers::start().await;
    let (_mcp_server, mcp_addr) = everything_over_http().await;
    let fronts = Fronts {
        model: TlsFront::start(&ca, model.local_addr()).await,
        telegram: TlsFront::start(&ca, addr_of(&telegram.api_url())).await,
        discord: TlsFront::start(&ca, addr_of(&discord.api_url())).await,
        slack: TlsFront::start(&ca, addr_of(&slack.api_url())).await,
        imap: TlsFront::start(&ca, SocketAddr::from(([127, 0, 0, 1], mail.imap_port))).await,
        smtp: TlsFront::start(&ca, SocketAddr::from(([127, 0, 0, 1], mail.smtp_port))).await,
        mcp: TlsFront::start(&ca, mcp_addr).await,
    };

    let dir = tempfile::tempdir().unwrap();
    let channel =
        |fake: &dyn FakePlatform, front: &TlsFront, url: &str| fake.channel_yaml().replace(url, &through(front, url));
    let config = format!(
        "storage:\n  url: sqlite://{db}\n\
         llm:\n  base_url: {model}\n  api_key: test-key\n  model: herald-scripted\n  max_retries: 0\n\
         mcp:\n  servers:\n    remote:\n      url: {mcp}/mcp\n      elevated: false\n\
         channels:\n  telegram:\n{telegram}  discord:\n{discord}  slack:\n{slack}  email:\n    from: {from}\n    trusted_authserv_id: {authserv}\n    \
         imap:\n      host: localhost\n      port: {imap}\n      tls: implicit\n      username: herald\n      password: {password}\n    \
         smtp:\n      host: localhost\n      port: {smtp}\n      tls: implicit\n",
        db = dir.path().join("herald.db").display(),
        model = through(&fronts.model, &model.base_url()),
        mcp = fronts.mcp.https_url(),
        telegram = channel(&telegram, &fronts.telegram, &telegram.api_url()),
        discord = channel(&discord, &fronts.discord, &discord.api_url()),
        slack = channel(&slack, &fronts.slack, &slack.api_url()),
        from = mailserver::HERALD,
        authserv = mailserver::AUTHSERV_ID,
        imap = fronts.imap.addr().port(),
        smtp = fronts.smtp.addr().port(),
        password = mailserver::PASSWORD,
    );
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        path
    };
    let trusting = write(
        "trusting.yaml",
        format!("{config}tls:\n  extra_ca_file: {}\n", ca.pem_file().display()),
    );
    let untrusting = write("untrusting.yaml", config);

    // Without the CA file, every connection is refused for its certificate.
    let report = doctor(&untrusting).await;
    for item in [
        "model",
        "mcp server remote",
        "channel telegram",
        "channel discord",
        "channel slack",
        "channel email",
    ] {
        assert!(report.contains(&format!("FAIL {item}")), "{item} in\n{report}");
    }
    for (name, front) in fronts.all() {
        assert!(front.refused() > 0, "{name} was never tried:\n{report}");
        assert_eq!(front.completed(), 0, "{name} trusted an unknown CA:\n{report}");
    }

    // With it, every one connects and does its work.
    let report = doctor(&trusting).await;
    for item in [
        "model",
        "mcp server remote",
        "channel telegram",
        "channel discord",
        "channel slack",
        "channel email",
    ] {
        assert!(report.contains(&format!("ok   {item}")), "{item} in\n{report}");
    }
    assert!(!report.contains("FAIL"), "{report}");
    for (name, front) in fronts.all() {
        assert!(front.completed() > 0, "{name} did not connect:\n{report}");
    }
}

#[tokio::test]
async fn a_broken_extra_ca_file_stops_herald_naming_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("company-ca.pem");
    std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").unwrap();
    let config = dir.path().join("herald.yaml");
    std::fs::write(
        &config,
        format!(
            "storage:\n  url: sqlite://{}\ntls:\n  extra_ca_file: company-ca.pem\n",
            dir.path().join("h.db").display()
        ),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("--config")
        .arg(&config)
        .arg("doctor")
        .output()
        .await
        .unwrap();
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{shown}");
    assert!(shown.contains("tls.extra_ca_file"), "{shown}");
    // Relative to the config file, and named in full.
    assert!(shown.contains(&pem.display().to_string()), "{shown}");
}
