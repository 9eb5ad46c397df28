//! Reflector settings.

use std::{sync::Arc, time::Duration};

use super::{BackoffConfig, Error, InitialList};

/// A function applied to every object before it is stored (e.g. to drop `managedFields`).
/// The reflector applies it exactly once per received object.
pub type TransformFunc<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// Called with every error the reflector recovers from (client-go's `WatchErrorHandler`, which
/// here also sees dropped events and stream errors).
pub type WatchErrorHandler = Arc<dyn Fn(&Error) + Send + Sync>;

/// Asked before each periodic resync; `false` skips it (the informer passes "is any handler's
/// resync due").
pub type ShouldResyncFunc = Arc<dyn Fn() -> bool + Send + Sync>;

/// The floor of [`Config::min_watch_timeout`] (client-go: 5 min).
pub const MIN_WATCH_TIMEOUT_FLOOR: Duration = Duration::from_secs(300);

/// Reflector settings. `Default` is client-go's, plus the deadlines client-go gets from its
/// HTTP/2 transport, except [`Config::initial_list`] (chosen by the server's version; see
/// [`InitialList`] why).
///
/// ```
/// use std::time::Duration;
/// use kcache::reflector::Config;
/// let config = Config::default()
///     .name("pods in default")
///     .page_size(100)
///     .watch_idle_timeout(Duration::from_secs(120));
/// assert_eq!(config.page_size, Some(100));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// A name for spans, logs and errors. Empty (the default) means "ask the lister-watcher"
    /// ([`ListerWatcher::describe`](crate::ListerWatcher::describe): `pods`,
    /// `deployments.apps in namespace ns`, …).
    pub name: String,
    /// Page size of paginated lists. `None` (the default) pages by 500 when client-go would page
    /// (the first list at RV "0", a list at RV "", a server that paged before) and not at all
    /// for a relist at a specific RV, so that the watch cache serves it; `Some(n)` always pages
    /// by `n`, as client-go's explicit `WatchListPageSize` does.
    pub page_size: Option<u32>,
    /// Most pages one list may take before the reflector gives up on it as a protocol error
    /// (a server that never stops sending `continue` tokens). Default 100,000 (50 million
    /// objects at 500 a page). client-go has no limit.
    pub max_list_pages: u32,
    /// Watches time out after a random duration in `[min, 2·min)` (client-go: 5 min). Values
    /// under 5 min are raised to 5 min, as client-go does.
    pub min_watch_timeout: Duration,
    /// Period of `resync` calls on the store; zero disables them (client-go: 0).
    pub resync_period: Duration,
    /// How the initial state is fetched: a paginated LIST, a streaming list
    /// (`sendInitialEvents=true`, falling back to a LIST when the server refuses it), or chosen
    /// from the server's version ([`InitialList::Auto`], the default: a streaming list on
    /// kube-apiserver 1.37+, whose watch-list responses are compressed, a LIST elsewhere). See
    /// [`InitialList`] for the measurements and the upstream facts behind the choice.
    ///
    /// This differs from client-go 1.35+, which streams on every server (its `WatchListClient`
    /// gate is on by default): [`InitialList::Stream`] does that.
    pub initial_list: InitialList,
    /// The backoff after errors the server is responsible for (429, 5xx, ERROR events, failed
    /// lists, protocol errors): client-go's 800 ms doubling to 30 s. Server-sent `Retry-After`
    /// delays are honoured up to its `max`.
    pub backoff: BackoffConfig,
    /// The backoff between reconnection attempts when the server cannot be reached at all
    /// (connection refused or reset, deadlines): [`BackoffConfig::reconnect`], 250 ms doubling
    /// to 1 s, so that the cache converges about a second after a partition heals. A refused
    /// connection costs the server nothing; every answer it gives uses [`Config::backoff`].
    pub reconnect_backoff: BackoffConfig,
    /// A watch that delivers nothing, not even a bookmark, for this long is taken for a dead
    /// (half-open) connection: it is cut and re-watched. Default 90 s: kube-apiserver sends a
    /// bookmark about every minute to watches that ask for them. Zero disables it. Over HTTP/2
    /// (kcache-client with kube-apiserver over TLS) the connection's health pings find a dead
    /// connection sooner (about 45 s, as client-go); this is the backstop for HTTP/1.1.
    pub watch_idle_timeout: Duration,
    /// Deadline for one list request (one page, or the whole body of an unpaged list), and
    /// for a streaming initial list to reach its initial-events-end bookmark (past it, the
    /// round falls back to a LIST). Default 5 min; zero disables it.
    pub list_timeout: Duration,
    /// Deadline for a watch request to be answered (the response head, not the stream).
    /// Default 60 s; zero disables it.
    pub watch_open_timeout: Duration,
    /// Label selector for lists and watches.
    pub label_selector: Option<String>,
    /// Field selector for lists and watches.
    pub field_selector: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            name: String::new(),
            page_size: None,
            max_list_pages: 100_000,
            min_watch_timeout: MIN_WATCH_TIMEOUT_FLOOR,
            resync_period: Duration::ZERO,
            initial_list: InitialList::Auto,
            backoff: BackoffConfig::default(),
            reconnect_backoff: BackoffConfig::reconnect(),
            watch_idle_timeout: Duration::from_secs(90),
            list_timeout: Duration::from_secs(300),
            watch_open_timeout: Duration::from_secs(60),
            label_selector: None,
            field_selector: None,
        }
    }
}

impl Config {
    /// Sets [`Config::name`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets [`Config::page_size`] to `Some(n)` (always page by `n`).
    #[must_use]
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = Some(n);
        self
    }

    /// Sets [`Config::max_list_pages`].
    #[must_use]
    pub fn max_list_pages(mut self, n: u32) -> Self {
        self.max_list_pages = n;
        self
    }

    /// Sets [`Config::min_watch_timeout`] (floored to 5 min when used).
    #[must_use]
    pub fn min_watch_timeout(mut self, d: Duration) -> Self {
        self.min_watch_timeout = d;
        self
    }

    /// Sets [`Config::resync_period`].
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// Sets [`Config::initial_list`].
    #[must_use]
    pub fn initial_list(mut self, strategy: InitialList) -> Self {
        self.initial_list = strategy;
        self
    }

    /// `true`: [`InitialList::Stream`]; `false`: [`InitialList::List`].
    #[deprecated(note = "use `Config::initial_list` (`InitialList::Stream` or `List`, or `Auto`)")]
    #[must_use]
    pub fn use_watch_list(self, on: bool) -> Self {
        self.initial_list(if on {
            InitialList::Stream
        } else {
            InitialList::List
        })
    }

    /// Sets [`Config::backoff`].
    #[must_use]
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets [`Config::reconnect_backoff`].
    #[must_use]
    pub fn reconnect_backoff(mut self, backoff: BackoffConfig) -> Self {
        self.reconnect_backoff = backoff;
        self
    }

    /// Sets [`Config::watch_idle_timeout`].
    #[must_use]
    pub fn watch_idle_timeout(mut self, d: Duration) -> Self {
        self.watch_idle_timeout = d;
        self
    }

    /// Sets [`Config::list_timeout`].
    #[must_use]
    pub fn list_timeout(mut self, d: Duration) -> Self {
        self.list_timeout = d;
        self
    }

    /// Sets [`Config::watch_open_timeout`].
    #[must_use]
    pub fn watch_open_timeout(mut self, d: Duration) -> Self {
        self.watch_open_timeout = d;
        self
    }

    /// Sets [`Config::label_selector`].
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Sets [`Config::field_selector`].
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// The watch timeout floor actually used: at least 5 min.
    pub(crate) fn effective_min_watch_timeout(&self) -> Duration {
        self.min_watch_timeout.max(MIN_WATCH_TIMEOUT_FLOOR)
    }
}
