//! A test admission webhook: HTTPS on 127.0.0.1 with a certificate made for the test (rcgen),
//! answering AdmissionReviews by path — `/allow`, `/deny` (a 403 with a message),
//! `/deny-invalid` (a 422 Invalid, with a warning), `/deny-bare` (no status), `/bad-uid` (an
//! answer for another request), `/label`
//! (a JSON patch adding the label `hooked: "yes"`, with a warning), `/slow` (allows after 3 s) — and
//! recording every request it gets.

use std::sync::Arc;

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};

/// The requests a webhook server received, as (path, AdmissionReview request).
type Recorded = Arc<std::sync::Mutex<Vec<(String, Value)>>>;

/// A running webhook server; stopped when dropped.
pub(crate) struct HookServer {
    /// `https://127.0.0.1:<port>`.
    pub(crate) base: String,
    /// The CA's PEM, base64 (a `caBundle`).
    pub(crate) ca_bundle: String,
    recorded: Recorded,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HookServer {
    /// The requests received so far, taken.
    pub(crate) fn take(&self) -> Vec<(String, Value)> {
        std::mem::take(&mut *self.recorded.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A `clientConfig` calling `path` on this server.
    pub(crate) fn client_config(&self, path: &str) -> Value {
        json!({"url": format!("{}{path}", self.base), "caBundle": self.ca_bundle})
    }
}

fn answer(path: &str, req: &Value) -> Value {
    let uid = req.get("uid").cloned().unwrap_or(Value::Null);
    let mut resp = json!({"uid": uid, "allowed": true});
    match path {
        "/deny" => {
            resp["allowed"] = json!(false);
            resp["status"] = json!({"code": 403, "message": "no thanks"});
        }
        "/deny-invalid" => {
            resp["allowed"] = json!(false);
            resp["status"] = json!({"code": 422, "reason": "Invalid", "message": "bad field"});
            resp["warnings"] = json!(["denied with a warning"]);
        }
        "/deny-bare" => resp["allowed"] = json!(false),
        "/bad-uid" => resp["uid"] = json!("not-the-request-uid"),
        "/label" => {
            let has_labels = req
                .pointer("/object/metadata/labels")
                .is_some_and(Value::is_object);
            let patch = if has_labels {
                json!([{"op": "add", "path": "/metadata/labels/hooked", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"hooked": "yes"}}])
            };
            resp["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
            resp["patchType"] = json!("JSONPatch");
            resp["warnings"] = json!(["labelled by the test webhook"]);
        }
        _ => {}
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
}

async fn serve(
    req: hyper::Request<Incoming>,
    recorded: Recorded,
) -> Result<hyper::Response<Full<bytes::Bytes>>, hyper::Error> {
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await?.to_bytes();
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = review.get("request").cloned().unwrap_or(Value::Null);
    if path == "/slow" {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    }
    let out = answer(&path, &request);
    recorded
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((path, request));
    let mut resp = hyper::Response::new(Full::new(bytes::Bytes::from(out.to_string())));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// Starts a webhook server on a free loopback port.
pub(crate) async fn start() -> anyhow::Result<HookServer> {
    let names = ["127.0.0.1".to_owned(), "localhost".to_owned()];
    let (ca_pem, config) = kcache_apiserver::tls::self_signed("webhook", &names)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let recorded: Recorded = Arc::default();
    let rec = recorded.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let rec = rec.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req| serve(req, rec.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Ok(HookServer {
        base: format!("https://127.0.0.1:{port}"),
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_pem),
        recorded,
        task,
    })
}
