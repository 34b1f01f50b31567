//! The TLS set-up of the WebSocket adapters (Slack's Web API and Socket
//! Mode, Discord's gateway): rustls with ring and the system's root
//! certificates, read once per adapter. One function, so the two platforms
//! cannot drift apart in what they trust.

use std::sync::Arc;

use tracing::warn;

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
