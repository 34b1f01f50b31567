//! The TLS set-up of the WebSocket adapters (Slack's Web API and Socket
//! Mode, Discord's gateway): rustls with ring and the system's root
//! certificates, read once per adapter, and the one way they open a
//! WebSocket. One place, so the two platforms cannot drift apart in what
//! they trust or how much of a frame they take in.

use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use tracing::warn;

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

/// A client configuration trusting the system's roots. `platform` names
/// who the connections go to in the warning when there are none.
pub fn client_config(platform: &str) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        warn!(
            errors = found.errors.len(),
            "no system root certificates; TLS to {platform} will fail"
        );
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}
