//! One live connection to one MCP server, through rmcp: a program started
//! on stdio (its own process group, an environment of only `PATH` and the
//! configured variables, its stderr read into the log and kept as a short
//! tail for error messages) or a streamable HTTP endpoint.
//!
//! Architecture invariant: a stdio server never outlives its connection.
//! Dropping a [`Connection`] kills the server's whole process group, so a
//! hung server, a restart or Herald's shutdown leaves nothing behind.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use secrecy::ExposeSecret;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::config::{ServerConfig, Transport};
use crate::tools::Listed;

/// What `tools/list` gave, and where it was cut off, if it was.
#[derive(Debug, Default)]
pub struct Listing {
    pub tools: Vec<Listed>,
    pub cut: Option<String>,
}

/// The longest JSON-RPC line read from a stdio server; a longer one (a
/// result of many megabytes) is dropped by the transport, and the call it
/// answered ends at its timeout.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Lines of a server's stderr kept for the operator's log.
const STDERR_TAIL_LINES: usize = 8;
/// Characters of one stderr line kept; the rest of the line is read and
/// dropped, so a line that never ends (a progress bar drawn with `\r`)
/// costs this much, not its length.
const STDERR_LINE_CHARS: usize = 300;
/// `tools/list` pages read at most, and tools kept at most: a server that
/// lists more is cut off there, and the operator told.
pub const MAX_LIST_PAGES: usize = 16;
pub const MAX_TOOLS: usize = 256;

/// Why a call failed, and whether the server went away with it.
#[derive(Debug)]
pub struct CallError {
    pub gone: bool,
    pub message: String,
}

/// Why connecting failed, for the operator.
#[derive(Debug)]
pub struct ConnectError(pub String);

/// Notices from the server that the connection keeps.
#[derive(Clone)]
struct Handler {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// The process group of a stdio server.
    group: Option<nix::unistd::Pid>,
    pub instructions: Option<String>,
    pub title: Option<String>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            // The whole group: npx, a shell or node's workers included.
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// The last lines a server wrote to stderr, for the operator: stripped of
/// control characters, with the values of its configured `env` and
/// `headers` hidden. Never shown to a chat or the model.
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().expect("stderr tail lock");
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub fn text(&self) -> String {
        self.0
            .lock()
            .expect("stderr tail lock")
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

impl Connection {
    /// Starts or reaches the server and completes the MCP handshake.
    /// `tools_changed` is set whenever the server says its list changed.
    pub async fn open(
        name: &str,
        config: &ServerConfig,
        tls: &herald_net::ClientTls,
        stderr: &StderrTail,
        tools_changed: Arc<AtomicBool>,
    ) -> Result<Self, ConnectError> {
        let handler = Handler {
            tools_changed: Arc::clone(&tools_changed),
        };
        let (service, group) = match config.transport() {
            Transport::Stdio => {
                let (transport, group) = spawn(name, config, stderr)?;
                let guard = GroupGuard(Some(group));
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|err| ConnectError(format!("the MCP handshake failed: {err}")))?;
                (service, guard.defuse())
            }
            Transport::Http => {
                let url = config.url.clone().unwrap_or_default();
                let mut headers = HashMap::new();
                for (key, value) in &config.headers {
                    let name = http::HeaderName::from_bytes(key.as_bytes())
                        .map_err(|_| ConnectError(format!("`{key}` is not a valid header name")))?;
                    let mut value = http::HeaderValue::from_str(value.expose_secret())
                        .map_err(|_| ConnectError(format!("the value of header `{key}` is not valid")))?;
                    value.set_sensitive(true);
                    headers.insert(name, value);
                }
                let client = tls
                    .http()
                    .connect_timeout(config.startup_timeout)
                    .build()
                    .map_err(|err| ConnectError(format!("cannot build an HTTP client: {err}")))?;
                let transport = StreamableHttpClientTransport::with_client(
                    client,
                    StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers),
                );
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|err| ConnectError(format!("the MCP handshake failed: {err}")))?;
                (service, None)
            }
        };
        let info = service.peer_info();
        let instructions = info.as_ref().and_then(|i| i.instructions.clone());
        let title = info.as_ref().and_then(|i| i.server_info.as_ref()).map(|server| {
            server
                .title
                .clone()
                .or_else(|| server.description.clone())
                .unwrap_or_else(|| server.name.clone())
        });
        Ok(Self {
            service,
            group,
            instructions,
            title,
        })
    }

    pub fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    /// The server's tools, page by page, at most [`MAX_LIST_PAGES`] pages
    /// and [`MAX_TOOLS`] tools (the rest is not asked for or kept).
    pub async fn list_tools(&self) -> Result<Listing, String> {
        let peer = self.service.peer();
        let mut listing = Listing::default();
        let mut cursor = None;
        for page in 1.. {
            let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor.take());
            let result = peer.list_tools(Some(params)).await.map_err(|err| err.to_string())?;
            for tool in result.tools {
                if listing.tools.len() == MAX_TOOLS {
                    listing.cut = Some(format!(
                        "it lists more than {MAX_TOOLS} tools; the first {MAX_TOOLS} are used"
                    ));
                    return Ok(listing);
                }
                let annotations = tool.annotations.as_ref();
                listing.tools.push(Listed {
                    name: tool.name.to_string(),
                    title: tool.title.clone(),
                    description: tool.description.as_ref().map(|d| d.to_string()),
                    input_schema: (*tool.input_schema).clone(),
                    read_only: annotations.and_then(|a| a.read_only_hint),
                    destructive: annotations.and_then(|a| a.destructive_hint),
                });
            }
            match result.next_cursor {
                None => return Ok(listing),
                Some(_) if page == MAX_LIST_PAGES => {
                    listing.cut = Some(format!(
                        "it lists its tools in more than {MAX_LIST_PAGES} pages; the first {MAX_LIST_PAGES} are used"
                    ));
                    return Ok(listing);
                }
                next => cursor = next,
            }
        }
        Ok(listing)
    }

    /// Calls a tool; the error says whether the connection went away.
    pub async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<CallToolResult, CallError> {
        self.service
            .peer()
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .map_err(|err| CallError {
                gone: matches!(err, ServiceError::TransportClosed | ServiceError::TransportSend(_)) || self.is_closed(),
                message: err.to_string(),
            })
    }
}

/// Kills a process group unless defused: a handshake that fails or is
/// cancelled by its timeout leaves no server behind.
struct GroupGuard(Option<nix::unistd::Pid>);

impl GroupGuard {
    fn defuse(mut self) -> Option<nix::unistd::Pid> {
        self.0.take()
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

type StdioTransport = AsyncRwTransport<RoleClient, tokio::process::ChildStdout, tokio::process::ChildStdin>;

/// Starts a stdio server in a process group of its own with a scrubbed environment.
fn spawn(
    name: &str,
    config: &ServerConfig,
    stderr_tail: &StderrTail,
) -> Result<(StdioTransport, nix::unistd::Pid), ConnectError> {
    let program = config.command.as_deref().unwrap_or_default();
    let mut command = tokio::process::Command::new(program);
    command
        .args(&config.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    for (key, value) in &config.env {
        command.env(key, value.expose_secret());
    }
    let mut child = command
        .spawn()
        .map_err(|err| ConnectError(format!("cannot start `{program}`: {err}")))?;
    let pid = child
        .id()
        .ok_or_else(|| ConnectError(format!("`{program}` exited at once")))?;
    let group = nix::unistd::Pid::from_raw(pid as i32);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stdin = child.stdin.take().expect("stdin is piped");
    if let Some(stderr) = child.stderr.take() {
        let tail = stderr_tail.clone();
        let server = name.to_owned();
        let secrets: Vec<String> = config
            .env
            .values()
            .chain(config.headers.values())
            .map(|value| value.expose_secret().to_owned())
            .filter(|value| value.len() >= 4)
            .collect();
        tokio::spawn(async move {
            let mut lines = BoundedLines::new(stderr);
            while let Some(line) = lines.next_line().await {
                let line = hide(&herald_core::text::printable_line(&line), &secrets);
                if line.is_empty() {
                    continue;
                }
                tracing::debug!(server = %server, line = %line, "mcp server stderr");
                tail.push(line);
            }
        });
    }
    // Reaps the server when it exits; the group is killed by the connection.
    let server = name.to_owned();
    tokio::spawn(async move {
        if let Ok(status) = child.wait().await {
            tracing::info!(server = %server, status = %status, "mcp server exited");
        }
    });
    let transport = AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
    Ok((transport, group))
}

/// `text` with each of `secrets` replaced by `[hidden]`.
fn hide(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_owned();
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), "[hidden]");
        }
    }
    text
}

/// Lines of a stream, ended by `\n` or `\r`, each cut to
/// [`STDERR_LINE_CHARS`] characters while it is read: what a line holds
/// beyond that is read and dropped, never kept.
struct BoundedLines<R> {
    reader: R,
    buffer: Box<[u8]>,
    filled: usize,
    at: usize,
    ended: bool,
}

impl<R: AsyncRead + Unpin> BoundedLines<R> {
    fn new(reader: R) -> Self {
        Self {
            reader,
            buffer: vec![0; 8 * 1024].into_boxed_slice(),
            filled: 0,
            at: 0,
            ended: false,
        }
    }

    /// The next line (possibly empty), or `None` at the stream's end.
    async fn next_line(&mut self) -> Option<String> {
        // A character is at most four bytes.
        let keep = STDERR_LINE_CHARS * 4;
        let mut line: Vec<u8> = Vec::new();
        loop {
            if self.at == self.filled {
                if self.ended {
                    return (!line.is_empty()).then(|| cut(&line));
                }
                match self.reader.read(&mut self.buffer).await {
                    Ok(0) | Err(_) => {
                        self.ended = true;
                        continue;
                    }
                    Ok(n) => {
                        self.filled = n;
                        self.at = 0;
                    }
                }
            }
            let rest = &self.buffer[self.at..self.filled];
            match rest.iter().position(|byte| matches!(byte, b'\n' | b'\r')) {
                Some(end) => {
                    let room = keep.saturating_sub(line.len());
                    line.extend_from_slice(&rest[..end.min(room)]);
                    self.at += end + 1;
                    return Some(cut(&line));
                }
                None => {
                    let room = keep.saturating_sub(line.len());
                    line.extend_from_slice(&rest[..rest.len().min(room)]);
                    self.at = self.filled;
                }
            }
        }
    }
}

fn cut(line: &[u8]) -> String {
    String::from_utf8_lossy(line).chars().take(STDERR_LINE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stderr_lines_end_at_either_line_end_and_are_cut_while_read() {
        let long = "#".repeat(100_000);
        let text = format!("first\nsecond\r{long}\rlast");
        let mut lines = BoundedLines::new(text.as_bytes());
        assert_eq!(lines.next_line().await.as_deref(), Some("first"));
        assert_eq!(lines.next_line().await.as_deref(), Some("second"));
        assert_eq!(lines.next_line().await.map(|l| l.len()), Some(STDERR_LINE_CHARS));
        assert_eq!(lines.next_line().await.as_deref(), Some("last"));
        assert_eq!(lines.next_line().await, None);
    }

    #[tokio::test]
    async fn a_line_that_never_ends_holds_at_most_its_cut() {
        // 64 MiB without a line end, read through a pipe-sized buffer.
        struct Endless(usize);
        impl AsyncRead for Endless {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let n = buf.remaining().min(self.0);
                buf.put_slice(&vec![b'='; n]);
                self.0 -= n;
                std::task::Poll::Ready(Ok(()))
            }
        }
        let mut lines = BoundedLines::new(Endless(64 * 1024 * 1024));
        let line = lines.next_line().await.unwrap();
        assert_eq!(line.len(), STDERR_LINE_CHARS);
        assert_eq!(lines.next_line().await, None);
    }

    #[test]
    fn configured_secrets_are_hidden() {
        let secrets = vec!["sk-live-1234".to_owned()];
        assert_eq!(hide("token=sk-live-1234 failed", &secrets), "token=[hidden] failed");
    }
}
