//! The transport: kube-client's [`Client`](kube_client::Client) (kubeconfig and in-cluster
//! inference, auth plugins and token refresh, TLS with verification on), with responses read as
//! raw bodies so that decoding is ours.

use std::{path::Path, sync::Arc, time::Duration};

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::BodyExt;
use kcache::lister_watcher::Error as LwError;
use kube_client::{
    Config,
    client::Body,
    config::{KubeConfigOptions, Kubeconfig, KubeconfigError},
};
use kube_core::{Status, response::StatusSummary};

use crate::error::{Error, Result, redact_quoted};

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
    pub fn from_config(mut config: Config) -> Result<Self> {
        let server: Arc<str> = config.cluster_url.to_string().trim_end_matches('/').into();
        let build = |config: Config| {
            kube_client::Client::try_from(config)
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
struct BodyError(String);

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

/// A transport failure, worded for the user.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct TransportError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// Turns a kube-client error into a one-sentence transport error. Auth errors lose their source
/// chain: credential plugins' output may carry tokens.
pub(crate) fn transport_error(e: kube_client::Error, server: &str) -> LwError {
    use kube_client::Error as K;
    let (message, source): (String, Option<Box<dyn std::error::Error + Send + Sync>>) = match e {
        K::Auth(auth) => (
            format!(
                "cannot obtain credentials for {server}: {}; check the user entry of the \
                 current kubeconfig context",
                redact_quoted(&auth.to_string())
            ),
            None,
        ),
        K::Api(status) => {
            let mut status = *status;
            sanitize_status(&mut status);
            return LwError::api(status, None);
        }
        // The server answered, but not with what was asked (garbage, an HTML page): not a
        // connection problem.
        K::SerdeError(e) => {
            return LwError::decode(DecodeError(format!(
                "the API server at {server} answered with a body that is not the expected \
                 JSON: {}",
                display_safe(&e.to_string(), MAX_DECODE_MESSAGE)
            )));
        }
        other => {
            let chain = error_chain(&other);
            let lower = chain.to_ascii_lowercase();
            let message = if lower.contains("connection refused") {
                format!(
                    "cannot connect to the API server at {server}: connection refused; is it \
                     running, and is the server address in the kubeconfig right?"
                )
            } else if lower.contains("certificate")
                || lower.contains("tls")
                || lower.contains("handshake")
            {
                format!(
                    "TLS handshake with {server} failed ({}); check the cluster's \
                     certificate-authority in the kubeconfig",
                    redact_quoted(&chain)
                )
            } else if lower.contains("dns") || lower.contains("lookup") {
                format!("cannot resolve the API server's host name in {server}: {chain}")
            } else if lower.contains("timed out") || lower.contains("timeout") {
                format!("the API server at {server} did not answer in time: {chain}")
            } else {
                format!("cannot reach the API server at {server}: {chain}")
            };
            (message, Some(Box::new(other)))
        }
    };
    LwError::transport(TransportError { message, source })
}

/// `a: b: c` for an error and its sources, without repeating a message its source repeats.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let msg = err.to_string();
        if !parts.iter().any(|p| p.contains(&msg)) {
            parts.push(msg);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// Builds the API error for a non-2xx response: the body's `Status` when it is one, else a
/// `Status` made from the status line and the body text. 401/403/404 get a message that says
/// what to do when the server's own is terse.
pub(crate) fn api_error(
    code: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    verb: &str,
    path: &str,
) -> LwError {
    // A server asked for protobuf answers errors with a protobuf Status.
    #[cfg(feature = "protobuf")]
    let converted = crate::protobuf::status_as_json(body);
    #[cfg(feature = "protobuf")]
    let body = converted.as_deref().unwrap_or(body);
    let mut status = serde_json::from_slice::<Status>(body)
        .ok()
        .filter(|s| s.code != 0 || !s.reason.is_empty() || !s.message.is_empty())
        .unwrap_or_else(|| Status {
            status: Some(StatusSummary::Failure),
            code: code.as_u16(),
            message: body_excerpt(body),
            metadata: None,
            reason: default_reason(code).to_owned(),
            details: None,
        });
    // A Status is the server's own words, but a proxy may fake one (or echo the request's
    // credentials): keep it printable, short and credential-free.
    sanitize_status(&mut status);
    if status.code == 0 {
        status.code = code.as_u16();
    }
    let terse = status.message.is_empty()
        || status.message == status.reason
        || status
            .message
            .eq_ignore_ascii_case(&format!("{} page not found", code.as_u16()));
    if terse {
        let resource = describe_path(path);
        let message = match code.as_u16() {
            401 => Some(
                "Unauthorized: the API server rejected the credentials of the current \
                 kubeconfig context; check its token or client certificate"
                    .to_owned(),
            ),
            403 => Some(format!(
                "Forbidden: the current user may not {verb} {resource}; ask for RBAC permission"
            )),
            404 => Some(format!(
                "NotFound: the API server does not serve {resource}; check the group, version \
                 and resource name (is the CRD installed?)"
            )),
            _ if status.message.is_empty() => Some(format!(
                "the API server answered {code} to {verb} {resource}"
            )),
            _ => None,
        };
        if let Some(message) = message {
            status.message = message;
        }
    }
    LwError::api(status, retry_after(headers))
}

/// At most this many bytes of a non-`Status` error body reach an error message.
const MAX_BODY_EXCERPT: usize = 512;
/// At most this many bytes of a `Status` message reach an error message.
const MAX_STATUS_MESSAGE: usize = 768;
/// At most this many bytes of a decoder's message (which may quote the body) reach an error.
const MAX_DECODE_MESSAGE: usize = 512;

/// The words after which the rest of a server-provided text is withheld.
const CREDENTIAL_WORDS: [&str; 4] = ["authorization", "bearer", "cookie", "x-api-key"];

/// Words that name a credential only when a value follows them (`token=…`, `"password":`):
/// kube-apiserver's own messages speak of "the continue token".
const CREDENTIAL_KEYS: [&str; 4] = ["token", "password", "secret", "access_token"];

/// "continue token": kube-apiserver's pagination cursor, not a credential.
fn is_continue_token(previous: &str, word: &str) -> bool {
    previous.eq_ignore_ascii_case("continue") && word.to_ascii_lowercase().starts_with("token")
}

fn is_credential_word(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    let bare = lower.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_');
    CREDENTIAL_WORDS.iter().any(|w| bare.starts_with(w))
        || CREDENTIAL_KEYS.iter().any(|k| {
            lower
                .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
                .strip_prefix(k)
                .is_some_and(|rest| rest.starts_with(['=', ':']) || rest.starts_with("\":"))
        })
}

/// `text` from the server (a `Status` message, a decoder's message quoting the body), made
/// safe to show: anything after an `Authorization`, `Cookie`, `Bearer`… word withheld, control
/// characters escaped, at most `max` bytes.
pub(crate) fn display_safe(text: &str, max: usize) -> String {
    withhold_credentials(text, max, kcache::lister_watcher::trim_for_display)
}

/// [`display_safe`], keeping newlines and tabs (a server's multi-line message, as
/// kube-apiserver's 406 answer).
pub(crate) fn display_safe_lines(text: &str, max: usize) -> String {
    withhold_credentials(
        text,
        max,
        kcache::lister_watcher::trim_for_display_keeping_lines,
    )
}

fn withhold_credentials(text: &str, max: usize, trim: fn(&str, usize) -> String) -> String {
    // A word past the cut cannot reach the message: look no further than needed.
    let scan = &text[..floor_char_boundary(text, max.saturating_mul(2))];
    let mut previous = "";
    let kept = scan
        .split_whitespace()
        .find(|w| {
            let found = is_credential_word(w) && !is_continue_token(previous, w);
            previous = w;
            found
        })
        .map(|w| {
            // `token=value` in one word: keep up to the separator only.
            let keep = w.find(['=', ':']).map_or(w.len(), |i| i + 1);
            let end = w.as_ptr() as usize - text.as_ptr() as usize + keep;
            format!("{} [rest withheld: it may hold credentials]", &text[..end])
        });
    trim(kept.as_deref().unwrap_or(text), max)
}

fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut i = at.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Makes a `Status` from the server (an error response or a watch `ERROR` event) safe to show
/// (see [`display_safe`]).
pub(crate) fn sanitize_status(status: &mut Status) {
    status.message = display_safe_lines(&status.message, MAX_STATUS_MESSAGE);
    status.reason = display_safe(&status.reason, 64);
}

/// A decoding failure whose message may quote the body (serde quotes unexpected strings):
/// made safe to show, and without the original error, which keeps the quote.
pub(crate) fn decode_error(e: impl std::fmt::Display) -> LwError {
    LwError::decode(DecodeError(display_safe(
        &e.to_string(),
        MAX_DECODE_MESSAGE,
    )))
}

/// A response body could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct DecodeError(String);

/// A short, printable excerpt of an error body that is not a `Status` (an HTML page from a
/// proxy, garbage): HTML tags dropped, whitespace folded, anything after an `Authorization`,
/// `Cookie` or `Bearer` word withheld, control characters escaped, at most 512 bytes.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(16 * 1024)]);
    let mut plain = String::with_capacity(text.len().min(2048));
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                plain.push(' ');
            }
            _ if in_tag => {}
            _ => plain.push(c),
        }
    }
    let mut words: Vec<&str> = Vec::new();
    for word in plain.split_whitespace() {
        let secret = is_credential_word(word)
            && !words
                .last()
                .is_some_and(|previous| is_continue_token(previous, word));
        words.push(if secret {
            &word[..word.find(['=', ':']).map_or(word.len(), |i| i + 1)]
        } else {
            word
        });
        if secret {
            words.push("[rest withheld: it may hold credentials]");
            break;
        }
    }
    let folded = words.join(" ");
    if folded.is_empty() {
        return String::new();
    }
    kcache::lister_watcher::trim_for_display(&folded, MAX_BODY_EXCERPT)
}

/// `Retry-After` in seconds (the API server never sends the HTTP-date form).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

fn default_reason(code: StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// `pods in namespace default` / `nodes` / `leases.coordination.k8s.io "x" in namespace y`
/// from an API path.
fn describe_path(path: &str) -> String {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _v, rest @ ..] => ("", rest),
        ["apis", g, _v, rest @ ..] => (*g, rest),
        _ => return path.to_owned(),
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(*ns), rest),
        _ => (None, rest),
    };
    let (resource, name) = match rest {
        [r] => (*r, None),
        [r, n, ..] => (*r, Some(*n)),
        [] => return path.to_owned(),
    };
    let mut s = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    if let Some(n) = name {
        s.push_str(&format!(" {n:?}"));
    }
    if let Some(ns) = ns {
        s.push_str(&format!(" in namespace {ns}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_path_names_resource_group_and_namespace() {
        assert_eq!(
            describe_path("/api/v1/namespaces/default/pods"),
            "pods in namespace default"
        );
        assert_eq!(describe_path("/api/v1/nodes"), "nodes");
        assert_eq!(
            describe_path("/apis/coordination.k8s.io/v1/namespaces/x/leases/l"),
            "leases.coordination.k8s.io \"l\" in namespace x"
        );
        assert_eq!(describe_path("/apis/foo.io/v1/bars"), "bars.foo.io");
    }

    #[test]
    fn kube_apiservers_own_words_about_tokens_are_kept_whole() {
        let msg = "The provided continue parameter is too old to display a consistent list \
                   result. You can start a new list without the continue parameter, or use the \
                   continue token in this response to retrieve the remainder of the results. \
                   Continuing with the provided token results in an inconsistent list - objects \
                   that were created, modified, or deleted between the time the first chunk was \
                   returned and now may show up in the list.";
        assert_eq!(display_safe_lines(msg, MAX_STATUS_MESSAGE), msg);
        let garbage = "invalid continue token: not-base64";
        assert_eq!(display_safe_lines(garbage, MAX_STATUS_MESSAGE), garbage);
        assert!(!display_safe("token=s3cr3t", 64).contains("s3cr3t"));
        assert!(!display_safe(r#"{"token":"s3cr3t"}"#, 64).contains("s3cr3t"));
        assert!(!display_safe("password: s3cr3t", 64).contains("s3cr3t"));
        assert!(!display_safe("Authorization: Bearer s3cr3t", 64).contains("s3cr3t"));
    }

    #[test]
    fn a_non_status_error_body_is_trimmed_escaped_and_withholds_credentials() {
        let mut page = String::from("<html><body><h1>502 Bad Gateway</h1>\u{1b}[31m\0");
        page.push_str("<pre>GET /api/v1/pods\nAuthorization: Bearer s3cr3t-t0ken\n</pre>");
        page.push_str(&"x".repeat(100_000));
        let e = api_error(
            StatusCode::BAD_GATEWAY,
            &HeaderMap::new(),
            page.as_bytes(),
            "list",
            "/api/v1/pods",
        );
        let text = e.to_string();
        assert!(text.contains("502 Bad Gateway"), "{text}");
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\0'), "{text:?}");
        assert!(!text.contains("<h1>"), "{text}");
        assert!(text.len() < 700, "{} bytes: {text}", text.len());
    }

    #[test]
    fn a_status_message_is_trimmed_escaped_and_withholds_credentials() {
        let message = format!(
            "denied \u{1b}[31m\0 request with Authorization: Bearer s3cr3t {}",
            "x".repeat(10_000)
        );
        let body = serde_json::to_vec(&serde_json::json!({"kind": "Status", "apiVersion": "v1",
            "metadata": {}, "status": "Failure", "message": message, "reason": "InternalError",
            "code": 500}))
        .unwrap();
        let e = api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &HeaderMap::new(),
            &body,
            "list",
            "/api/v1/pods",
        );
        let text = e.to_string();
        assert!(
            text.contains("denied") && text.contains("withheld"),
            "{text}"
        );
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(text.len() < 1024, "{} bytes", text.len());
    }

    #[test]
    fn a_decode_error_quoting_the_body_is_trimmed_and_withholds_credentials() {
        let body = format!(
            r#"{{"kind":"List","items":"Bearer s3cr3t \u001b {}"}}"#,
            "y".repeat(1 << 20)
        );
        let err =
            serde_json::from_str::<std::collections::BTreeMap<String, u32>>(&body).unwrap_err();
        let e = decode_error(err);
        let text = e.to_string();
        assert!(!text.contains("s3cr3t"), "{}", &text[..200.min(text.len())]);
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(text.len() < 700, "{} bytes", text.len());
        assert!(std::error::Error::source(&e).is_none_or(|s| !s.to_string().contains("s3cr3t")));
    }

    #[test]
    fn status_body_is_kept_and_retry_after_header_is_read() {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, "3".parse().unwrap());
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"slow down","reason":"TooManyRequests","code":429}"#;
        let e = api_error(
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            body,
            "list",
            "/api/v1/pods",
        );
        assert!(e.is_too_many_requests());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(e.status().unwrap().message, "slow down");
    }

    #[test]
    fn plain_text_404_becomes_a_not_found_status_naming_the_resource() {
        let e = api_error(
            StatusCode::NOT_FOUND,
            &HeaderMap::new(),
            b"404 page not found\n",
            "list",
            "/apis/nope.example.com/v1/widgets",
        );
        let status = e.status().unwrap();
        assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
        assert!(
            status.message.contains("widgets.nope.example.com"),
            "{}",
            status.message
        );
    }

    #[test]
    fn terse_401_and_403_get_actionable_messages() {
        let body401 = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
        let e = api_error(
            StatusCode::UNAUTHORIZED,
            &HeaderMap::new(),
            body401,
            "list",
            "/api/v1/pods",
        );
        assert!(e.to_string().contains("credentials"), "{e}");
        let e = api_error(
            StatusCode::FORBIDDEN,
            &HeaderMap::new(),
            b"",
            "watch",
            "/api/v1/namespaces/a/secrets",
        );
        let msg = e.to_string();
        assert!(msg.contains("watch secrets in namespace a"), "{msg}");
    }
}
