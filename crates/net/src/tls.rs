//! The one TLS trust Herald connects with.
//!
//! Everything Herald reaches over TLS (Telegram, Discord's REST API, files
//! and gateway, Slack's Web API and Socket Mode, IMAP and SMTP, the model,
//! transcription, MCP servers over HTTP) trusts the same roots: the
//! system's certificates plus those of `tls.extra_ca_file`, read once at
//! start and handed to each client. A company CA in that file therefore
//! works for every adapter or for none; before there was one set-up, four
//! had grown (system roots, bundled webpki roots, the platform verifier),
//! and a private CA worked for some adapters only.
//!
//! One crypto provider (ring), one rustls, one reqwest: [`ClientTls::http`]
//! is where every HTTP client starts.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tracing::warn;

/// Why the trust could not be set up: the extra CA file is unreadable or
/// holds no certificate Herald can use.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// The roots Herald trusts and the rustls configuration built from them.
/// Cheap to clone: every adapter holds the same one.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
    roots: Arc<[CertificateDer<'static>]>,
    extra: usize,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("roots", &self.roots.len())
            .field("extra", &self.extra)
            .finish()
    }
}

impl Default for ClientTls {
    /// The system's roots alone, read once per process: what a client gets
    /// when nobody handed it the configured trust (tests, tools).
    fn default() -> Self {
        static SYSTEM: OnceLock<ClientTls> = OnceLock::new();
        SYSTEM
            .get_or_init(|| ClientTls::load(None).expect("without a file there is nothing to fail"))
            .clone()
    }
}

impl ClientTls {
    /// The system's roots, plus every certificate of `extra_ca_file` when
    /// one is given. The file's certificates are checked here, so a broken
    /// file stops Herald at start, naming the file, rather than every
    /// connection failing later.
    pub fn load(extra_ca_file: Option<&Path>) -> Result<Self, TlsError> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = found.certs;
        if roots.is_empty() {
            warn!(
                errors = found.errors.len(),
                "no system root certificates were found; only tls.extra_ca_file is trusted"
            );
        }
        let extra = match extra_ca_file {
            Some(path) => read_certificates(path)?,
            None => Vec::new(),
        };
        let count = extra.len();
        roots.extend(extra);
        let mut tls = Self::with_roots(roots);
        tls.extra = count;
        Ok(tls)
    }

    /// Trusting exactly `roots` (no system certificates): for tests, and
    /// for [`ClientTls::load`].
    pub fn with_roots(roots: Vec<CertificateDer<'static>>) -> Self {
        // Only the roots rustls takes are kept, so every client built from
        // the list (lettre adds them one by one) trusts the same set.
        let mut store = rustls::RootCertStore::empty();
        let total = roots.len();
        let roots: Vec<_> = roots
            .into_iter()
            .filter(|cert| store.add(cert.clone()).is_ok())
            .collect();
        if roots.len() < total {
            warn!(
                ignored = total - roots.len(),
                "some root certificates could not be used"
            );
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(store)
            .with_no_client_auth();
        Self {
            config: Arc::new(config),
            roots: roots.into(),
            extra: 0,
        }
    }

    /// The rustls configuration, for clients that take one (WebSockets,
    /// IMAP). It offers no ALPN protocol: HTTP/1.1 and WebSockets both.
    pub fn rustls(&self) -> Arc<rustls::ClientConfig> {
        Arc::clone(&self.config)
    }

    /// The trusted roots as DER, for clients that build their own rustls
    /// configuration from a list (lettre's SMTP transport).
    pub fn roots(&self) -> &[CertificateDer<'static>] {
        &self.roots
    }

    /// How many roots came from `tls.extra_ca_file`.
    pub fn extra_roots(&self) -> usize {
        self.extra
    }

    /// A reqwest client builder on this trust: where every HTTP client
    /// Herald makes starts, each then setting its own timeouts.
    pub fn http(&self) -> reqwest::ClientBuilder {
        reqwest::Client::builder().tls_backend_preconfigured(rustls::ClientConfig::clone(&self.config))
    }
}

/// Every certificate of a PEM file; at least one, each parsable.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TlsError::Invalid {
            path: path.to_owned(),
            message: format!("not a PEM certificate file: {err}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    for cert in &certs {
        let mut probe = rustls::RootCertStore::empty();
        probe.add(cert.clone()).map_err(|err| TlsError::Invalid {
            path: path.to_owned(),
            message: format!("a certificate cannot be a root: {err}"),
        })?;
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn the_extra_file_adds_each_of_its_certificates_to_the_system_roots() {
        let file = write(&format!("{}\n{}", ca_pem(), ca_pem()));
        let system = ClientTls::load(None).unwrap();
        let tls = ClientTls::load(Some(file.path())).unwrap();
        assert_eq!(tls.extra_roots(), 2);
        assert_eq!(tls.roots().len(), system.roots().len() + 2);
        assert_eq!(system.extra_roots(), 0);
    }

    #[test]
    fn a_missing_empty_or_broken_file_is_refused_naming_it() {
        let missing = Path::new("/nonexistent/company-ca.pem");
        let err = ClientTls::load(Some(missing)).unwrap_err();
        assert!(matches!(err, TlsError::Read { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/company-ca.pem"), "{err}");

        let empty = write("just some text\n");
        let err = ClientTls::load(Some(empty.path())).unwrap_err();
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
        assert!(err.to_string().contains(&empty.path().display().to_string()), "{err}");

        let broken = write("-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n");
        let err = ClientTls::load(Some(broken.path())).unwrap_err();
        assert!(matches!(err, TlsError::Invalid { .. }), "{err}");

        let garbage = write("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        let err = ClientTls::load(Some(garbage.path())).unwrap_err();
        assert!(matches!(err, TlsError::Invalid { .. }), "{err}");
    }
}
