//! HTTPS for the embedded server: a CA generated at start (never written anywhere but the
//! kubeconfig, as `certificate-authority-data`), a serving certificate it signs for
//! `127.0.0.1`, `::1`, `localhost`, the in-cluster `kubernetes.default.svc` names and the
//! listen address, and an acceptor that does the TLS handshakes off the accept loop.

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Why the TLS material could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating a key or a certificate failed.
    #[error("generating the server's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("configuring TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The server's certificates and its rustls configuration.
#[derive(Debug, Clone)]
pub(crate) struct Material {
    /// The CA certificate, PEM.
    pub(crate) ca_pem: String,
    config: Arc<rustls::ServerConfig>,
}

/// A fresh CA and a serving certificate for the loopback names and `listen`'s address.
pub(crate) fn generate(listen: SocketAddr) -> Result<Material, TlsError> {
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
    let (ca_pem, config) = self_signed("kube-apiserver", &names)?;
    Ok(Material { ca_pem, config })
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

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((ca_cert.pem(), Arc::new(config)))
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

/// The identity a client certificate verified against the server's client CA names, as
/// kube-apiserver's x509 authenticator reads it: the subject's CN is the user, each O a group.
/// The TLS layer puts it into the extensions of every request on that connection; the
/// authenticator reads it from there.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(dead_code)] // filled by the client-certificate verifier, read by the authenticator
pub(crate) struct ClientCertificate {
    /// The subject's common name: the user name.
    pub(crate) common_name: String,
    /// The subject's organizations: the user's groups.
    pub(crate) organizations: Vec<String>,
}
