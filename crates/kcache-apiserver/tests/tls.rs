//! HTTPS: a server started with `https(true)` serves TLS with a certificate of its own
//! generated CA (valid for 127.0.0.1 and localhost), requires the generated admin token, and
//! writes both into its kubeconfig.

use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kcache_apiserver::{ApiServer, RunningServer};
use tokio::net::TcpStream;

async fn https_get(
    s: &RunningServer,
    server_name: &str,
    path: &str,
    token: Option<&str>,
) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut roots = rustls::RootCertStore::empty();
    let ca = s.ca_pem().expect("an HTTPS server has a CA");
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(s.addr()).await?;
    let name = rustls::pki_types::ServerName::try_from(server_name.to_owned())?;
    let tls = connector.connect(name, tcp).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::get(path).header("host", "localhost");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::new()))?)
        .await?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await?.to_bytes().to_vec();
    Ok((status, body))
}

#[tokio::test]
async fn https_serves_with_a_generated_ca_and_an_admin_token() {
    let s = ApiServer::builder()
        .https(true)
        .build()
        .start()
        .await
        .expect("server starts");
    assert!(s.url().starts_with("https://127.0.0.1:"), "{}", s.url());
    let token = s
        .admin_token()
        .expect("HTTPS without a token gets one")
        .to_owned();
    assert!(token.len() >= 32);
    for name in ["127.0.0.1", "localhost"] {
        let (status, body) = https_get(&s, name, "/api/v1/namespaces", Some(&token))
            .await
            .unwrap_or_else(|e| panic!("TLS to {name}: {e:#}"));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }
    // Without a token: anonymous, as kube-apiserver's default, which RBAC refuses.
    let (status, body) = https_get(&s, "localhost", "/api/v1/namespaces", None)
        .await
        .unwrap();
    assert_eq!(status, 403, "the admin token is required");
    let status_body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        status_body["message"],
        "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    let (status, _) = https_get(&s, "localhost", "/api/v1/namespaces", Some("wrong"))
        .await
        .unwrap();
    assert_eq!(status, 401);
    let kubeconfig = s.kubeconfig();
    assert!(
        kubeconfig.contains(&format!("server: {}", s.url())),
        "{kubeconfig}"
    );
    assert!(
        kubeconfig.contains("certificate-authority-data: "),
        "{kubeconfig}"
    );
    assert!(kubeconfig.contains(&format!("token: {token}")));
    // Plain HTTP to the TLS port is not served.
    let plain = common_plain_get(&s).await;
    assert!(
        plain.is_err() || plain.is_ok_and(|code| code == 400),
        "no plain HTTP answer"
    );
}

/// A plain-HTTP request to the server's port: an error (or a 400), never an answer.
async fn common_plain_get(s: &RunningServer) -> anyhow::Result<u16> {
    let tcp = TcpStream::connect(s.addr()).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = Request::get("/api/v1/namespaces")
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))?;
    let resp =
        tokio::time::timeout(std::time::Duration::from_secs(5), sender.send_request(req)).await??;
    Ok(resp.status().as_u16())
}

#[tokio::test]
async fn the_builder_serves_plain_http_unless_asked() {
    let s = ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts");
    assert!(s.url().starts_with("http://"));
    assert!(s.ca_pem().is_none());
    assert!(s.admin_token().is_none());
}
