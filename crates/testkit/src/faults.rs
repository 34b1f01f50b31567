//! Faults a fake can answer with instead of doing what was asked: a server
//! error, or a connection that closes before any answer. Either way the
//! request had no effect, as when a real platform's front end fails before
//! the request reaches it, so a client that tries again loses and
//! duplicates nothing. [`Fault::LoseAnswer`] is the other case: the request
//! worked and only its answer was lost.

use std::collections::VecDeque;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// An answer with this status and body (`application/json`).
    Status(u16, String),
    /// The connection ends before a whole answer was sent.
    Drop,
    /// The request takes effect, then the connection ends before the
    /// answer: the client cannot know whether it worked. Only fakes that
    /// say so support it (the Discord fake's create-message).
    LoseAnswer,
}

impl Fault {
    /// A bare `502 Bad Gateway` in HTML, as a proxy in front of an API sends it.
    pub fn bad_gateway() -> Self {
        Fault::Status(
            502,
            "<html><head><title>502 Bad Gateway</title></head><body>502 Bad Gateway</body></html>".into(),
        )
    }

    pub fn response(&self) -> Response {
        match self {
            Fault::Status(status, body) => {
                let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let content_type = if body.trim_start().starts_with('<') {
                    "text/html"
                } else {
                    "application/json"
                };
                (status, [(header::CONTENT_TYPE, content_type)], body.clone()).into_response()
            }
            // Headers promise a body that never comes: hyper aborts the
            // connection when the body stream fails.
            Fault::Drop | Fault::LoseAnswer => {
                let failing = futures::stream::once(async {
                    Err::<axum::body::Bytes, std::io::Error>(std::io::Error::other("connection dropped by the fake"))
                });
                Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::CONTENT_LENGTH, "64")
                    .body(Body::from_stream(failing))
                    .expect("a valid response")
            }
        }
    }
}

/// Faults waiting for the next requests, by the name of what they hit.
#[derive(Debug, Default)]
pub struct Faults {
    pending: VecDeque<(String, Fault)>,
    /// How many faults were answered, in order, with what they hit.
    pub answered: Vec<(String, Fault)>,
}

impl Faults {
    pub fn add(&mut self, target: &str, faults: impl IntoIterator<Item = Fault>) {
        self.pending
            .extend(faults.into_iter().map(|fault| (target.to_owned(), fault)));
    }

    /// The first fault waiting for `target`, taken.
    pub fn take(&mut self, target: &str) -> Option<Fault> {
        let index = self.pending.iter().position(|(t, _)| t == target)?;
        let (target, fault) = self.pending.remove(index)?;
        self.answered.push((target, fault.clone()));
        Some(fault)
    }

    pub fn remaining(&self) -> usize {
        self.pending.len()
    }
}
