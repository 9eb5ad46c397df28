//! [`FakeSource`]: an in-memory [`ListerWatcher`](crate::ListerWatcher) with real resourceVersion semantics.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Arc,
};

use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use self::serve::bookmark;
use crate::{
    lister_watcher::{Error, Status, WatchEvent},
    store::{ObjectKey, meta_namespace_key},
};

/// One recorded call to the source, for assertions on what a reflector asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// A `list` call.
    List {
        /// `resourceVersion` sent.
        resource_version: Option<String>,
        /// `resourceVersionMatch` sent (`"Exact"` / `"NotOlderThan"`).
        version_match: Option<String>,
        /// `limit` sent.
        limit: Option<u32>,
        /// `continue` sent.
        continue_token: Option<String>,
    },
    /// A `watch` call.
    Watch {
        /// `resourceVersion` sent.
        resource_version: String,
        /// `timeoutSeconds` sent.
        timeout_seconds: Option<u32>,
        /// `allowWatchBookmarks` sent.
        bookmarks: bool,
        /// `sendInitialEvents` sent.
        send_initial_events: bool,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Added,
    Modified,
    Deleted,
}

struct HistoryEvent<K> {
    rv: u64,
    kind: Kind,
    key: ObjectKey,
    obj: K,
    prev: Option<K>,
}

struct Watcher<K> {
    tx: mpsc::UnboundedSender<Result<WatchEvent<K>, Error>>,
    bookmarks: bool,
}

struct State<K> {
    rv: u64,
    objects: BTreeMap<ObjectKey, K>,
    history: VecDeque<HistoryEvent<K>>,
    /// Every RV `< compacted` is gone from the history.
    compacted: u64,
    history_limit: Option<usize>,
    watchers: Vec<Watcher<K>>,
    list_failures: VecDeque<Status>,
    watch_failures: VecDeque<Status>,
    supports_watch_list: bool,
    paginate_at_rv0: bool,
    compact_after_lists: Option<usize>,
    calls: Vec<Call>,
}

/// An in-memory [`ListerWatcher`](crate::ListerWatcher) for unit tests: client-go's `FakeControllerSource`, with the
/// resourceVersion semantics of a real kube-apiserver.
///
/// - One global, increasing resourceVersion; every write records an event in a history.
/// - [`compact`](Self::compact) drops the history: a list at an older RV or continue token gets
///   410 Expired, a watch from an older RV gets one `ERROR` event with a 410 `Status` — worded as
///   kube-apiserver v1.36 words them.
/// - Paged lists are consistent snapshots; `resourceVersion="0"` ignores `limit` (as the watch
///   cache does); a future RV gets 504 "Too large resource version".
/// - Watches replay the history after their RV, honour `timeoutSeconds` (on tokio time, so
///   paused-time tests work), send bookmarks on [`bookmark`](Self::bookmark), and support the
///   streaming initial list (`sendInitialEvents=true`).
/// - Faults: [`drop_watches`](Self::drop_watches), [`fail_lists`](Self::fail_lists),
///   [`fail_watches`](Self::fail_watches), [`inject_watch_error`](Self::inject_watch_error),
///   [`stall_lists`](Self::stall_lists).
///
/// Objects must be of a type whose metadata can be set (`K: Resource`); keys are
/// `namespace/name`. Label and field selectors are recorded but not applied.
pub struct FakeSource<K> {
    state: Arc<Mutex<State<K>>>,
    stall: Arc<watch::Sender<bool>>,
}

impl<K> std::fmt::Debug for FakeSource<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("FakeSource")
            .field("resource_version", &st.rv)
            .field("objects", &st.objects.len())
            .field("watchers", &st.watchers.len())
            .finish_non_exhaustive()
    }
}

impl<K> Clone for FakeSource<K> {
    fn clone(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            stall: Arc::clone(&self.stall),
        }
    }
}

impl<K> Default for FakeSource<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<K> FakeSource<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// An empty source at resourceVersion 1, supporting the streaming initial list.
    pub fn new() -> Self {
        let state = State {
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            compacted: 0,
            history_limit: None,
            watchers: Vec::new(),
            list_failures: VecDeque::new(),
            watch_failures: VecDeque::new(),
            supports_watch_list: true,
            paginate_at_rv0: false,
            compact_after_lists: None,
            calls: Vec::new(),
        };
        Self {
            state: Arc::new(Mutex::new(state)),
            stall: Arc::new(watch::channel(false).0),
        }
    }

    /// Keeps at most `n` events of history; older ones are compacted away automatically.
    pub fn set_history_limit(&self, n: usize) {
        let mut st = self.state.lock();
        st.history_limit = Some(n);
        st.enforce_history_limit();
    }

    /// Makes the source behave like a server without the streaming initial list: a watch with
    /// `sendInitialEvents=true` is refused with 422 Invalid.
    pub fn set_supports_watch_list(&self, supported: bool) {
        self.state.lock().supports_watch_list = supported;
    }

    /// Makes `resourceVersion="0"` lists honour `limit`, as kube-apiserver does with
    /// `--watch-cache=false` (by default the limit is ignored there, as the watch cache does).
    pub fn set_paginate_at_rv0(&self, paginate: bool) {
        self.state.lock().paginate_at_rv0 = paginate;
    }

    /// Compacts the history right after the `n`th next successful list call (for example to
    /// expire a continue token between two pages).
    pub fn compact_after_lists(&self, n: usize) {
        self.state.lock().compact_after_lists = Some(n);
    }

    /// Bumps the resourceVersion without changing any object, as writes to other resources do
    /// on a real server (etcd's revision is global).
    pub fn advance_resource_version(&self) -> String {
        let mut st = self.state.lock();
        st.rv += 1;
        st.rv.to_string()
    }

    /// Sends `item` on every open watch, which stay open (e.g. an unknown event type as
    /// `Error::protocol`, or an undecodable event as `Error::decode`).
    pub fn inject_watch_item(&self, item: impl Fn() -> Result<WatchEvent<K>, Error>) {
        let mut st = self.state.lock();
        st.watchers.retain(|w| w.tx.send(item()).is_ok());
    }

    /// Creates (or, if it exists, replaces) an object; returns its new resourceVersion.
    ///
    /// # Panics
    /// When the object has no name (a test bug).
    pub fn upsert(&self, mut obj: K) -> String {
        let key = meta_namespace_key(&obj).expect("FakeSource objects need a name");
        let mut st = self.state.lock();
        st.rv += 1;
        let rv = st.rv;
        obj.meta_mut().resource_version = Some(rv.to_string());
        let prev = st.objects.insert(key.clone(), obj.clone());
        let kind = if prev.is_some() {
            Kind::Modified
        } else {
            Kind::Added
        };
        st.record(HistoryEvent {
            rv,
            kind,
            key,
            obj,
            prev,
        });
        rv.to_string()
    }

    /// Deletes an object by key; returns the deletion's resourceVersion, or `None` if absent.
    pub fn delete(&self, key: &ObjectKey) -> Option<String> {
        let mut st = self.state.lock();
        let prev = st.objects.remove(key)?;
        st.rv += 1;
        let rv = st.rv;
        let mut obj = prev.clone();
        obj.meta_mut().resource_version = Some(rv.to_string());
        st.record(HistoryEvent {
            rv,
            kind: Kind::Deleted,
            key: key.clone(),
            obj,
            prev: Some(prev),
        });
        Some(rv.to_string())
    }

    /// The current objects, sorted by key.
    pub fn objects(&self) -> Vec<K> {
        self.state.lock().objects.values().cloned().collect()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> String {
        self.state.lock().rv.to_string()
    }

    /// Forgets all history: every RV older than the current one is expired.
    pub fn compact(&self) {
        let mut st = self.state.lock();
        st.rv += 1;
        st.compacted = st.rv;
        st.history.clear();
    }

    /// Ends every open watch normally (as a server restart or a load balancer would).
    pub fn drop_watches(&self) {
        self.state.lock().watchers.clear();
    }

    /// Sends an `ERROR` event with `status` on every open watch, then ends them.
    pub fn inject_watch_error(&self, status: Status) {
        let mut st = self.state.lock();
        for w in st.watchers.drain(..) {
            let _ = w.tx.send(Ok(WatchEvent::Error(Box::new(status.clone()))));
        }
    }

    /// Sends a transport failure item on every open watch, then ends them (a broken connection).
    pub fn break_watches(&self) {
        let mut st = self.state.lock();
        for w in st.watchers.drain(..) {
            let _ = w.tx.send(Err(Error::transport("connection reset by peer")));
        }
    }

    /// Sends a `BOOKMARK` at the current resourceVersion to watches that allow bookmarks.
    pub fn bookmark(&self) {
        let mut st = self.state.lock();
        let rv = st.rv.to_string();
        st.watchers.retain(|w| {
            !w.bookmarks
                || w.tx
                    .send(Ok(WatchEvent::Bookmark(bookmark(&rv, false))))
                    .is_ok()
        });
    }

    /// The next `n` list calls fail with `status`.
    pub fn fail_lists(&self, n: usize, status: Status) {
        let mut st = self.state.lock();
        st.list_failures.extend(std::iter::repeat_n(status, n));
    }

    /// Forgets the list failures still queued by [`fail_lists`](Self::fail_lists).
    pub fn clear_list_failures(&self) {
        self.state.lock().list_failures.clear();
    }

    /// The next `n` watch calls fail with `status`.
    pub fn fail_watches(&self, n: usize, status: Status) {
        let mut st = self.state.lock();
        st.watch_failures.extend(std::iter::repeat_n(status, n));
    }

    /// While `true`, list calls wait (as against a stalled server).
    pub fn stall_lists(&self, stalled: bool) {
        self.stall.send_replace(stalled);
    }

    /// Number of open watches.
    pub fn watcher_count(&self) -> usize {
        let mut st = self.state.lock();
        st.watchers.retain(|w| !w.tx.is_closed());
        st.watchers.len()
    }

    /// Every list and watch call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().calls.clone()
    }

    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        self.state.lock().calls.clear();
    }
}

/// A `Status` as kube-apiserver builds it.
pub fn status(code: u16, reason: &str, message: &str) -> Status {
    serde_json::from_value(serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    }))
    .expect("a Status literal always deserializes")
}

mod serve;

#[cfg(test)]
mod tests;
