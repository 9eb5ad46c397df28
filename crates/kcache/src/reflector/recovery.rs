//! The recovery table: every failure the reflector meets leads to exactly one [`Action`].
//!
//! [`decide`] is the only place that maps an error to what happens next; the loop in
//! [`super::Reflector::run`] only carries the action out. The table is in the module docs of
//! [`crate::reflector`].

use super::{Error, handle::RelistCause};
use crate::lister_watcher;

/// Where the reflector was when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A paginated or unpaginated LIST.
    List,
    /// A streaming initial list (`sendInitialEvents=true`), opening or streaming.
    StreamingList,
    /// Opening a watch from the last synced RV.
    WatchOpen,
    /// Consuming an open watch.
    Watch,
}

/// Which backoff a retry waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// No wait.
    None,
    /// The server answered and asked for patience (429, 5xx, errors): `Config::backoff`,
    /// honouring its `Retry-After` up to the cap.
    Server,
    /// The server could not be reached: `Config::reconnect_backoff`.
    Reconnect,
}

/// What the reflector does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Wait, then watch again from the last synced RV (no relist).
    Rewatch(Wait),
    /// Wait, then sync again (streaming list or LIST) at the last synced RV.
    Relist(Wait),
    /// Forget the last RV and list again at once at `resourceVersion=""` (a consistent read):
    /// the RV is expired or the server has not reached it.
    RelistConsistent,
    /// The streaming list is refused by this server: a plain LIST at once.
    FallbackToList,
    /// The store is closed: the consumer is gone, stop.
    Stop,
}

/// The context [`decide`] needs beyond the error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    /// Where the failure happened.
    pub(crate) phase: Phase,
    /// The failing list was already at `resourceVersion=""`.
    pub(crate) at_consistent_rv: bool,
}

/// Maps one failure to one action. See the table in [`crate::reflector`].
pub(crate) fn decide(cx: Context, err: &Error) -> Action {
    use Action::*;
    match err {
        Error::Store { source, .. } => {
            if matches!(source, super::StoreError::Closed) {
                Stop
            } else {
                Relist(Wait::Server)
            }
        }
        Error::Panicked { .. } | Error::Protocol { .. } | Error::BadEvent { .. } => {
            Relist(Wait::Server)
        }
        Error::VeryShortWatch { .. } | Error::StreamingListEndedEarly { .. } => {
            Relist(Wait::Server)
        }
        Error::ShortWatch { .. } => Rewatch(Wait::Server),
        Error::WatchIdle { .. } => Rewatch(Wait::None),
        Error::Timeout { .. } => match cx.phase {
            Phase::WatchOpen | Phase::Watch => Rewatch(Wait::Reconnect),
            Phase::List | Phase::StreamingList => Relist(Wait::Reconnect),
        },
        Error::WatchList { source, .. } => decide_streaming(cx, source),
        Error::List { source, .. }
        | Error::WatchOpen { source, .. }
        | Error::WatchStream { source, .. } => decide_lw(cx, source),
    }
}

/// A failed streaming initial list. client-go's `watchList` retries the stream only when the
/// server is unreachable or busy (connection refused, 429) or the RV is gone (then at RV `""`);
/// on any other error `ListAndWatch` falls back to a plain LIST for this round ("making
/// progress is better than deadlocking") and tries the stream again on the next round.
fn decide_streaming(cx: Context, err: &Error) -> Action {
    use Action::*;
    match err {
        // The consumer is gone, or our own code failed: not the stream's fault.
        Error::Store { .. } | Error::Panicked { .. } => decide(cx, err),
        Error::List { source, .. }
        | Error::WatchOpen { source, .. }
        | Error::WatchStream { source, .. } => {
            let gone = source.is_expired() || source.is_too_large_resource_version();
            if source.is_selection_changed() {
                Relist(Wait::None)
            } else if source.is_transport() {
                Relist(Wait::Reconnect)
            } else if source.is_too_many_requests() {
                Relist(Wait::Server)
            } else if gone && !cx.at_consistent_rv {
                // The RV is forgotten by the caller: stream again at once at RV "".
                Relist(Wait::None)
            } else {
                FallbackToList
            }
        }
        // Closed before the end bookmark, a very short or idle stream, a deadline, a protocol
        // error, an undecodable event: give the stream up for this round.
        _ => FallbackToList,
    }
}

fn decide_lw(cx: Context, e: &lister_watcher::Error) -> Action {
    use Action::*;
    let gone = e.is_expired() || e.is_too_large_resource_version();
    match cx.phase {
        _ if e.is_selection_changed() => Relist(Wait::None),
        Phase::List if gone && !cx.at_consistent_rv => RelistConsistent,
        Phase::List | Phase::StreamingList if e.is_transport() => Relist(Wait::Reconnect),
        Phase::List | Phase::StreamingList => Relist(Wait::Server),
        Phase::WatchOpen | Phase::Watch if e.is_transport() => Rewatch(Wait::Reconnect),
        // client-go re-watches only after 429 (and connection refused); every other watch
        // error (5xx and `ERROR` events with a 500 included: `InternalError`,
        // `StorageReadError`, a too-large RV) ends the round and relists, which is how objects
        // removed by an unsafe delete leave the cache.
        Phase::WatchOpen | Phase::Watch if e.is_too_many_requests() => Rewatch(Wait::Server),
        Phase::WatchOpen | Phase::Watch => Relist(Wait::Server),
    }
}

/// Whether the failure makes the last synced RV unusable (the next list is at `""`).
pub(crate) fn forgets_resource_version(err: &Error) -> bool {
    err.lister_watcher_error()
        .is_some_and(|e| e.is_expired() || e.is_too_large_resource_version())
}

/// What a failure that leads to a relist counts as in [`RelistCauses`](super::RelistCauses).
pub(crate) fn relist_cause(err: &Error) -> RelistCause {
    match err.lister_watcher_error() {
        Some(e) if e.is_expired() => RelistCause::Expired,
        Some(e) if e.is_too_large_resource_version() => RelistCause::TooLarge,
        Some(e) if e.is_selection_changed() => RelistCause::SelectionChanged,
        _ => RelistCause::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::status;

    fn api(code: u16, reason: &str) -> lister_watcher::Error {
        lister_watcher::Error::api(status(code, reason, "m"), None)
    }

    fn too_large() -> lister_watcher::Error {
        let status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Timeout: Too large resource version: 99, current: 8",
            "reason": "Timeout", "code": 504,
            "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                "message": "Too large resource version"}]},
        }))
        .unwrap();
        lister_watcher::Error::api(status, None)
    }

    fn cx(phase: Phase) -> Context {
        Context {
            phase,
            at_consistent_rv: false,
        }
    }

    fn t() -> String {
        "pods".into()
    }

    #[test]
    fn the_table() {
        use Action::*;
        let list = |e| Error::List {
            type_name: t(),
            source: e,
        };
        let open = |e| Error::WatchOpen {
            type_name: t(),
            source: e,
        };
        let stream = |e| Error::WatchStream {
            type_name: t(),
            source: e,
        };
        let wl = |e| Error::WatchList {
            type_name: t(),
            source: Box::new(Error::WatchStream {
                type_name: t(),
                source: e,
            }),
        };
        let watch_list = |e| Error::WatchList {
            type_name: t(),
            source: Box::new(e),
        };
        let refused = || lister_watcher::Error::transport("connection refused");
        let rows: Vec<(Phase, Error, Action)> = vec![
            (Phase::List, list(api(410, "Expired")), RelistConsistent),
            (Phase::List, list(api(504, "Timeout")), Relist(Wait::Server)),
            (Phase::List, list(refused()), Relist(Wait::Reconnect)),
            (
                Phase::List,
                list(api(429, "TooManyRequests")),
                Relist(Wait::Server),
            ),
            (
                Phase::StreamingList,
                wl(api(410, "Expired")),
                Relist(Wait::None),
            ),
            (Phase::StreamingList, wl(too_large()), Relist(Wait::None)),
            (
                Phase::StreamingList,
                wl(api(429, "TooManyRequests")),
                Relist(Wait::Server),
            ),
            (
                Phase::StreamingList,
                wl(api(500, "InternalError")),
                FallbackToList,
            ),
            (
                Phase::StreamingList,
                wl(lister_watcher::Error::decode("bad json")),
                FallbackToList,
            ),
            (
                Phase::StreamingList,
                watch_list(Error::VeryShortWatch { type_name: t() }),
                FallbackToList,
            ),
            (
                Phase::StreamingList,
                watch_list(Error::WatchIdle {
                    type_name: t(),
                    idle: std::time::Duration::from_secs(90),
                }),
                FallbackToList,
            ),
            (
                Phase::StreamingList,
                watch_list(Error::Timeout {
                    type_name: t(),
                    what: "watch",
                    after: std::time::Duration::from_secs(60),
                }),
                FallbackToList,
            ),
            (
                Phase::StreamingList,
                watch_list(Error::Store {
                    type_name: t(),
                    source: super::super::StoreError::Closed,
                }),
                Stop,
            ),
            (
                Phase::StreamingList,
                wl(api(400, "BadRequest")),
                FallbackToList,
            ),
            (
                Phase::StreamingList,
                wl(api(403, "Forbidden")),
                FallbackToList,
            ),
            (
                Phase::StreamingList,
                wl(api(503, "ServiceUnavailable")),
                FallbackToList,
            ),
            (Phase::StreamingList, wl(refused()), Relist(Wait::Reconnect)),
            (
                Phase::StreamingList,
                watch_list(Error::StreamingListEndedEarly { type_name: t() }),
                FallbackToList,
            ),
            (Phase::WatchOpen, open(refused()), Rewatch(Wait::Reconnect)),
            (
                Phase::WatchOpen,
                open(api(429, "TooManyRequests")),
                Rewatch(Wait::Server),
            ),
            (
                Phase::WatchOpen,
                open(api(500, "InternalError")),
                Relist(Wait::Server),
            ),
            (Phase::WatchOpen, open(too_large()), Relist(Wait::Server)),
            (
                Phase::Watch,
                stream(api(500, "InternalError")),
                Relist(Wait::Server),
            ),
            (
                Phase::Watch,
                stream(api(500, "StorageReadError")),
                Relist(Wait::Server),
            ),
            (
                Phase::WatchOpen,
                open(api(403, "Forbidden")),
                Relist(Wait::Server),
            ),
            (
                Phase::WatchOpen,
                open(api(410, "Expired")),
                Relist(Wait::Server),
            ),
            (
                Phase::Watch,
                stream(api(410, "Expired")),
                Relist(Wait::Server),
            ),
            (
                Phase::Watch,
                stream(api(429, "TooManyRequests")),
                Rewatch(Wait::Server),
            ),
            (
                Phase::Watch,
                stream(lister_watcher::Error::decode("bad json")),
                Relist(Wait::Server),
            ),
            (
                Phase::Watch,
                Error::VeryShortWatch { type_name: t() },
                Relist(Wait::Server),
            ),
            (
                Phase::Watch,
                Error::ShortWatch {
                    type_name: t(),
                    events: 1,
                },
                Rewatch(Wait::Server),
            ),
            (
                Phase::Watch,
                Error::WatchIdle {
                    type_name: t(),
                    idle: std::time::Duration::from_secs(90),
                },
                Rewatch(Wait::None),
            ),
            (
                Phase::List,
                Error::Protocol {
                    type_name: t(),
                    reason: "no resourceVersion".into(),
                },
                Relist(Wait::Server),
            ),
            (
                Phase::Watch,
                Error::Panicked {
                    type_name: t(),
                    message: "boom".into(),
                },
                Relist(Wait::Server),
            ),
            (
                Phase::Watch,
                Error::Store {
                    type_name: t(),
                    source: super::super::StoreError::Closed,
                },
                Stop,
            ),
        ];
        for (phase, err, want) in rows {
            assert_eq!(decide(cx(phase), &err), want, "{phase:?}: {err}");
        }
        let consistent = Context {
            phase: Phase::List,
            at_consistent_rv: true,
        };
        assert_eq!(
            decide(consistent, &list(api(410, "Expired"))),
            Relist(Wait::Server),
            "an expired list at RV \"\" backs off instead of looping"
        );
        let consistent_stream = Context {
            phase: Phase::StreamingList,
            at_consistent_rv: true,
        };
        assert_eq!(
            decide(consistent_stream, &wl(api(410, "Expired"))),
            FallbackToList,
            "an expired streaming list at RV \"\" gives the stream up instead of looping"
        );
    }
}
