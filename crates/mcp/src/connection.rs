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
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::{ServerConfig, Transport};
use crate::tools::Listed;

/// The longest JSON-RPC line read from a stdio server; a longer one (a
/// result of many megabytes) is dropped by the transport, and the call it
/// answered ends at its timeout.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Lines of a server's stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 8;
const STDERR_LINE_CHARS: usize = 300;

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
#[derive(Clone, Default)]
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
    tools_changed: Arc<AtomicBool>,
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

/// The last lines a server wrote to stderr.
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
    pub async fn open(name: &str, config: &ServerConfig, stderr: &StderrTail) -> Result<Self, ConnectError> {
        let handler = Handler::default();
        let tools_changed = Arc::clone(&handler.tools_changed);
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
                let client = reqwest::Client::builder()
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
            tools_changed,
            group,
            instructions,
            title,
        })
    }

    pub fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    /// Whether the server said its tool list changed since the last call; clears it.
    pub fn take_tools_changed(&self) -> bool {
        self.tools_changed.swap(false, Ordering::SeqCst)
    }

    pub async fn list_tools(&self) -> Result<Vec<Listed>, String> {
        let tools = self
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(|err| err.to_string())?;
        Ok(tools
            .into_iter()
            .map(|tool| {
                let annotations = tool.annotations.as_ref();
                Listed {
                    name: tool.name.to_string(),
                    title: tool.title.clone(),
                    description: tool.description.as_ref().map(|d| d.to_string()),
                    input_schema: (*tool.input_schema).clone(),
                    read_only: annotations.and_then(|a| a.read_only_hint),
                    destructive: annotations.and_then(|a| a.destructive_hint),
                }
            })
            .collect())
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
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let line: String = line.chars().take(STDERR_LINE_CHARS).collect();
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
