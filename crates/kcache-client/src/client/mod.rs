//! The transport: kube-client's [`Client`](kube_client::Client) (kubeconfig and in-cluster
//! inference, auth plugins and token refresh, TLS with verification on) on our own hyper stack
//! (HTTP/2 with client-go's connection health pings where the server offers it, see
//! `transport`), with responses read as raw bodies so that decoding is ours.
//!
//! Failed requests become errors in `errors`; server-provided text in them is made safe to
//! show in `redact`.

mod errors;
mod list;
pub(crate) use list::ItemSink;
mod read_buffer;
#[cfg(test)]
mod tests;
mod transport;

use std::{path::Path, sync::Arc};

use bytes::Bytes;
use http::{HeaderMap, Response};
use http_body_util::BodyExt;
use kcache::lister_watcher::{Error as LwError, ServerVersion};
use kube_client::{
    Config,
    client::Body,
    config::{KubeConfigOptions, Kubeconfig, KubeconfigError},
};

pub(crate) use crate::error::body::decode_error;
pub(crate) use crate::error::transport::transport_error;
use crate::error::{Error, Result, redact_quoted};
use errors::{api_error, not_the_expected_json};

/// Sees the status and headers of every response a [`Client`] receives (see
/// [`Client::from_config_observed`]).
pub type ResponseObserver = Arc<dyn Fn(http::StatusCode, &HeaderMap) + Send + Sync>;

/// The most we read of an error response body: Status objects are small, and a proxy's HTML
/// error page is not worth more.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A connection to one API server: kube-client's transport plus the server address for error
/// messages. Cheap to clone (clones share the connection pool).
#[derive(Clone)]
pub struct Client {
    inner: kube_client::Client,
    /// The same server with kube-client's default retries, for writes ([`Client::kube_for_writes`]).
    writer: kube_client::Client,
    server: Arc<str>,
    /// `/version`'s answer, read once (clones share it).
    version: Arc<tokio::sync::OnceCell<ServerVersion>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Infers the configuration like kubectl: `$KUBECONFIG` or `~/.kube/config`, else the
    /// in-cluster service account.
    ///
    /// # Errors
    /// [`Error::NoConfig`] when neither exists, [`Error::InvalidKubeconfig`] /
    /// [`Error::UnreadableKubeconfig`] when the kubeconfig is broken, [`Error::Client`] when
    /// its TLS settings cannot be used.
    pub async fn infer() -> Result<Self> {
        match Config::infer().await {
            Ok(config) => Self::from_config(config),
            Err(e) => {
                let kubeconfig =
                    std::error::Error::source(&e).and_then(|s| s.downcast_ref::<KubeconfigError>());
                Err(match kubeconfig {
                    Some(KubeconfigError::FindPath) | None => Error::NoConfig,
                    Some(KubeconfigError::ReadConfig(io, _))
                        if io.kind() == std::io::ErrorKind::NotFound
                            && std::env::var_os("KUBECONFIG").is_none() =>
                    {
                        Error::NoConfig
                    }
                    Some(k) => Error::from_kubeconfig(k),
                })
            }
        }
    }

    /// Loads the current context of the kubeconfig file at `path`.
    ///
    /// # Errors
    /// As [`Client::infer`], for that file.
    pub async fn from_kubeconfig(path: impl AsRef<Path>) -> Result<Self> {
        let kubeconfig =
            Kubeconfig::read_from(path.as_ref()).map_err(|e| Error::from_kubeconfig(&e))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::from_kubeconfig(&e))?;
        Self::from_config(config)
    }

    /// Builds the transport from a kube-client [`Config`].
    ///
    /// kube-client's own retry layer (up to 15 retries of 429/503/504, honouring
    /// `Retry-After`) is switched off: the reflector owns retries and backoff (client-go's
    /// semantics: a 504 "too large resource version" relists at once at `resourceVersion=""`,
    /// a 429 backs off and re-watches), and it must see those responses to apply them.
    ///
    /// # Errors
    /// [`Error::Client`] when the TLS or proxy settings cannot be used.
    pub fn from_config(config: Config) -> Result<Self> {
        Self::build(config, None)
    }

    /// As [`Client::from_config`], and `observer` is shown the status and headers of every
    /// response the client receives (reads and writes, before the body is read) — e.g. to
    /// count the wire formats a server answers in, as `kcache bench`'s peer does. The
    /// observer runs on the connection's task: keep it short and never block in it.
    ///
    /// # Errors
    /// As [`Client::from_config`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let protobuf = Arc::new(AtomicU64::new(0));
    /// let seen = protobuf.clone();
    /// let config = kube_client::Config::new("https://127.0.0.1:6443".parse()?);
    /// let client = kcache_client::Client::from_config_observed(
    ///     config,
    ///     Arc::new(move |_status, headers| {
    ///         let ct = headers.get(http::header::CONTENT_TYPE);
    ///         if ct.is_some_and(|v| v.as_bytes().starts_with(b"application/vnd.kubernetes.protobuf")) {
    ///             seen.fetch_add(1, Ordering::Relaxed);
    ///         }
    ///     }),
    /// )?;
    /// # let _ = client;
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_config_observed(config: Config, observer: ResponseObserver) -> Result<Self> {
        Self::build(config, Some(observer))
    }

    fn build(mut config: Config, observer: Option<ResponseObserver>) -> Result<Self> {
        let server: Arc<str> = config.cluster_url.to_string().trim_end_matches('/').into();
        let keepalive = transport::Keepalive::from_env();
        let build = |config: Config| {
            transport::build(&config, keepalive, observer.clone())
                .map_err(|e| Error::Client(redact_quoted(&e.to_string())))
        };
        config.default_retry = true;
        let writer = build(config.clone())?;
        config.default_retry = false;
        let inner = build(config)?;
        Ok(Self {
            inner,
            writer,
            server,
            version: Arc::default(),
        })
    }

    /// A client for `url` with no credentials (for an embedded or a local test server).
    ///
    /// # Errors
    /// [`Error::Client`] when `url` is not a valid URL.
    pub fn from_url(url: &str) -> Result<Self> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| Error::Client(format!("invalid server URL {url:?}: {e}")))?;
        Self::from_config(Config::new(uri))
    }

    /// Wraps an existing kube-client client. `server` is only used in error messages.
    ///
    /// Build it with `Config::default_retry = false` (as [`Client::from_config`] does), or its
    /// retry layer will hide 429/503/504 responses from the reflector. The same client then
    /// also serves [`Client::kube_for_writes`].
    pub fn from_kube(inner: kube_client::Client, server: &str) -> Self {
        Self {
            writer: inner.clone(),
            inner,
            server: server.into(),
            version: Arc::default(),
        }
    }

    /// The underlying kube-client client, with kube-client's retries switched off (what the
    /// reflector needs, see [`Client::from_config`]). For a controller's writes use
    /// [`Client::kube_for_writes`].
    pub fn kube(&self) -> &kube_client::Client {
        &self.inner
    }

    /// A kube-client client for the same server with kube-client's default retries (429, 503
    /// and 504 retried with backoff, honouring `Retry-After`): what reconcile writes (and the
    /// [`events::Recorder`](crate::events::Recorder)) want. Built next to [`Client::kube`] by
    /// [`Client::from_config`] and the constructors that use it; a client made with
    /// [`Client::from_kube`] returns the client it was given.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let client = kcache_client::Client::from_url("http://127.0.0.1:1").unwrap();
    /// let _writes: &kube_client::Client = client.kube_for_writes();
    /// # }
    /// ```
    pub fn kube_for_writes(&self) -> &kube_client::Client {
        &self.writer
    }

    /// The API server's URL.
    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// The server's version, from `/version`: asked once per client (its clones share the
    /// answer; callers that ask at the same time share one request). A failure is not kept:
    /// the next call asks again.
    ///
    /// # Errors
    /// As [`Client::get_json`]; [`Error::Client`] when the answer names no version.
    pub async fn server_version(&self) -> Result<ServerVersion> {
        self.version
            .get_or_try_init(|| async {
                let body: serde_json::Value = self.get_json("/version").await?;
                ServerVersion::from_version_json(&body).ok_or_else(|| {
                    Error::Client(format!(
                        "{}/version names no version (no major/minor or gitVersion)",
                        self.server
                    ))
                })
            })
            .await
            .copied()
    }

    /// GETs the JSON document at `path` (a discovery document: `/api`, `/api/v1`, `/apis`,
    /// `/apis/apps/v1`) and decodes it as `T`.
    ///
    /// Unlike kube-client's discovery calls, a failure says what the server answered: a
    /// non-2xx status is an API error with the server's `Status` (or one made from the status
    /// line and a short escaped excerpt of the body, or `binary body, N bytes`); a redirect
    /// (3xx, never followed) names its `Location` without query or user info; a body that is
    /// not JSON is a decode error quoting a short escaped excerpt of it.
    /// [`Error::is_unusable_answer`] tells these answers apart from an unreachable server.
    ///
    /// # Errors
    /// [`Error::Request`] as described; [`Error::Client`] when `path` is not a valid URI path.
    pub async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T> {
        let request = http::Request::get(path)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|e| Error::Client(format!("invalid request path {path:?}: {e}")))?;
        let body = self.send_collect(request, "get").await?;
        serde_json::from_slice(&body).map_err(|e| {
            let expected = std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("document");
            Error::Request(not_the_expected_json(
                &self.server,
                &format!("GET {path}"),
                expected,
                &body,
                &e,
            ))
        })
    }

    /// Sends `request` and returns the response if its status is 2xx.
    ///
    /// # Errors
    /// [`LwError::transport`] when the server cannot be reached; [`LwError::api`] with the
    /// server's `Status` (or one made from the status line) for any other status.
    pub(crate) async fn send(
        &self,
        request: http::Request<Vec<u8>>,
        verb: &str,
    ) -> Result<Response<Body>, LwError> {
        let path = request.uri().path().to_owned();
        let request = request.map(Body::from);
        let response = self
            .inner
            .send(request)
            .await
            .map_err(|e| transport_error(e, &self.server))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let (parts, body) = response.into_parts();
        let body = read_limited(body, MAX_ERROR_BODY).await;
        Err(api_error(parts.status, &parts.headers, &body, verb, &path))
    }

    /// Sends `request` and reads the whole 2xx body.
    ///
    /// # Errors
    /// As [`Client::send`], plus [`LwError::transport`] when the body breaks off.
    pub(crate) async fn send_collect(
        &self,
        request: http::Request<Vec<u8>>,
        verb: &str,
    ) -> Result<Bytes, LwError> {
        Ok(self.send_collect_with_headers(request, verb).await?.1)
    }

    /// [`Client::send_collect`], also returning the response headers (the `Content-Type`
    /// decides between JSON and protobuf).
    pub(crate) async fn send_collect_with_headers(
        &self,
        request: http::Request<Vec<u8>>,
        verb: &str,
    ) -> Result<(HeaderMap, Bytes), LwError> {
        let (parts, body) = self.send(request, verb).await?.into_parts();
        let body = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .map_err(|e| LwError::transport(BodyError(e.to_string())))?;
        Ok((parts.headers, body))
    }
}

/// A response body broke off.
#[derive(Debug, thiserror::Error)]
#[error("the response body broke off: {0}")]
pub(crate) struct BodyError(String);

/// Reads at most `limit` bytes of a body; a broken body yields what was read.
async fn read_limited(mut body: Body, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < limit {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let take = data.len().min(limit - out.len());
                    out.extend_from_slice(&data[..take]);
                }
            }
            _ => break,
        }
    }
    out
}
