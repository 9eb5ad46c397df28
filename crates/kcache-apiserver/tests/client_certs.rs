//! Client-certificate authentication (kube-apiserver's `--client-ca-file`) and serving given
//! certificates (`--tls-cert-file` / `--tls-private-key-file`), as envtest uses them: its
//! users authenticate with certificates its CA signed, and the server serves the certificate
//! envtest generated.

use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kcache_apiserver::tls::ServingCertificate;
use kcache_apiserver::{ApiServer, RunningServer};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;

/// A CA: its PEM and its issuer.
fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

/// A certificate `issuer` signs: (certificate PEM, key PEM).
fn issue(
    issuer: &Issuer<'_, KeyPair>,
    cn: &str,
    org: Option<&str>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    if let Some(o) = org {
        params.distinguished_name.push(DnType::OrganizationName, o);
    }
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// GET `path` over TLS trusting `roots`, with an optional client certificate and token.
async fn get(
    s: &RunningServer,
    roots: &str,
    path: &str,
    client: Option<&(String, String)>,
    token: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    send(s, roots, "GET", path, None, client, token).await
}

/// A request over TLS trusting `roots`, with an optional JSON body, client certificate and
/// token.
async fn send(
    s: &RunningServer,
    roots: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    client: Option<&(String, String)>,
    token: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(roots.as_bytes()) {
        store.add(cert?)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(store);
    let config = match client {
        Some((cert, key)) => builder.with_client_auth_cert(
            CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<_, _>>()?,
            PrivateKeyDer::from_pem_slice(key.as_bytes())?,
        )?,
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(s.addr()).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect("localhost".try_into()?, tcp)
        .await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let body = Bytes::from(body.unwrap_or("").to_owned());
    let resp = sender.send_request(req.body(Full::new(body))?).await?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test]
async fn a_certificate_the_client_ca_signed_authenticates_and_tokens_still_work() {
    let (client_ca_pem, client_ca) = ca("client-ca");
    let s = ApiServer::builder()
        .client_ca_pem(client_ca_pem)
        .build()
        .start()
        .await
        .expect("server starts");
    assert!(s.url().starts_with("https://"), "a client CA implies HTTPS");
    let roots = s.ca_pem().expect("a generated serving CA").to_owned();
    let admin = issue(
        &client_ca,
        "admin",
        Some("system:masters"),
        &[],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let (status, body) = get(&s, &roots, "/api/v1/namespaces", Some(&admin), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"kube-system\""), "{body}");

    // Who the certificate is, as kube-apiserver says: its credential id is the SHA-256 of the
    // certificate (`kubectl auth whoami` prints it).
    let review = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let (status, body) = send(
        &s,
        &roots,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(review),
        Some(&admin),
        None,
    )
    .await
    .unwrap();
    assert_eq!(status, 201, "{body}");
    let der = CertificateDer::from_pem_slice(admin.0.as_bytes()).unwrap();
    let sha = ring::digest::digest(&ring::digest::SHA256, &der);
    let hex: String = sha.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        info["status"]["userInfo"]["extra"]["authentication.kubernetes.io/credential-id"],
        serde_json::json!([format!("X509SHA256={hex}")]),
        "{body}"
    );

    // No certificate: the connection stands, the token decides; without one the request is
    // the anonymous user's, whom RBAC refuses (kube-apiserver's default `--anonymous-auth`).
    let (status, body) = get(&s, &roots, "/api/v1/namespaces", None, None)
        .await
        .unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("system:anonymous") && body.contains("cannot list resource"),
        "{body}"
    );
    let token = s.admin_token().unwrap().to_owned();
    let (status, _) = get(&s, &roots, "/api/v1/namespaces", None, Some(&token))
        .await
        .unwrap();
    assert_eq!(status, 200);

    // A certificate another CA signed: refused (in the handshake; kube-apiserver answers 401).
    let (_, stranger_ca) = ca("stranger");
    let stranger = issue(
        &stranger_ca,
        "mallory",
        Some("system:masters"),
        &[],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let refused = get(&s, &roots, "/api/v1/namespaces", Some(&stranger), None).await;
    assert!(
        !matches!(refused, Ok((200, _))),
        "a foreign certificate must not authenticate: {refused:?}"
    );
}

#[tokio::test]
async fn health_and_version_answer_without_credentials() {
    // envtest polls /healthz over HTTPS without credentials until it answers 200.
    let (client_ca_pem, _) = ca("client-ca");
    let s = ApiServer::builder()
        .client_ca_pem(client_ca_pem)
        .build()
        .start()
        .await
        .expect("server starts");
    let roots = s.ca_pem().unwrap().to_owned();
    for path in ["/healthz", "/readyz", "/livez", "/version"] {
        let (status, body) = get(&s, &roots, path, None, None).await.unwrap();
        assert_eq!(status, 200, "{path}: {body}");
    }
    // Discovery is for authenticated users (system:discovery binds system:authenticated).
    let (status, body) = get(&s, &roots, "/api", None, None).await.unwrap();
    assert_eq!(status, 403, "discovery still needs credentials: {body}");
    assert!(
        body.contains("system:anonymous") && body.contains("cannot get path"),
        "{body}"
    );
}

#[tokio::test]
async fn a_given_serving_certificate_is_served() {
    let (serving_ca_pem, serving_ca) = ca("envtest-environment");
    let (cert_pem, key_pem) = issue(
        &serving_ca,
        "localhost",
        None,
        &["localhost", "127.0.0.1"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let s = ApiServer::builder()
        .serving_certificate(ServingCertificate { cert_pem, key_pem })
        .build()
        .start()
        .await
        .expect("server starts");
    assert!(s.url().starts_with("https://"));
    assert!(s.ca_pem().is_none(), "no generated CA");
    let token = s.admin_token().unwrap().to_owned();
    let (status, body) = get(
        &s,
        &serving_ca_pem,
        "/api/v1/namespaces",
        None,
        Some(&token),
    )
    .await
    .expect("the client trusting the given CA connects");
    assert_eq!(status, 200, "{body}");

    let bad = ApiServer::builder()
        .serving_certificate(ServingCertificate {
            cert_pem: "not a certificate".to_owned(),
            key_pem: String::new(),
        })
        .build()
        .start()
        .await;
    let err = bad.expect_err("unusable PEM is refused");
    assert!(format!("{err}").contains("serving certificate"), "{err}");
}
