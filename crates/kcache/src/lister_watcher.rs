//! The source side of a reflector: list a collection, then watch it for changes.
//!
//! [`ListerWatcher`] is the only thing a reflector knows about the API server. `kcache-client`
//! implements it over HTTP; [`crate::testing::FakeSource`] implements it in memory. Requests and
//! responses reuse kube-core's types: [`ListParams`], [`WatchParams`], [`ObjectList`],
//! [`WatchEvent`] and [`Status`].

use std::{fmt, future::Future, time::Duration};

use futures::stream::BoxStream;
pub use kube_core::{
    ObjectList, Status, WatchEvent,
    params::{ListParams, VersionMatch, WatchParams},
};

/// The annotation on the bookmark that ends a streaming initial list (`sendInitialEvents=true`).
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// A stream of watch events. It ends when the server closes the watch; an `Err` item is a
/// transport or decode failure inside the stream (an `ERROR` event from the server arrives as
/// [`WatchEvent::Error`] instead).
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, Error>>;

/// Lists and watches one collection of objects of type `K`.
///
/// `list` returns one page: the caller (the reflector) drives pagination with
/// [`ListParams::limit`] and [`ListParams::continue_token`]. `watch` opens a watch from
/// `resource_version` (`""` or `"0"` for "any"), honouring [`WatchParams`] (timeout, bookmarks,
/// `sendInitialEvents`).
pub trait ListerWatcher<K: Clone>: Send + Sync + 'static {
    /// Lists one page.
    ///
    /// # Errors
    /// [`Error`]: the server's `Status` for API errors (410 Expired, 504 too large RV, …),
    /// transport and decode failures otherwise.
    fn list(
        &self,
        params: &ListParams,
    ) -> impl Future<Output = Result<ObjectList<K>, Error>> + Send;

    /// Lists one page as [`list`](Self::list) does, and sends the page's `continue` token to
    /// `next` as soon as it has been read, before the page's items are (a server sends the
    /// list's metadata first). The reflector's pager then asks for the next page while this
    /// one is still arriving and being decoded; a lister-watcher that cannot tell early drops
    /// `next` (the default), and the pager asks for the next page once this one is done.
    ///
    /// Sending a token that differs from the page's `metadata.continue` is harmless: the pager
    /// drops the request it started with it and asks again.
    ///
    /// # Errors
    /// As [`list`](Self::list).
    fn list_telling_continue(
        &self,
        params: &ListParams,
        next: tokio::sync::oneshot::Sender<String>,
    ) -> impl Future<Output = Result<ObjectList<K>, Error>> + Send {
        drop(next);
        self.list(params)
    }

    /// Lists one page as [`list_telling_continue`](Self::list_telling_continue) does (as
    /// [`list`](Self::list) when `next` is `None`), handing each item to `sink` as soon as it
    /// is decoded rather than gathering the page first. The returned list's `items`, if any,
    /// follow those handed to `sink`. The reflector's sink replaces an unchanged item by the
    /// cache's copy at once, so a relist served in one page (at a known resourceVersion)
    /// never holds a second copy of every object. The default hands nothing to `sink` and
    /// returns the whole page.
    ///
    /// If the list fails, the items already handed to `sink` are to be dropped by the caller.
    ///
    /// # Errors
    /// As [`list`](Self::list).
    fn list_each(
        &self,
        params: &ListParams,
        next: Option<tokio::sync::oneshot::Sender<String>>,
        sink: &mut (dyn FnMut(K) + Send),
    ) -> impl Future<Output = Result<ObjectList<K>, Error>> + Send {
        let _ = sink;
        async move {
            match next {
                Some(next) => self.list_telling_continue(params, next).await,
                None => self.list(params).await,
            }
        }
    }

    /// Opens a watch from `resource_version`.
    ///
    /// # Errors
    /// [`Error`] when the watch cannot be opened; errors after it is open arrive in the stream.
    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> impl Future<Output = Result<WatchStream<K>, Error>> + Send;

    /// What this lister-watcher lists, for spans, logs and errors: the resource (`pods`,
    /// `deployments.apps`), then the namespace and selectors when set. The reflector uses it
    /// unless [`crate::reflector::Config::name`] is set.
    fn describe(&self) -> String {
        "objects".to_owned()
    }

    /// The server's version (kube-apiserver's `/version`), or `None` when it is unknown: the
    /// request failed, or this lister-watcher cannot tell (the default). The reflector asks
    /// once per run when its [`InitialList`](crate::reflector::InitialList) is `Auto`, under a
    /// deadline; an implementation should cache a successful answer (kcache-client reads it
    /// once per client).
    fn server_version(&self) -> impl Future<Output = Option<ServerVersion>> + Send {
        std::future::ready(None)
    }

    /// Whether lists and watches travel in protobuf (kcache-client's wire for built-in kinds)
    /// rather than JSON; `false` (the default) when unknown. [`InitialList::Auto`](crate::reflector::InitialList::Auto)
    /// streams protobuf on servers where it lists JSON.
    fn uses_protobuf(&self) -> bool {
        false
    }
}

/// A server's version as kube-apiserver's `/version` tells it: `major` and `minor` (`"1"`,
/// `"37"`; some distributions write `"37+"`), or, failing those, `gitVersion` (`v1.37.2`).
///
/// ```
/// use kcache::lister_watcher::ServerVersion;
/// let v = ServerVersion::from_version_json(&serde_json::json!({
///     "major": "1", "minor": "37+", "gitVersion": "v1.37.2-eks-1234"
/// }));
/// assert_eq!(v, Some(ServerVersion::new(1, 37)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServerVersion {
    /// The major version (1).
    pub major: u32,
    /// The minor version (37).
    pub minor: u32,
}

impl ServerVersion {
    /// `major.minor`.
    pub fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }

    /// Reads `/version`'s answer; `None` when it names no version.
    pub fn from_version_json(body: &serde_json::Value) -> Option<Self> {
        let field = |name: &str| {
            body.get(name)
                .and_then(serde_json::Value::as_str)
                .and_then(leading_number)
        };
        if let (Some(major), Some(minor)) = (field("major"), field("minor")) {
            return Some(Self::new(major, minor));
        }
        let git = body.get("gitVersion")?.as_str()?;
        let mut parts = git.strip_prefix('v').unwrap_or(git).split('.');
        let major = leading_number(parts.next()?)?;
        let minor = leading_number(parts.next()?)?;
        Some(Self::new(major, minor))
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The digits `s` starts with (`"37+"` → 37), if any.
fn leading_number(s: &str) -> Option<u32> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// `text` made safe to print: at most `max` bytes (cut at a character boundary, with `…`
/// added), control characters (terminal escapes, NUL, newlines) escaped as `\u{..}`.
///
/// ```
/// use kcache::lister_watcher::trim_for_display;
/// assert_eq!(trim_for_display("ok\u{1b}[31m", 64), "ok\\u{1b}[31m");
/// assert_eq!(trim_for_display("abcdef", 3), "abc…");
/// ```
pub fn trim_for_display(text: &str, max: usize) -> String {
    trim_escaping(text, max, |_| true)
}

/// [`trim_for_display`], keeping newlines and tabs (for a server's multi-line message).
///
/// ```
/// use kcache::lister_watcher::trim_for_display_keeping_lines;
/// assert_eq!(trim_for_display_keeping_lines("a\nb\0", 64), "a\nb\\u{0}");
/// ```
pub fn trim_for_display_keeping_lines(text: &str, max: usize) -> String {
    trim_escaping(text, max, |c| c != '\n' && c != '\t')
}

fn trim_escaping(text: &str, max: usize, escape: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 8);
    let mut used = 0;
    for c in text.chars() {
        if used + c.len_utf8() > max {
            out.push('…');
            return out;
        }
        used += c.len_utf8();
        if c.is_control() && escape(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// A list or watch failure.
///
/// Opaque, with `is_*()` checks for the classes the reflector acts on, in the manner of
/// `hyper::Error`.
pub struct Error {
    kind: ErrorKind,
}

enum ErrorKind {
    /// The server answered with a `Status` (an HTTP error, or a watch `ERROR` event).
    Api {
        status: Box<Status>,
        retry_after: Option<Duration>,
    },
    /// The connection failed (refused, reset, TLS, timeout, truncated body).
    Transport(Box<dyn std::error::Error + Send + Sync>),
    /// A response or event could not be decoded.
    Decode(Box<dyn std::error::Error + Send + Sync>),
    /// The source sent something the protocol does not allow (an unknown event type, …).
    Protocol(String),
    /// The shard selection changed: the watch ends so that the reflector lists again with
    /// the new selector.
    SelectionChanged,
}

impl Error {
    /// An API error carrying the server's `Status`. `retry_after` is the `Retry-After` header or
    /// `details.retryAfterSeconds`, if any.
    pub fn api(status: Status, retry_after: Option<Duration>) -> Self {
        let retry_after = retry_after.or_else(|| {
            status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(u64::from(s)))
        });
        Self {
            kind: ErrorKind::Api {
                status: Box::new(status),
                retry_after,
            },
        }
    }

    /// A transport failure (connection refused, reset, TLS, truncated body).
    pub fn transport(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            kind: ErrorKind::Transport(err.into()),
        }
    }

    /// A decode failure.
    pub fn decode(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            kind: ErrorKind::Decode(err.into()),
        }
    }

    /// A protocol violation by the source (for example an unknown watch event type).
    pub fn protocol(msg: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Protocol(msg.into()),
        }
    }

    /// The lister-watcher's shard [`Selection`](crate::sharding::Selection) changed: not a
    /// failure; the reflector lists again at once with the new selector.
    pub fn selection_changed() -> Self {
        Self {
            kind: ErrorKind::SelectionChanged,
        }
    }

    /// Whether this is [`Error::selection_changed`].
    pub fn is_selection_changed(&self) -> bool {
        matches!(self.kind, ErrorKind::SelectionChanged)
    }

    /// The server's `Status`, for API errors.
    pub fn status(&self) -> Option<&Status> {
        match &self.kind {
            ErrorKind::Api { status, .. } => Some(status),
            _ => None,
        }
    }

    /// The HTTP status code, for API errors.
    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code)
    }

    /// How long the server asked us to wait before retrying, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match &self.kind {
            ErrorKind::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// `410 Gone` / reason `Expired` or `Gone`: the resourceVersion or continue token is older
    /// than the server's history. client-go: `apierrors.IsResourceExpired || IsGone`.
    pub fn is_expired(&self) -> bool {
        self.status()
            .is_some_and(|s| s.code == 410 || s.reason == "Expired" || s.reason == "Gone")
    }

    /// The server has not yet seen the requested resourceVersion: 504 `Timeout` with the cause
    /// `ResourceVersionTooLarge` (client-go: `apierrors.IsTooLargeResourceVersion`).
    pub fn is_too_large_resource_version(&self) -> bool {
        let Some(status) = self.status() else {
            return false;
        };
        let by_cause = status.details.as_ref().is_some_and(|d| {
            d.causes
                .iter()
                .any(|c| c.reason == "ResourceVersionTooLarge")
        });
        if by_cause {
            return true;
        }
        // Servers before 1.18.6 say it only in words, under reason Timeout.
        let timeout = status.reason == "Timeout" || status.code == 504;
        timeout
            && (status.message.contains("Too large resource version")
                || status.details.as_ref().is_some_and(|d| {
                    d.causes
                        .iter()
                        .any(|c| c.message == "Too large resource version")
                }))
    }

    /// 429 Too Many Requests.
    pub fn is_too_many_requests(&self) -> bool {
        self.status()
            .is_some_and(|s| s.code == 429 || s.reason == "TooManyRequests")
    }

    /// 5xx from the server.
    pub fn is_server_error(&self) -> bool {
        self.code().is_some_and(|c| (500..600).contains(&c))
    }

    /// A transport failure (connection refused, reset, TLS, truncated body).
    pub fn is_transport(&self) -> bool {
        matches!(self.kind, ErrorKind::Transport(_))
    }

    /// A decode failure.
    pub fn is_decode(&self) -> bool {
        matches!(self.kind, ErrorKind::Decode(_))
    }

    /// A protocol violation by the source.
    pub fn is_protocol(&self) -> bool {
        matches!(self.kind, ErrorKind::Protocol(_))
    }

    /// Whether a failure to *open a watch* should be retried by re-watching from the same
    /// resourceVersion after a backoff, instead of relisting. client-go re-watches on
    /// connection refused and 429 (kcache also on other transport errors, since it cannot tell
    /// them apart); everything else, 5xx included, relists.
    pub fn is_retriable_watch_open_error(&self) -> bool {
        self.is_transport() || self.is_too_many_requests()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Api { status, .. } => {
                write!(
                    f,
                    "API error {} {}: {}",
                    status.code, status.reason, status.message
                )
            }
            ErrorKind::Transport(e) => write!(f, "transport error: {e}"),
            ErrorKind::Decode(e) => write!(f, "decode error: {e}"),
            ErrorKind::Protocol(m) => write!(f, "protocol error: {m}"),
            ErrorKind::SelectionChanged => {
                f.write_str("the shard selection changed; listing again with the new selector")
            }
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lister_watcher::Error({self})")
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Transport(e) | ErrorKind::Decode(e) => Some(&**e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: &str) -> Status {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn recognises_expired_and_too_large_as_recorded_from_kube_apiserver() {
        let expired = Error::api(
            status(
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (6)","reason":"Expired","code":410}"#,
            ),
            None,
        );
        assert!(expired.is_expired());
        assert!(!expired.is_too_large_resource_version());

        let too_large = Error::api(
            status(
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 99999999, current: 8","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#,
            ),
            None,
        );
        assert!(too_large.is_too_large_resource_version());
        assert!(!too_large.is_expired());
        assert_eq!(too_large.retry_after(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn recognises_the_legacy_too_large_resource_version_encodings() {
        // Kubernetes 1.17.0–1.18.5: reason Timeout, the words in a cause's message only.
        let legacy_cause = Error::api(
            status(
                r#"{"kind":"Status","status":"Failure","message":"Timeout: request did not complete","reason":"Timeout","details":{"causes":[{"message":"Too large resource version"}]},"code":504}"#,
            ),
            None,
        );
        assert!(legacy_cause.is_too_large_resource_version());
        // Before 1.17: the words in the message, reason Timeout.
        let legacy_message = Error::api(
            status(
                r#"{"kind":"Status","status":"Failure","message":"Too large resource version: 10, current: 5","reason":"Timeout","code":500}"#,
            ),
            None,
        );
        assert!(legacy_message.is_too_large_resource_version());
        let unrelated = Error::api(
            status(
                r#"{"kind":"Status","status":"Failure","message":"request timed out","reason":"Timeout","code":504}"#,
            ),
            None,
        );
        assert!(!unrelated.is_too_large_resource_version());
    }

    #[test]
    fn server_version_reads_major_minor_then_git_version() {
        let v = |j: serde_json::Value| ServerVersion::from_version_json(&j);
        assert_eq!(
            v(serde_json::json!({"major": "1", "minor": "36", "gitVersion": "v1.36.5"})),
            Some(ServerVersion::new(1, 36))
        );
        assert_eq!(
            v(serde_json::json!({"major": "", "minor": "", "gitVersion": "v1.34.4+k3s1"})),
            Some(ServerVersion::new(1, 34)),
            "empty fields (some builds): from gitVersion"
        );
        assert_eq!(v(serde_json::json!({"major": "x"})), None);
        assert_eq!(v(serde_json::json!("1.37")), None);
    }

    #[test]
    fn retry_after_from_status_is_kept_as_sent() {
        let e = Error::api(
            status(
                r#"{"kind":"Status","status":"Failure","message":"slow down","reason":"TooManyRequests","details":{"retryAfterSeconds":4294967295},"code":429}"#,
            ),
            None,
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(4_294_967_295)));
    }
}
