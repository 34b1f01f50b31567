//! TLS in front of the fakes, signed by a private certificate authority.
//!
//! The fakes speak plain HTTP and WebSockets on 127.0.0.1; a real platform
//! speaks TLS with a certificate that chains to a public root. To show what
//! Herald trusts (the system's roots plus `tls.extra_ca_file`, for every
//! adapter alike), a test makes a [`PrivateCa`], puts a [`TlsFront`] before
//! each fake (or a real server such as Dovecot) and points Herald at
//! `https://localhost:PORT`: with the CA's file configured every connection
//! must succeed, without it every one must be refused. The front counts the
//! handshakes it completed and refused, so a test can tell "refused for the
//! certificate" from "never tried".

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A certificate authority of the test's own, its certificate written to a
/// PEM file for `tls.extra_ca_file`.
pub struct PrivateCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    _dir: tempfile::TempDir,
    pem_file: PathBuf,
}

impl std::fmt::Debug for PrivateCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateCa").field("pem_file", &self.pem_file).finish()
    }
}

impl Default for PrivateCa {
    fn default() -> Self {
        Self::new()
    }
}

impl PrivateCa {
    pub fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names to check");
        params
            .distinguished_name
            .push(DnType::CommonName, "Herald test private CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("a key pair");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("a self-signed CA");
        let dir = tempfile::tempdir().expect("a temporary folder");
        let pem_file = dir.path().join("private-ca.pem");
        std::fs::write(&pem_file, issuer.pem()).expect("write the CA file");
        Self {
            issuer,
            _dir: dir,
            pem_file,
        }
    }

    /// The CA's certificate as PEM, for `tls.extra_ca_file`.
    pub fn pem_file(&self) -> &Path {
        &self.pem_file
    }

    /// The CA's certificate.
    pub fn certificate(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A server configuration for `localhost` and `127.0.0.1`, with a leaf
    /// certificate this CA signed.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("valid names");
        params.distinguished_name.push(DnType::CommonName, "localhost");
        let key = KeyPair::generate().expect("a key pair");
        let leaf = params.signed_by(&key, &self.issuer).expect("a signed leaf");
        let chain = vec![leaf.der().clone(), self.certificate()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("the leaf matches its key");
        Arc::new(config)
    }
}

/// A TLS-terminating proxy: accepts TLS on its own port and passes the
/// bytes on to a plain server, both ways, until either side closes.
pub struct TlsFront {
    addr: SocketAddr,
    counts: Arc<Counts>,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Counts {
    completed: AtomicUsize,
    refused: AtomicUsize,
}

impl std::fmt::Debug for TlsFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFront").field("addr", &self.addr).finish()
    }
}

impl TlsFront {
    /// TLS on a fresh port of 127.0.0.1 with a certificate `ca` signed, in
    /// front of `backend`.
    pub async fn start(ca: &PrivateCa, backend: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the TLS front");
        let addr = listener.local_addr().expect("its address");
        let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config());
        let counts = Arc::new(Counts::default());
        let task = tokio::spawn({
            let counts = Arc::clone(&counts);
            async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let acceptor = acceptor.clone();
                    let counts = Arc::clone(&counts);
                    tokio::spawn(async move {
                        let _ = tcp.set_nodelay(true);
                        let mut tls = match acceptor.accept(tcp).await {
                            Ok(tls) => {
                                counts.completed.fetch_add(1, Ordering::SeqCst);
                                tls
                            }
                            Err(_) => {
                                counts.refused.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                        };
                        let Ok(mut plain) = TcpStream::connect(backend).await else {
                            return;
                        };
                        let _ = plain.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    });
                }
            }
        });
        Self { addr, counts, task }
    }

    /// Where to connect: `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://localhost:PORT`, the name the certificate carries.
    pub fn https_url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }

    /// `wss://localhost:PORT`.
    pub fn wss_url(&self) -> String {
        format!("wss://localhost:{}", self.addr.port())
    }

    /// Handshakes that completed: a client trusted the certificate.
    pub fn completed(&self) -> usize {
        self.counts.completed.load(Ordering::SeqCst)
    }

    /// Handshakes that failed: typically a client that refused the
    /// certificate (it does not know the CA).
    pub fn refused(&self) -> usize {
        self.counts.refused.load(Ordering::SeqCst)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}
