//! What both reflector ports share: the request options in client-go's terms (`Opts`), the
//! lister-watcher's error type and the patience of every wait.

use std::time::Duration;

use kcache::lister_watcher::{ListParams, VersionMatch, WatchParams};

pub(crate) use kcache::lister_watcher::Error as LwError;

/// How long (in paused, virtual time) any wait may take before the test fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(3600);

/// What a request asked for, in the terms of client-go's `metav1.ListOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Opts {
    pub(crate) resource_version: String,
    pub(crate) resource_version_match: String,
    pub(crate) limit: u32,
    pub(crate) continue_token: String,
    pub(crate) allow_watch_bookmarks: bool,
    pub(crate) send_initial_events: Option<bool>,
    pub(crate) timeout_seconds: Option<u32>,
}

impl Opts {
    pub(crate) fn of_list(p: &ListParams) -> Self {
        Self {
            resource_version: p.resource_version.clone().unwrap_or_default(),
            resource_version_match: match p.version_match {
                Some(VersionMatch::Exact) => "Exact".into(),
                Some(VersionMatch::NotOlderThan) => "NotOlderThan".into(),
                None => String::new(),
            },
            limit: p.limit.unwrap_or(0),
            continue_token: p.continue_token.clone().unwrap_or_default(),
            // kcache lists never carry a timeout (`ListParams::timeout` is a no-op).
            ..Self::default()
        }
    }

    pub(crate) fn of_watch(p: &WatchParams, resource_version: &str) -> Self {
        Self {
            resource_version: resource_version.into(),
            // kube-core sends resourceVersionMatch=NotOlderThan with sendInitialEvents.
            resource_version_match: if p.send_initial_events {
                "NotOlderThan".into()
            } else {
                String::new()
            },
            allow_watch_bookmarks: p.bookmarks,
            send_initial_events: p.send_initial_events.then_some(true),
            timeout_seconds: p.timeout,
            ..Self::default()
        }
    }

    pub(crate) fn without_timeout(self) -> Self {
        Self {
            timeout_seconds: None,
            ..self
        }
    }
}
