//! The one way the WebSocket adapters (Slack's Socket Mode, Discord's
//! gateway) open a WebSocket: with the TLS configuration of
//! [`herald_net::ClientTls`] that every other client uses too, and a cap on
//! how much of a message they take in. One place, so the two platforms
//! cannot drift apart in either.

use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

/// An open WebSocket to a platform, `wss://` (or `ws://` to a stand-in).
pub type WebSocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens a WebSocket to `url` trusting `tls`, refusing any message or frame
/// over `max_message` bytes (the connection then fails, and the adapter
/// connects again) so a hostile or broken peer cannot make Herald hold more.
pub async fn connect_websocket(
    url: &str,
    tls: &Arc<rustls::ClientConfig>,
    max_message: usize,
) -> Result<WebSocket, tokio_tungstenite::tungstenite::Error> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    let connector = Some(Connector::Rustls(Arc::clone(tls)));
    let (socket, _) = tokio_tungstenite::connect_async_tls_with_config(url, Some(config), true, connector).await?;
    Ok(socket)
}
