//! Herald's channel adapters. Each platform lives in its own module, split
//! into pure translation (platform event to [`InboundMessage`], reply to
//! platform calls) and the one file that does I/O.
//!
//! Architecture invariant: adapters never call the model or the agent. They
//! hand what they receive to an [`InboundSink`](herald_core::InboundSink) and
//! send what the outbound path gives them.
//!
//! [`InboundMessage`]: herald_core::InboundMessage

pub mod access;
pub mod attachments;
mod built;
mod chunk;
pub mod clean;
pub mod config;
#[cfg(feature = "discord")]
pub mod discord;
#[cfg(feature = "email")]
pub mod email;
pub mod gateway;
pub mod local;
pub mod markdown;
#[cfg(any(feature = "telegram", feature = "discord"))]
mod multipart;
mod outbound;
mod retry;
#[cfg(feature = "slack")]
pub mod slack;
#[cfg(feature = "telegram")]
pub mod telegram;
#[cfg(any(feature = "slack", feature = "discord"))]
mod tls;

pub use built::Built;
