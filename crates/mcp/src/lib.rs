//! Herald's MCP client: the configured Model Context Protocol servers
//! (programs on stdio or streamable HTTP endpoints, through rmcp, the
//! official Rust SDK) behind [`herald_core::McpServers`].
//!
//! The skill registry decides who sees and runs a server's tools; this crate
//! owns the connections and what a server says: starting a server when first
//! needed, restarting one that crashed or hung, the environment it gets,
//! timeouts, tool names and policy flags from its annotations, and results
//! as the model reads them.
//!
//! Architecture invariant: a server never takes Herald down. Failing to
//! start, crashing, hanging or answering too much is an error for that call
//! or that server, reported and retried later; a stdio server's processes
//! end with its connection.

mod client;
mod config;
mod connection;
mod output;
mod tools;

pub use client::McpClient;
pub use config::{MAX_SERVER_NAME_CHARS, McpConfig, PolicyOverride, ServerConfig, ToolFilter, Transport};
pub use output::MAX_OUTPUT_BYTES;
pub use tools::{MAX_TOOL_NAME_CHARS, flags, tool_name};
