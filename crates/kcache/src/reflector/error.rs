//! Reflector errors.

use crate::{lister_watcher, reflector::StoreError};

/// Why a reflector's list-and-watch cycle ended, or an event was dropped. Passed to the watch
/// error handler; the reflector itself always recovers (relist or re-watch after a backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Listing failed (after the retry at `resourceVersion=""` for expired/too-large RVs).
    #[error("failed to list {type_name}: {source}")]
    List {
        /// The reflector's type description.
        type_name: String,
        /// The list error.
        #[source]
        source: lister_watcher::Error,
    },
    /// Opening a watch failed with an error that cannot be retried by re-watching.
    #[error("failed to watch {type_name}: {source}")]
    WatchOpen {
        /// The reflector's type description.
        type_name: String,
        /// The watch error.
        #[source]
        source: lister_watcher::Error,
    },
    /// The streaming initial list (`sendInitialEvents`) failed; the reflector falls back to LIST.
    #[error("streaming initial list of {type_name} failed, falling back to LIST: {source}")]
    WatchList {
        /// The reflector's type description.
        type_name: String,
        /// The underlying error.
        #[source]
        source: Box<Error>,
    },
    /// The watch stream carried an `ERROR` event or could not be decoded; the reflector relists.
    #[error("watch of {type_name} ended with error: {source}")]
    WatchStream {
        /// The reflector's type description.
        type_name: String,
        /// The error event's status, or the decode failure.
        #[source]
        source: lister_watcher::Error,
    },
    /// The watch closed in under a second without delivering any event; the reflector relists.
    #[error(
        "very short watch of {type_name}: the watch lasted less than a second and no items were received"
    )]
    VeryShortWatch {
        /// The reflector's type description.
        type_name: String,
    },
    /// A watch event was dropped: its object has no key, or the source sent something the
    /// protocol does not allow. The watch goes on.
    #[error("dropped a watch event for {type_name}: {reason}")]
    BadEvent {
        /// The reflector's type description.
        type_name: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The server answered something the protocol does not allow: a list without a
    /// resourceVersion, a `continue` token that repeats, more pages than
    /// [`Config::max_list_pages`](super::Config::max_list_pages). The cache is untouched; the
    /// reflector backs off and lists again.
    #[error("protocol error from the server while syncing {type_name}: {reason}")]
    Protocol {
        /// The reflector's type description.
        type_name: String,
        /// What was wrong.
        reason: String,
    },
    /// The watch closed after less than a second although it delivered events; the reflector
    /// backs off before re-watching (client-go re-watches at once).
    #[error("watch of {type_name} closed after {events} events in under a second")]
    ShortWatch {
        /// The reflector's type description.
        type_name: String,
        /// Events it delivered.
        events: u64,
    },
    /// The streaming initial list closed before its `k8s.io/initial-events-end` bookmark.
    #[error("streaming initial list of {type_name} closed before the initial-events-end bookmark")]
    StreamingListEndedEarly {
        /// The reflector's type description.
        type_name: String,
    },
    /// Nothing, not even a bookmark, arrived on the watch for
    /// [`Config::watch_idle_timeout`](super::Config::watch_idle_timeout): the connection is
    /// taken for dead and the reflector re-watches.
    #[error("watch of {type_name} idle for {idle:?}: connection presumed dead, re-watching")]
    WatchIdle {
        /// The reflector's type description.
        type_name: String,
        /// How long it was idle.
        idle: std::time::Duration,
    },
    /// A list or watch request was not answered within its deadline
    /// ([`Config::list_timeout`](super::Config::list_timeout),
    /// [`Config::watch_open_timeout`](super::Config::watch_open_timeout)).
    #[error("{what} of {type_name} not answered within {after:?}")]
    Timeout {
        /// The reflector's type description.
        type_name: String,
        /// `"list"` or `"watch"`.
        what: &'static str,
        /// The deadline.
        after: std::time::Duration,
    },
    /// Code inside the reflector panicked (a transform, the store, the lister-watcher). The
    /// panic was caught; the reflector backs off and relists.
    #[error("reflector for {type_name} panicked: {message}; restarting after a backoff")]
    Panicked {
        /// The reflector's type description.
        type_name: String,
        /// The panic's message.
        message: String,
    },
    /// The store refused a replace or resync (a key error, or the queue is closed).
    #[error("store update for {type_name} failed: {source}")]
    Store {
        /// The reflector's type description.
        type_name: String,
        /// The store error.
        #[source]
        source: StoreError,
    },
}

impl Error {
    /// The lister-watcher error underneath, if any.
    pub fn lister_watcher_error(&self) -> Option<&lister_watcher::Error> {
        match self {
            Error::List { source, .. }
            | Error::WatchOpen { source, .. }
            | Error::WatchStream { source, .. } => Some(source),
            Error::WatchList { source, .. } => source.lister_watcher_error(),
            _ => None,
        }
    }

    /// Whether the server said the resourceVersion is expired (410).
    pub fn is_expired(&self) -> bool {
        self.lister_watcher_error()
            .is_some_and(lister_watcher::Error::is_expired)
    }
}
