//! The trust of a webhook call, as kube-apiserver's Go client has it: the `caBundle`'s
//! certificates are the only roots, and a serving certificate listed verbatim in the bundle
//! is trusted as it is — Go's `x509.Certificate.Verify` accepts a leaf found in its roots
//! pool, which is how envtest's webhooks and `openssl req -x509` certificates (a self-signed
//! CA certificate serving) work. webpki alone refuses those (`CaUsedAsEndEntity` for a CA
//! certificate serving, `UnknownIssuer` for a leaf listed without its issuer).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_name};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A rustls client configuration trusting `ca_bundle` (PEM) as a Go client would.
pub(crate) fn client_config(ca_bundle: &[u8]) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let mut listed = Vec::new();
    for cert in CertificateDer::pem_slice_iter(ca_bundle).flatten() {
        listed.push(cert.clone().into_owned());
        // A certificate webpki cannot take as an anchor is still trusted when served verbatim.
        let _ = roots.add(cert);
    }
    let chain = if roots.is_empty() {
        None
    } else {
        Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| e.to_string())?,
        )
    };
    let verifier = BundleVerifier {
        chain,
        listed,
        provider: provider.clone(),
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

#[derive(Debug)]
struct BundleVerifier {
    /// webpki over the bundle's anchors (none when the bundle holds no usable anchor).
    chain: Option<Arc<WebPkiServerVerifier>>,
    /// Every certificate of the bundle, DER.
    listed: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for BundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let by_chain = match &self.chain {
            Some(v) => {
                v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            )),
        };
        let Err(chain_error) = by_chain else {
            return by_chain;
        };
        if !self
            .listed
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Err(chain_error);
        }
        // Listed verbatim: trusted as it is, still for its names and within its validity.
        verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
        let (not_before, not_after) = super::x509::validity(end_entity).ok_or(
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding),
        )?;
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        if now < not_before {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidYet,
            ));
        }
        if now > not_after {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Expired,
            ));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

    /// A certificate for `names` (self-signed when `issuer` is none), its PEM and key.
    fn cert(
        names: &[&str],
        ca: bool,
        issuer: Option<&Issuer<'_, KeyPair>>,
    ) -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, "hook");
        if ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        let c = match issuer {
            Some(i) => params.signed_by(&key, i).unwrap(),
            None => params.self_signed(&key).unwrap(),
        };
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (c.pem(), c.der().clone(), der)
    }

    /// A TLS handshake with a server serving `chain`, from a client trusting `bundle` (PEM).
    async fn handshake(
        chain: CertificateDer<'static>,
        key: PrivateKeyDer<'static>,
        client: rustls::ClientConfig,
        name: &str,
    ) -> Result<(), String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![chain], key)
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        tokio::spawn(async move {
            if let Ok((tcp, _)) = listener.accept().await {
                let _ = acceptor.accept(tcp).await;
            }
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let name = ServerName::try_from(name.to_owned()).unwrap();
        connector
            .connect(name, tcp)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// webpki alone, as webhook calls were made before: the bundle as roots.
    fn webpki_only(bundle: &str) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(bundle.as_bytes()).flatten() {
            roots.add(c).unwrap();
        }
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
    }

    #[tokio::test]
    async fn a_self_signed_ca_certificate_serving_is_trusted_when_it_is_the_bundle() {
        // `openssl req -x509 -subj /CN=hook -addext subjectAltName=IP:127.0.0.1`: a
        // self-signed certificate with CA:TRUE, serving and listed as the caBundle.
        let (pem, der, key) = cert(&["127.0.0.1"], true, None);
        let err = handshake(der.clone(), key.clone_key(), webpki_only(&pem), "127.0.0.1")
            .await
            .unwrap_err();
        assert!(err.contains("CaUsedAsEndEntity"), "{err}");
        let config = client_config(pem.as_bytes()).unwrap();
        handshake(der.clone(), key.clone_key(), config.clone(), "127.0.0.1")
            .await
            .expect("Go's client accepts it");
        let err = handshake(der, key, config, "localhost").await.unwrap_err();
        assert!(
            err.contains("not valid for name"),
            "the name still counts: {err}"
        );
    }

    #[tokio::test]
    async fn a_leaf_listed_without_its_issuer_is_trusted_as_envtest_lists_it() {
        // envtest's WebhookInstallOptions: the caBundle is the serving certificate itself.
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = Issuer::new(ca, ca_key);
        let (pem, der, key) = cert(&["localhost", "127.0.0.1"], false, Some(&issuer));
        let err = handshake(der.clone(), key.clone_key(), webpki_only(&pem), "localhost")
            .await
            .unwrap_err();
        assert!(err.contains("UnknownIssuer"), "{err}");
        handshake(
            der,
            key,
            client_config(pem.as_bytes()).unwrap(),
            "localhost",
        )
        .await
        .expect("listed verbatim: trusted");
    }

    #[tokio::test]
    async fn a_certificate_neither_listed_nor_chained_is_refused() {
        let (_, der, key) = cert(&["127.0.0.1"], true, None);
        let (other, _, _) = cert(&["127.0.0.1"], true, None);
        let err = handshake(
            der,
            key,
            client_config(other.as_bytes()).unwrap(),
            "127.0.0.1",
        )
        .await
        .unwrap_err();
        assert!(err.contains("invalid peer certificate"), "{err}");
    }
}
