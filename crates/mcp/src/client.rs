//! [`McpClient`]: every configured server behind [`McpServers`]. A server
//! is started (or reached) when first needed (an eager one when Herald
//! starts, [`McpClient::warm_up`]), within `startup_timeout`; a call runs
//! within `call_timeout`.
//!
//! Its tool list is listed once for every turn that needs it (one listing
//! in flight per server, which each caller waits for only as long as it
//! chose: a turn hardly at all, an explicit activation until it ends), kept
//! until the server says it changed, and kept after a listing that failed
//! (the last good list). So a server that hangs or is down costs a turn
//! nothing: its listing goes on, or waits for its next try, in the
//! background.
//!
//! A server that fails to start, crashes or hangs is reported and dropped
//! (a stdio server's process group is killed), never taking Herald down.
//! The next use starts it again: at once after a first failure, then after
//! a delay doubling from one second to a minute while failures repeat.
//! What it wrote to stderr goes to the operator's log (stripped of control
//! characters, its configured secrets hidden), never into an error a chat
//! or the model sees.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use herald_core::{McpError, McpServerInfo, McpServers, McpTool, ToolOutput};
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::config::{McpConfig, ServerConfig};
use crate::connection::{Connection, StderrTail};
use crate::output::into_output;
use crate::tools::{Withheld, map_tools};
use herald_net::ClientTls;

const MAX_RESTART_DELAY: Duration = Duration::from_secs(60);
/// Characters of a server's own instructions used as its catalog line.
const SERVER_DESCRIPTION_CHARS: usize = 300;

pub struct McpClient {
    servers: BTreeMap<String, Arc<Server>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

struct Server {
    name: String,
    config: ServerConfig,
    /// The roots a server over HTTPS is trusted by.
    tls: ClientTls,
    live: tokio::sync::Mutex<Live>,
    seen: Mutex<Seen>,
    stderr: StderrTail,
    /// Set by any connection when the server says its tool list changed.
    tools_changed: Arc<AtomicBool>,
    /// The listing in flight, shared by everyone who asks meanwhile.
    listing: Mutex<Option<Listing>>,
}

type Listing = Shared<BoxFuture<'static, Result<Vec<McpTool>, McpError>>>;

#[derive(Default)]
struct Live {
    connection: Option<Arc<Connection>>,
    /// Failures in a row; reset by a successful start.
    failures: u32,
    retry_at: Option<Instant>,
}

/// What the last contact with the server showed, readable without waiting.
#[derive(Default)]
struct Seen {
    /// The last good list.
    tools: Option<Vec<McpTool>>,
    description: Option<String>,
    state: String,
    /// What the operator should know about the last listing.
    notes: Vec<String>,
}

impl McpClient {
    /// The servers of `config`, none started yet; those reached over
    /// HTTPS are trusted by `tls`.
    pub fn new(config: &McpConfig, tls: &ClientTls) -> Self {
        let servers = config
            .servers
            .iter()
            .map(|(name, config)| {
                let server = Server {
                    name: name.clone(),
                    config: config.clone(),
                    tls: tls.clone(),
                    live: tokio::sync::Mutex::new(Live::default()),
                    seen: Mutex::new(Seen {
                        state: "not started".into(),
                        ..Seen::default()
                    }),
                    stderr: StderrTail::default(),
                    tools_changed: Arc::new(AtomicBool::new(false)),
                    listing: Mutex::new(None),
                };
                (name.clone(), Arc::new(server))
            })
            .collect();
        Self { servers }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Starts listing every eager server's tools in the background, so the
    /// first turns find them listed.
    pub fn warm_up(&self) {
        for server in self.servers.values().filter(|server| server.config.eager) {
            // The listing runs in a task of its own; its result is kept.
            drop(Arc::clone(server).listing());
        }
    }

    /// Stops every server (a stdio server's whole process group).
    pub async fn shutdown(&self) {
        for server in self.servers.values() {
            server.live.lock().await.connection = None;
        }
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, McpError> {
        self.servers
            .get(name)
            .ok_or_else(|| McpError::UnknownServer(name.to_owned()))
    }
}

impl Server {
    fn set_state(&self, state: String) {
        self.seen.lock().expect("seen lock").state = state;
    }

    /// The live connection, started when there is none.
    async fn connection(&self) -> Result<Arc<Connection>, McpError> {
        let mut live = self.live.lock().await;
        if let Some(connection) = &live.connection {
            if !connection.is_closed() {
                return Ok(Arc::clone(connection));
            }
            live.connection = None;
            self.fail(&mut live, "the server closed the connection".into());
        }
        if let Some(at) = live.retry_at
            && at > Instant::now()
        {
            let wait = at - Instant::now();
            return Err(self.unavailable(format!(
                "it failed {} time(s) in a row; the next try is in {}s",
                live.failures,
                wait.as_secs().max(1)
            )));
        }
        self.set_state("starting".into());
        let opened = tokio::time::timeout(
            self.config.startup_timeout,
            Connection::open(
                &self.name,
                &self.config,
                &self.tls,
                &self.stderr,
                Arc::clone(&self.tools_changed),
            ),
        )
        .await;
        let connection = match opened {
            Ok(Ok(connection)) => Arc::new(connection),
            Ok(Err(err)) => return Err(self.fail(&mut live, err.0)),
            Err(_) => {
                return Err(self.fail(
                    &mut live,
                    format!(
                        "it did not start within startup_timeout ({})",
                        herald_core::duration::format(self.config.startup_timeout)
                    ),
                ));
            }
        };
        live.failures = 0;
        live.retry_at = None;
        {
            let mut seen = self.seen.lock().expect("seen lock");
            seen.description = connection
                .instructions
                .as_deref()
                .map(herald_core::text::printable_line)
                .filter(|text| !text.is_empty())
                .map(|text| first_sentences(&text, SERVER_DESCRIPTION_CHARS))
                .or_else(|| connection.title.as_deref().map(herald_core::text::printable_line));
            seen.state = "running".into();
        }
        // A new connection's list may differ from the last one's.
        self.tools_changed.store(true, Ordering::SeqCst);
        tracing::info!(server = %self.name, "mcp server connected");
        live.connection = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// Records a failure, schedules the next try, and says so: with its
    /// stderr to the operator's log, without it to whoever asked.
    fn fail(&self, live: &mut Live, reason: String) -> McpError {
        live.failures += 1;
        live.retry_at = Some(Instant::now() + restart_delay(live.failures));
        tracing::warn!(
            server = %self.name,
            failures = live.failures,
            reason = %reason,
            stderr = %self.stderr.text(),
            "mcp server unavailable"
        );
        metrics::counter!("herald_mcp_server_failures_total").increment(1);
        self.set_state(format!("failed: {reason}"));
        self.unavailable(reason)
    }

    fn unavailable(&self, reason: String) -> McpError {
        McpError::Unavailable {
            server: self.name.clone(),
            reason,
        }
    }

    /// Drops a connection that hung or broke, so the next use starts afresh.
    async fn drop_connection(&self, broken: &Arc<Connection>, reason: String) -> McpError {
        let mut live = self.live.lock().await;
        if live.connection.as_ref().is_some_and(|c| Arc::ptr_eq(c, broken)) {
            live.connection = None;
        }
        self.fail(&mut live, reason)
    }

    /// The tools, waiting at most `wait` for a listing (which goes on after
    /// the wait): the list kept, unless the server said it changed; else the
    /// listing in flight or a new one; the last good list when that fails or
    /// takes longer than `wait`.
    async fn tools(self: &Arc<Self>, wait: Duration) -> Result<Vec<McpTool>, McpError> {
        let kept = self.seen.lock().expect("seen lock").tools.clone();
        if let Some(tools) = &kept
            && !self.tools_changed.load(Ordering::SeqCst)
        {
            return Ok(tools.clone());
        }
        let listing = Arc::clone(self).listing();
        match tokio::time::timeout(wait, listing).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(err)) => match kept {
                Some(tools) => {
                    tracing::warn!(server = %self.name, error = %err, "mcp tools listed again failed; the last good list is used");
                    Ok(tools)
                }
                None => Err(err),
            },
            Err(_) => kept.ok_or_else(|| {
                self.unavailable("it has not listed its tools yet; they are offered once it has".into())
            }),
        }
    }

    /// The listing in flight, or a new one started in the background.
    fn listing(self: Arc<Self>) -> Listing {
        let mut slot = self.listing.lock().expect("listing lock");
        if let Some(listing) = slot.as_ref()
            && listing.peek().is_none()
        {
            return listing.clone();
        }
        let server = Arc::clone(&self);
        let running = tokio::spawn(async move { server.list_now().await });
        let listing = async move {
            running.await.unwrap_or_else(|_| {
                Err(McpError::Failed {
                    server: String::new(),
                    reason: "its listing stopped".into(),
                })
            })
        }
        .boxed()
        .shared();
        *slot = Some(listing.clone());
        listing
    }

    /// Lists the tools now and keeps the list (with what the operator should
    /// know of it), starting the server when needed.
    async fn list_now(&self) -> Result<Vec<McpTool>, McpError> {
        self.tools_changed.store(false, Ordering::SeqCst);
        let connection = match self.connection().await {
            Ok(connection) => connection,
            Err(err) => {
                // A failed start is not a change of list: it is tried again.
                self.tools_changed.store(true, Ordering::SeqCst);
                return Err(err);
            }
        };
        let listing = match tokio::time::timeout(self.config.call_timeout, connection.list_tools()).await {
            Ok(Ok(listing)) => listing,
            Ok(Err(err)) => {
                self.tools_changed.store(true, Ordering::SeqCst);
                return Err(self
                    .drop_connection(&connection, format!("tools/list failed: {err}"))
                    .await);
            }
            Err(_) => {
                self.tools_changed.store(true, Ordering::SeqCst);
                return Err(self
                    .drop_connection(&connection, "tools/list did not answer within call_timeout".into())
                    .await);
            }
        };
        let mapped = match map_tools(&self.name, &self.config, listing.tools) {
            Ok(mapped) => mapped,
            Err(Withheld(reason)) => {
                tracing::warn!(server = %self.name, reason = %reason, "mcp server's tools withheld");
                let mut seen = self.seen.lock().expect("seen lock");
                seen.tools = Some(Vec::new());
                seen.notes = Vec::new();
                seen.state = format!("running, its tools withheld: {reason}");
                return Err(self.unavailable(reason));
            }
        };
        let mut notes = mapped.notes;
        notes.extend(listing.cut);
        for note in &notes {
            tracing::warn!(server = %self.name, note = %note, "mcp server's tool list");
        }
        let tools = mapped.tools;
        tracing::info!(server = %self.name, tools = tools.len(), "mcp tools listed");
        let mut seen = self.seen.lock().expect("seen lock");
        seen.state = format!("running, {} tools", tools.len());
        seen.tools = Some(tools.clone());
        seen.notes = notes;
        Ok(tools)
    }

    async fn call(self: &Arc<Self>, tool: &str, arguments: Map<String, Value>) -> Result<ToolOutput, McpError> {
        // A call names a tool the model was offered, so a list is known: a
        // listing is waited for only after a change.
        let tools = self
            .tools(self.config.startup_timeout + self.config.call_timeout)
            .await?;
        let Some(remote) = tools.iter().find(|t| t.name == tool).map(|t| t.remote_name.clone()) else {
            return Err(McpError::UnknownTool {
                server: self.name.clone(),
                tool: tool.to_owned(),
            });
        };
        let connection = self.connection().await?;
        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout(self.config.call_timeout, connection.call(&remote, arguments)).await;
        let result = match outcome {
            Ok(Ok(result)) => {
                metrics::counter!("herald_mcp_calls_total", "outcome" => "ok").increment(1);
                Ok(into_output(result))
            }
            Ok(Err(err)) if err.gone => {
                metrics::counter!("herald_mcp_calls_total", "outcome" => "crashed").increment(1);
                Err(McpError::Failed {
                    server: self.name.clone(),
                    reason: self
                        .drop_connection(
                            &connection,
                            format!(
                                "the server went away during the call ({}); it is started again on next use",
                                err.message
                            ),
                        )
                        .await
                        .to_string(),
                })
            }
            Ok(Err(err)) => {
                metrics::counter!("herald_mcp_calls_total", "outcome" => "error").increment(1);
                Err(McpError::Failed {
                    server: self.name.clone(),
                    reason: err.message,
                })
            }
            Err(_) => {
                metrics::counter!("herald_mcp_calls_total", "outcome" => "timeout").increment(1);
                let _ = self
                    .drop_connection(&connection, format!("`{remote}` did not answer within call_timeout"))
                    .await;
                Err(McpError::Timeout {
                    server: self.name.clone(),
                    after: self.config.call_timeout,
                })
            }
        };
        tracing::debug!(server = %self.name, tool = %remote, elapsed_ms = started.elapsed().as_millis() as u64, "mcp call");
        result
    }
}

/// How long to wait before starting a server again after `failures`
/// failures in a row: nothing after the first, then 1 s doubling to a minute.
fn restart_delay(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_secs(1u64 << (n - 2).min(6)).min(MAX_RESTART_DELAY),
    }
}

/// The first sentences of `text` within `max` characters, on one line.
fn first_sentences(text: &str, max: usize) -> String {
    // Markdown headings are common in instructions; their marks are noise here.
    let one_line = text
        .split_whitespace()
        .filter(|word| !word.chars().all(|c| c == '#'))
        .collect::<Vec<_>>()
        .join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let cut: String = one_line.chars().take(max - 1).collect();
    match cut.rfind(". ") {
        Some(end) if end > max / 3 => cut[..=end].to_owned(),
        _ => format!("{}…", cut.trim_end()),
    }
}

#[async_trait]
impl McpServers for McpClient {
    fn servers(&self) -> Vec<McpServerInfo> {
        self.servers
            .values()
            .map(|server| {
                let seen = server.seen.lock().expect("seen lock");
                McpServerInfo {
                    name: server.name.clone(),
                    description: server
                        .config
                        .description
                        .clone()
                        .or_else(|| seen.description.clone())
                        .unwrap_or_else(|| format!("Tools from the MCP server `{}`.", server.name)),
                    elevated: server.config.elevated,
                    eager: server.config.eager,
                    state: seen.state.clone(),
                    notes: seen.notes.clone(),
                }
            })
            .collect()
    }

    async fn tools(&self, server: &str, wait: Duration) -> Result<Vec<McpTool>, McpError> {
        self.server(server)?.tools(wait).await
    }

    fn known_tools(&self, server: &str) -> Option<Vec<McpTool>> {
        let server = self.servers.get(server)?;
        server.seen.lock().expect("seen lock").tools.clone()
    }

    async fn call(&self, server: &str, tool: &str, arguments: Map<String, Value>) -> Result<ToolOutput, McpError> {
        self.server(server)?.call(tool, arguments).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{first_sentences, restart_delay};

    #[test]
    fn restarts_back_off_from_at_once_to_a_minute() {
        let delays: Vec<u64> = (1..=10).map(|n| restart_delay(n).as_secs()).collect();
        assert_eq!(delays, [0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(restart_delay(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn server_instructions_become_one_short_line() {
        assert_eq!(
            first_sentences("Reads files.\n\nUse it  well.", 300),
            "Reads files. Use it well."
        );
        let long = format!("{}. {}", "a".repeat(150), "b".repeat(300));
        assert_eq!(first_sentences(&long, 300), format!("{}.", "a".repeat(150)));
        assert!(first_sentences(&"c".repeat(400), 300).ends_with('…'));
    }
}
