//! How Herald speaks HTTP and TLS: where strangers can reach it, and the
//! one trust it connects out with ([`tls::ClientTls`]).
//!
//! Every endpoint Herald serves to the internet (the Telegram webhook, the
//! Slack Events API, `/metrics` and the health checks) runs on
//! [`server::serve`], whose bounds hold before any handler runs: a cap on
//! connections, a deadline for a request's headers and one for its whole
//! body, a cap on each body and a budget for all bodies being read at once.
//! Handlers check what the headers prove (a webhook secret, a signature's
//! timestamp) before they read a body, with [`server::read_body`].

pub mod server;
pub mod tls;

pub use server::{BodyError, BodyRead, PublicLimits, read_body, serve};
pub use tls::{ClientTls, TlsError};
