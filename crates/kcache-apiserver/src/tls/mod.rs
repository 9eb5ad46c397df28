//! HTTPS for the embedded server: a CA generated at start (never written anywhere but the
//! kubeconfig, as `certificate-authority-data`), a serving certificate it signs for
//! `127.0.0.1`, `::1`, `localhost`, the in-cluster `kubernetes.default.svc` names and the
//! listen address — or certificates given in PEM, as kube-apiserver's `--tls-cert-file` /
//! `--tls-private-key-file` — and an acceptor that does the TLS handshakes off the accept loop.
//! With a client CA (kube-apiserver's `--client-ca-file`), a client may present a certificate
//! that CA signed: its subject is the request's identity (`ClientCertificate`); a client
//! presenting none still connects (bearer tokens work as before).

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

mod webhook;
pub(crate) mod x509;

pub(crate) use webhook::client_config as webhook_client_config;

/// Why the TLS material could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating a key or a certificate failed.
    #[error("generating the server's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("configuring TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// The given serving certificate or key is not usable PEM.
    #[error("the serving certificate: {0}")]
    ServingCertificate(String),
    /// The client CA is not usable (no certificate in the PEM, or one rustls refuses).
    #[error("the client CA: {0}")]
    ClientCa(String),
}

/// A serving certificate chain and its private key, PEM (as kube-apiserver reads them from
/// `--tls-cert-file` and `--tls-private-key-file`, or `apiserver.crt` / `apiserver.key` of
/// `--cert-dir`). The key is PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
#[derive(Clone)]
pub struct ServingCertificate {
    /// The certificate, then any intermediates, PEM.
    pub cert_pem: String,
    /// The private key, PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for ServingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCertificate")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// The server's certificates and its rustls configuration.
#[derive(Debug, Clone)]
pub(crate) struct Material {
    /// The generated CA certificate, PEM (none when serving a given certificate).
    pub(crate) ca_pem: Option<String>,
    config: Arc<rustls::ServerConfig>,
}

/// The TLS material of a server listening on `listen`: the given serving certificate or a
/// generated one, and client-certificate verification against `client_ca_pem` when set.
pub(crate) fn material(
    listen: SocketAddr,
    serving: Option<&ServingCertificate>,
    client_ca_pem: Option<&str>,
) -> Result<Material, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (ca_pem, chain, key) = match serving {
        Some(given) => {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(given.cert_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|e| TlsError::ServingCertificate(e.to_string()))?;
            if chain.is_empty() {
                return Err(TlsError::ServingCertificate(
                    "no CERTIFICATE block in the certificate PEM".to_owned(),
                ));
            }
            let key = PrivateKeyDer::from_pem_slice(given.key_pem.as_bytes())
                .map_err(|e| TlsError::ServingCertificate(format!("the private key: {e}")))?;
            (None, chain, key)
        }
        None => {
            let (ca_pem, cert, key) = generated(listen)?;
            (Some(ca_pem), vec![cert], key)
        }
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca_pem {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|e| TlsError::ClientCa(e.to_string()))?;
                roots
                    .add(cert)
                    .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(TlsError::ClientCa(
                    "no CERTIFICATE block in the PEM".to_owned(),
                ));
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Material {
        ca_pem,
        config: Arc::new(config),
    })
}

/// A fresh CA and a serving certificate for the loopback names and `listen`'s address.
fn generated(
    listen: SocketAddr,
) -> Result<(String, CertificateDer<'static>, PrivateKeyDer<'static>), TlsError> {
    let mut names: Vec<String> = [
        "localhost",
        "127.0.0.1",
        "::1",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let ip = listen.ip();
    if !ip.is_unspecified() && !names.contains(&ip.to_string()) {
        names.push(ip.to_string());
    }
    generate_pair("kube-apiserver", &names)
}

/// A CA generated now (`{common_name}-ca`) and a serving certificate it signs for `names`
/// (DNS names or IP addresses; common name `common_name`), returned as the CA in PEM and a
/// rustls server configuration offering HTTP/1.1 — what the embedded server serves with, and
/// what a test's HTTPS webhook needs (its `caBundle` is the PEM, base64-encoded).
///
/// ```
/// let (ca_pem, config) =
///     kcache_apiserver::tls::self_signed("webhook", &["127.0.0.1".to_owned()])?;
/// assert!(ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
/// # Ok::<(), kcache_apiserver::tls::TlsError>(())
/// ```
///
/// # Errors
/// [`TlsError`] when a key or certificate cannot be made or rustls refuses them.
pub fn self_signed(
    common_name: &str,
    names: &[String],
) -> Result<(String, Arc<rustls::ServerConfig>), TlsError> {
    let (ca_pem, cert, key) = generate_pair(common_name, names)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((ca_pem, Arc::new(config)))
}

/// A CA (PEM) and a serving certificate it signs for `names`, with the certificate's key.
fn generate_pair(
    common_name: &str,
    names: &[String],
) -> Result<(String, CertificateDer<'static>, PrivateKeyDer<'static>), TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{common_name}-ca"));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer)?;
    Ok((
        ca_cert.pem(),
        cert.der().clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    ))
}

/// A listener whose connections are TLS streams: TCP connections are accepted and their
/// handshakes run on tasks of their own, so a slow or broken client delays no other.
pub(crate) struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accepts on `listener` until `shutdown`.
    pub(crate) fn new(
        listener: TcpListener,
        material: &Material,
        shutdown: CancellationToken,
    ) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(material.config.clone());
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = shutdown.cancelled() => break,
                    a = listener.accept() => a,
                };
                let (tcp, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let handshake = tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        acceptor.accept(tcp),
                    )
                    .await;
                    match handshake {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self { rx, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The accept loop ended (shutdown): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// What the server knows of a TLS connection's peer: the verified client certificate's
/// identity, if the client presented one (axum's connect info of the TLS listener; the request
/// entry moves it into the request's extensions as a [`ClientCertificate`]).
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) certificate: Option<ClientCertificate>,
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Self {
        // rustls verified the chain against the client CA during the handshake.
        let certificate = stream
            .io()
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| {
                let (common_name, organizations) = x509::subject(leaf)?;
                Some(ClientCertificate {
                    common_name,
                    organizations,
                    sha256: hex(ring::digest::digest(&ring::digest::SHA256, leaf).as_ref()),
                })
            });
        Self { certificate }
    }
}

/// The identity a client certificate verified against the server's client CA names, as
/// kube-apiserver's x509 authenticator reads it: the subject's CN is the user, each O a group.
/// The TLS layer puts it into the extensions of every request on that connection; the
/// authenticator reads it from there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientCertificate {
    /// The subject's common name: the user name.
    pub(crate) common_name: String,
    /// The subject's organizations: the user's groups.
    pub(crate) organizations: Vec<String>,
    /// The SHA-256 of the certificate (DER), lower-case hex: the user's credential id.
    pub(crate) sha256: String,
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
