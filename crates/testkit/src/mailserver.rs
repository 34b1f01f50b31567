//! Real mail servers for the email tests and the benchmark: Dovecot serving
//! IMAP from a Maildir and Postfix delivering SMTP into that Maildir, both
//! from configs in a temporary folder on 127.0.0.1 high ports, stopped when
//! dropped.
//!
//! Not a fake: email has no service to imitate, only these two daemons. Both
//! come from Debian packages (`dovecot-imapd`, `postfix`; `.ci/test`
//! installs them) and run as root, as the CI machine does. The mail is
//! stored as `nobody`, which Postfix's virtual delivery and Dovecot share.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub const DOMAIN: &str = "example.test";
pub const HERALD: &str = "herald@example.test";
pub const PASSWORD: &str = "imap-secret";
/// The receiving server's name: Postfix's `myhostname`, and the authserv-id
/// of the `Authentication-Results` headers tests write as that server would.
pub const AUTHSERV_ID: &str = "mail.example.test";
const NOBODY: u32 = 65534;

pub struct MailServers {
    pub dir: TempDir,
    pub imap_port: u16,
    pub smtp_port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Runs a daemon's start command. Its output goes to a file: the daemon
/// keeps inherited pipes open, so waiting for a pipe's end would never end.
fn run(command: &mut Command, log: &Path) {
    let out = std::fs::File::create(log).expect("log file");
    let status = command
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .status()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        status.success(),
        "{command:?} failed: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).expect("chown");
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

async fn wait_for_port(port: u16, what: &str, log: &Path) {
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{what} never listened on {port}:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

impl MailServers {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        chmod(root, 0o755);
        let (imap_port, smtp_port) = (free_port(), free_port());
        let mail = root.join("mail");
        for sub in ["dovecot", "queue", "data"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::create_dir_all(&mail).unwrap();
        chown(&mail, NOBODY);
        let postfix_user = users_uid("postfix");
        chown(&root.join("data"), postfix_user);

        let r = root.display();
        std::fs::write(root.join("passwd"), format!("herald:{{PLAIN}}{PASSWORD}\n")).unwrap();
        std::fs::write(
            root.join("dovecot.conf"),
            format!(
                "protocols = imap\nlisten = 127.0.0.1\nbase_dir = {r}/dovecot\nstate_dir = {r}/dovecot\n\
                 log_path = {r}/dovecot.log\nssl = no\ndisable_plaintext_auth = no\nauth_mechanisms = plain login\n\
                 mail_location = maildir:{r}/mail/%n\nimap_logout_format = in=%i out=%o\ndefault_internal_user = dovecot\ndefault_internal_group = dovecot\n\
                 default_login_user = dovenull\n\
                 service imap-login {{\n  chroot =\n  inet_listener imap {{\n    address = 127.0.0.1\n    port = {imap_port}\n  }}\n  inet_listener imaps {{\n    port = 0\n  }}\n}}\n\
                 service anvil {{\n  chroot =\n}}\n\
                 passdb {{\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%n {r}/passwd\n}}\n\
                 userdb {{\n  driver = static\n  args = uid={NOBODY} gid={NOBODY} home={r}/mail/%n\n}}\n"
            ),
        )
        .unwrap();
        run(
            Command::new("dovecot").arg("-c").arg(root.join("dovecot.conf")),
            &root.join("dovecot.start"),
        );

        std::fs::write(
            root.join("vmailbox"),
            format!("herald@{DOMAIN} herald/\nalice@{DOMAIN} alice/\nbob@{DOMAIN} bob/\n"),
        )
        .unwrap();
        std::fs::write(
            root.join("main.cf"),
            format!(
                "compatibility_level = 3.6\nqueue_directory = {r}/queue\ndata_directory = {r}/data\n\
                 mail_owner = postfix\nsetgid_group = postdrop\ninet_interfaces = 127.0.0.1\ninet_protocols = ipv4\n\
                 myhostname = mail.{DOMAIN}\nmydestination =\nmynetworks = 127.0.0.0/8\n\
                 virtual_mailbox_domains = {DOMAIN}\nvirtual_mailbox_base = {r}/mail\n\
                 virtual_mailbox_maps = texthash:{r}/vmailbox\nvirtual_uid_maps = static:{NOBODY}\n\
                 virtual_gid_maps = static:{NOBODY}\nsmtpd_relay_restrictions = permit_mynetworks, reject\n\
                 maillog_file_prefixes = {r}\nmaillog_file = {r}/maillog\nalias_maps =\nalias_database =\n\
                 relayhost =\nsmtputf8_enable = no\n"
            ),
        )
        .unwrap();
        let master = std::fs::read_to_string("/etc/postfix/master.cf").expect("postfix is installed");
        let master: String = master
            .lines()
            .map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                if line.starts_with('#') || line.starts_with(char::is_whitespace) || fields.len() < 8 {
                    return format!("{line}\n");
                }
                let mut fields: Vec<String> = fields.iter().map(|f| (*f).to_owned()).collect();
                if fields[0] == "smtp" && fields[1] == "inet" {
                    fields[0] = format!("127.0.0.1:{smtp_port}");
                }
                fields[4] = "n".into();
                format!("{}\n", fields.join(" "))
            })
            .collect();
        std::fs::write(root.join("master.cf"), master).unwrap();
        run(
            Command::new("postfix").arg("-c").arg(root).arg("start"),
            &root.join("postfix.start"),
        );
        let servers = Self {
            dir,
            imap_port,
            smtp_port,
        };
        wait_for_port(imap_port, "Dovecot", &servers.dir.path().join("dovecot.log")).await;
        wait_for_port(smtp_port, "Postfix", &servers.dir.path().join("maillog")).await;
        servers
    }

    /// `channels.email` for Herald, indented under `channels:`, trusting
    /// [`AUTHSERV_ID`]'s `Authentication-Results`.
    pub fn channel_yaml(&self) -> String {
        format!(
            "  email:\n    from: {HERALD}\n    trusted_authserv_id: {AUTHSERV_ID}\n    imap:\n      host: 127.0.0.1\n      port: {}\n      tls: none\n      username: herald\n      password: {PASSWORD}\n    smtp:\n      host: 127.0.0.1\n      port: {}\n      tls: none\n",
            self.imap_port, self.smtp_port
        )
    }

    /// Sends `raw` (LF line ends are fine) from `from` to Herald over SMTP.
    pub async fn send(&self, from: &str, raw: &str) {
        let stream = TcpStream::connect(("127.0.0.1", self.smtp_port))
            .await
            .expect("SMTP connect");
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let mut expect = async |code: &str| loop {
            let line = lines.next_line().await.expect("SMTP read").expect("SMTP answer");
            assert!(line.starts_with(code), "SMTP said {line:?}, expected {code}");
            if line.as_bytes().get(3) != Some(&b'-') {
                break;
            }
        };
        expect("220").await;
        let data = raw.replace("\r\n", "\n").replace('\n', "\r\n");
        for (command, code) in [
            ("EHLO tests.example.test\r\n".to_owned(), "250"),
            (format!("MAIL FROM:<{from}>\r\n"), "250"),
            (format!("RCPT TO:<{HERALD}>\r\n"), "250"),
            ("DATA\r\n".to_owned(), "354"),
            (format!("{data}\r\n.\r\n"), "250"),
            ("QUIT\r\n".to_owned(), "221"),
        ] {
            write.write_all(command.as_bytes()).await.expect("SMTP write");
            expect(code).await;
        }
    }

    /// How many bytes Dovecot sent to IMAP clients, over the sessions that
    /// ended (its logout line says `out=`).
    pub fn imap_bytes_sent(&self) -> u64 {
        let log = std::fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default();
        log.lines()
            .filter_map(|line| line.split(" out=").nth(1))
            .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }

    /// How many of `user`'s mails carry the `\Seen` flag (Maildir `:2,…S…`).
    pub fn seen(&self, user: &str) -> usize {
        let Ok(entries) = std::fs::read_dir(self.maildir(user).join("cur")) else {
            return 0;
        };
        entries
            .flatten()
            .filter(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.rsplit_once(":2,").is_some_and(|(_, flags)| flags.contains('S'))
            })
            .count()
    }

    /// How many IMAP sessions ended (logged out or disconnected).
    pub fn imap_sessions_ended(&self) -> usize {
        let log = std::fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default();
        log.lines().filter(|line| line.contains(" out=")).count()
    }

    fn maildir(&self, user: &str) -> PathBuf {
        self.dir.path().join("mail").join(user)
    }

    /// Every mail in `user`'s mailbox, oldest first.
    pub fn mailbox(&self, user: &str) -> Vec<ReadMail> {
        let mut files: Vec<(std::time::SystemTime, String, PathBuf)> = Vec::new();
        for sub in ["new", "cur"] {
            let Ok(entries) = std::fs::read_dir(self.maildir(user).join(sub)) else {
                continue;
            };
            for entry in entries.flatten() {
                let modified = entry.metadata().and_then(|m| m.modified()).unwrap();
                files.push((modified, entry.file_name().to_string_lossy().into_owned(), entry.path()));
            }
        }
        files.sort();
        files
            .into_iter()
            .map(|(_, _, path)| ReadMail::parse(&std::fs::read_to_string(path).unwrap()))
            .collect()
    }

    /// Waits until `user` has `count` mails.
    pub async fn wait_for_mail(
        &self,
        user: &str,
        count: usize,
        within: Duration,
        log: impl Fn() -> String,
    ) -> Vec<ReadMail> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let mails = self.mailbox(user);
            if mails.len() >= count {
                return mails;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{user} has {} mails, expected {count}: {mails:#?}\n--- herald ---\n{}",
                mails.len(),
                log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn users_uid(name: &str) -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields[0] == name).then(|| fields[2].parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no user {name}"))
}

impl Drop for MailServers {
    fn drop(&mut self) {
        let root = self.dir.path();
        let _ = Command::new("postfix").arg("-c").arg(root).arg("stop").output();
        let _ = Command::new("doveadm")
            .arg("-c")
            .arg(root.join("dovecot.conf"))
            .arg("stop")
            .output();
    }
}

/// A mail read back from a mailbox: unfolded headers and the body.
#[derive(Debug, Clone)]
pub struct ReadMail {
    pub headers: Vec<(String, String)>,
    /// The text a reader shows as plain text: the whole body of a one-part
    /// mail, the `text/plain` part of a multipart one, decoded.
    pub body: String,
    /// The `text/html` part, decoded, when the mail has one.
    pub html: Option<String>,
    /// The whole mail as delivered, for a MIME parser.
    pub raw: String,
}

impl ReadMail {
    fn parse(raw: &str) -> Self {
        let raw = raw.replace("\r\n", "\n");
        let (head, body) = raw.split_once("\n\n").unwrap_or((&raw, ""));
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in head.lines() {
            if line.starts_with(char::is_whitespace) {
                if let Some(last) = headers.last_mut() {
                    last.1.push(' ');
                    last.1.push_str(line.trim());
                }
            } else if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
        }
        let parsed = mail_parser::MessageParser::default().parse(raw.as_bytes());
        let multipart = headers
            .iter()
            .any(|(name, value)| name == "content-type" && value.to_ascii_lowercase().starts_with("multipart/"));
        let (body, html) = match parsed.filter(|_| multipart) {
            Some(message) => {
                let html = message
                    .parts
                    .iter()
                    .find(|part| {
                        use mail_parser::MimeHeaders;
                        part.content_type()
                            .is_some_and(|t| t.c_type.eq_ignore_ascii_case("text") && t.subtype() == Some("html"))
                    })
                    .and_then(|part| part.text_contents().map(str::to_owned));
                let text = message
                    .body_text(0)
                    .map(|text| text.trim().to_owned())
                    .unwrap_or_default();
                (text, html)
            }
            None => (body.trim().to_owned(), None),
        };
        Self {
            headers,
            body,
            html,
            raw,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}
