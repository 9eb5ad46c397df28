//! [`WebhookServer`]: an admission webhook served from a Rust function over HTTPS, with a
//! certificate generated for it, for tests of mutating and validating webhooks (envtest's
//! `WebhookInstallOptions`).

use std::sync::Arc;

use base64::Engine;
use http_body_util::{BodyExt, Full};
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::{Value, json};

use crate::Error;

/// What a webhook does with one request: its answer, made with
/// [`AdmissionResponse::from`] the request and `deny`, `with_patch` or `with_warning`.
pub type Handler =
    Arc<dyn Fn(&AdmissionRequest<DynamicObject>) -> AdmissionResponse + Send + Sync + 'static>;

/// An HTTPS admission webhook on a free loopback port, answering every path with its
/// handler. Stopped when dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), kcache_testenv::Error> {
/// use kcache_testenv::{TestEnv, Webhook, WebhookServer};
/// use kube_core::admission::AdmissionResponse;
///
/// let env = TestEnv::start(kcache_testenv::Config::default()).await?;
/// let hook = WebhookServer::start(|req| {
///     let name = req.name.clone();
///     let res = AdmissionResponse::from(req);
///     if name == "forbidden" { res.deny("not this one") } else { res }
/// })
/// .await?;
/// let deny = Webhook::validating("deny.example.com")
///     .operations(["CREATE"])
///     .resources(["configmaps"]);
/// env.install_webhook(&hook, &deny)?;
/// env.stop().await;
/// # Ok(())
/// # }
/// ```
pub struct WebhookServer {
    port: u16,
    ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn tls_error(e: impl std::fmt::Display) -> Error {
    Error::Webhook(e.to_string())
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    handler: Handler,
) -> Result<hyper::Response<Full<bytes::Bytes>>, hyper::Error> {
    let body = req.into_body().collect().await?.to_bytes();
    let out = match serde_json::from_slice::<AdmissionReview<DynamicObject>>(&body)
        .ok()
        .and_then(|r| TryInto::<AdmissionRequest<DynamicObject>>::try_into(r).ok())
    {
        Some(request) => {
            let review = handler(&request).into_review();
            serde_json::to_vec(&review).unwrap_or_default()
        }
        None => b"not an AdmissionReview".to_vec(),
    };
    let mut resp = hyper::Response::new(Full::new(bytes::Bytes::from(out)));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

impl WebhookServer {
    /// Serves `handler` on `127.0.0.1`, with a certificate for `127.0.0.1` and `localhost`.
    ///
    /// # Errors
    /// [`Error::Webhook`] when no certificate can be made, [`Error::Io`] when no port can be
    /// bound.
    pub async fn start<F>(handler: F) -> Result<Self, Error>
    where
        F: Fn(&AdmissionRequest<DynamicObject>) -> AdmissionResponse + Send + Sync + 'static,
    {
        Self::start_with_names(&[], handler).await
    }

    /// As [`start`](Self::start), the certificate also valid for `names` (a Service's
    /// `name.namespace.svc`, for a `clientConfig.service` reference).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_with_names<F>(names: &[&str], handler: F) -> Result<Self, Error>
    where
        F: Fn(&AdmissionRequest<DynamicObject>) -> AdmissionResponse + Send + Sync + 'static,
    {
        let mut sans = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        sans.extend(names.iter().map(|n| (*n).to_owned()));
        let (ca_pem, config) = kcache_apiserver::tls::self_signed("kcache-testenv-webhook", &sans)
            .map_err(tls_error)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let handler: Handler = Arc::new(handler);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, handler) = (acceptor.clone(), handler.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |r| answer(r, handler.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        Ok(Self { port, ca_pem, task })
    }

    /// The loopback port it listens on.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `https://127.0.0.1:<port><path>`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The PEM of the CA that signed its certificate.
    #[must_use]
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A webhook `clientConfig` calling `path`: the URL and the `caBundle`.
    #[must_use]
    pub fn client_config(&self, path: &str) -> Value {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        json!({"url": self.url(path), "caBundle": ca})
    }
}
