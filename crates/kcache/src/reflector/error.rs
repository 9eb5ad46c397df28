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
