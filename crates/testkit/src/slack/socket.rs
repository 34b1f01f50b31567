//! The fake Socket Mode server: the WebSocket URL `apps.connections.open`
//! hands out. A connection needs a fresh ticket, starts with `hello`, gets
//! `events_api` envelopes in order, and must answer each with
//! `{"envelope_id": …}`; envelopes left unacked are sent again, as Slack does.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;

use super::Shared;
use super::state::Frame;

/// Accepts WebSocket connections until `stop` turns true.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    // Frames go out at once, as from Slack's own front end.
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(connection(stream, shared.clone()));
                }
            }
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    }
}

/// Resends envelopes whose ack deadline passed, until `stop` turns true.
pub async fn redeliver(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        let deadline = shared.lock().next_deadline();
        let expired = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = expired => {
                shared.lock().expire(Instant::now());
                shared.changed();
            }
            () = shared.wake.notified() => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    }
}

fn ticket_of(request: &Request) -> Option<String> {
    if request.uri().path() != "/link/" && request.uri().path() != "/link" {
        return None;
    }
    request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("ticket="))
        .map(str::to_owned)
}

// The handshake callback's error type is tungstenite's, large as it is.
#[allow(clippy::result_large_err)]
async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let check = shared.clone();
    // A ticket opens one connection; Slack refuses reused or made-up ones.
    let callback = move |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        let mut state = check.lock();
        match ticket_of(request).and_then(|t| state.tickets.iter().position(|known| *known == t)) {
            Some(index) => {
                state.tickets.remove(index);
                Ok(response)
            }
            None => {
                let mut refusal = ErrorResponse::new(Some("invalid or used ticket".into()));
                *refusal.status_mut() = StatusCode::UNAUTHORIZED;
                Err(refusal)
            }
        }
    };
    let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let (mut sink, mut source) = socket.split();
    let (writer, mut frames) = mpsc::unbounded_channel();
    let id = {
        let mut state = shared.lock();
        let id = state.add_connection(writer);
        state.pump(Instant::now());
        id
    };
    shared.wake.notify_one();
    shared.changed();
    let write = tokio::spawn(async move {
        while let Some(frame) = frames.recv().await {
            let message = match frame {
                Frame::Text(text) => Message::Text(text.into()),
                Frame::Close => Message::Close(None),
            };
            let closing = matches!(message, Message::Close(_));
            if sink.send(message).await.is_err() || closing {
                break;
            }
        }
    });
    while let Some(message) = source.next().await {
        match message {
            Ok(Message::Text(text)) => {
                let Ok(frame) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let Some(envelope_id) = frame.get("envelope_id").and_then(Value::as_str) {
                    shared.lock().ack(envelope_id);
                    shared.changed();
                }
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    shared.lock().remove_connection(id, Instant::now());
    shared.wake.notify_one();
    shared.changed();
    write.abort();
}
