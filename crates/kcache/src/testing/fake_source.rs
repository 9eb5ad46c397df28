//! [`FakeSource`]: an in-memory [`ListerWatcher`] with real resourceVersion semantics.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Arc,
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube_core::{
    Resource, TypeMeta,
    watch::{Bookmark, BookmarkMeta},
};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::{
    lister_watcher::{
        Error, INITIAL_EVENTS_END_ANNOTATION, ListParams, ListerWatcher, ObjectList, Status,
        VersionMatch, WatchEvent, WatchParams, WatchStream,
    },
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

/// An in-memory [`ListerWatcher`] for unit tests: client-go's `FakeControllerSource`, with the
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

    fn do_list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        let mut st = self.state.lock();
        st.calls.push(Call::List {
            resource_version: params.resource_version.clone(),
            version_match: params.version_match.as_ref().map(|m| match m {
                VersionMatch::Exact => "Exact".to_owned(),
                VersionMatch::NotOlderThan => "NotOlderThan".to_owned(),
            }),
            limit: params.limit,
            continue_token: params.continue_token.clone(),
        });
        if let Some(status) = st.list_failures.pop_front() {
            return Err(Error::api(status, None));
        }
        let (snapshot_rv, start_after, limit) = if let Some(token) = &params.continue_token {
            let (rv, start) = decode_continue(token).ok_or_else(|| {
                Error::api(status(400, "BadRequest", "continue key is not valid"), None)
            })?;
            if rv < st.compacted {
                return Err(Error::api(status(410, "Expired", CONTINUE_EXPIRED), None));
            }
            (rv, Some(start), params.limit)
        } else {
            let rv_param = params.resource_version.as_deref().unwrap_or("");
            match (rv_param, &params.version_match) {
                ("", _) => (st.rv, None, params.limit),
                ("0", _) => (
                    st.rv,
                    None,
                    if st.paginate_at_rv0 {
                        params.limit
                    } else {
                        None
                    },
                ),
                (rv, m) => {
                    let rv: u64 = rv.parse().map_err(|_| {
                        Error::api(status(400, "BadRequest", "invalid resource version"), None)
                    })?;
                    if rv > st.rv {
                        return Err(too_large(rv, st.rv));
                    }
                    let exact = matches!(m, Some(VersionMatch::Exact))
                        || (m.is_none() && params.limit.is_some());
                    if exact {
                        if rv < st.compacted {
                            return Err(Error::api(status(410, "Expired", LIST_EXPIRED), None));
                        }
                        (rv, None, params.limit)
                    } else {
                        (st.rv, None, params.limit)
                    }
                }
            }
        };
        let snapshot = st.state_at(snapshot_rv);
        let mut iter = snapshot
            .into_iter()
            .filter(|(k, _)| start_after.as_deref().is_none_or(|s| k.as_str() > s))
            .peekable();
        let limit = limit
            .filter(|l| *l > 0)
            .map(|l| l as usize)
            .unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key = None;
        while items.len() < limit {
            match iter.next() {
                Some((k, v)) => {
                    last_key = Some(k);
                    items.push(v);
                }
                None => break,
            }
        }
        let remaining = iter.count();
        let mut metadata = ListMeta {
            resource_version: Some(snapshot_rv.to_string()),
            ..ListMeta::default()
        };
        if remaining > 0 {
            let last = last_key.expect("a full page has a last key");
            metadata.continue_ = Some(encode_continue(snapshot_rv, last.as_str()));
            metadata.remaining_item_count = Some(remaining as i64);
        }
        if let Some(n) = st.compact_after_lists {
            if n <= 1 {
                st.compact_after_lists = None;
                st.rv += 1;
                st.compacted = st.rv;
                st.history.clear();
            } else {
                st.compact_after_lists = Some(n - 1);
            }
        }
        Ok(ObjectList {
            types: list_type::<K>(),
            metadata,
            items,
        })
    }

    fn do_watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, Error> {
        let mut st = self.state.lock();
        st.calls.push(Call::Watch {
            resource_version: resource_version.to_owned(),
            timeout_seconds: params.timeout,
            bookmarks: params.bookmarks,
            send_initial_events: params.send_initial_events,
        });
        if let Some(status) = st.watch_failures.pop_front() {
            return Err(Error::api(status, None));
        }
        if params.send_initial_events && !st.supports_watch_list {
            return Err(Error::api(
                status(
                    422,
                    "Invalid",
                    "sendInitialEvents: Forbidden: sendInitialEvents is not supported",
                ),
                None,
            ));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let rv: Option<u64> = match resource_version {
            "" | "0" => None,
            rv => Some(rv.parse().map_err(|_| {
                Error::api(status(400, "BadRequest", "invalid resource version"), None)
            })?),
        };
        if params.send_initial_events {
            if let Some(rv) = rv.filter(|rv| *rv > st.rv) {
                return Err(too_large(rv, st.rv));
            }
            for obj in st.objects.values() {
                let _ = tx.send(Ok(WatchEvent::Added(obj.clone())));
            }
            let _ = tx.send(Ok(WatchEvent::Bookmark(bookmark(&st.rv.to_string(), true))));
        } else {
            match rv {
                None => {
                    for obj in st.objects.values() {
                        let _ = tx.send(Ok(WatchEvent::Added(obj.clone())));
                    }
                }
                Some(rv) if rv < st.compacted => {
                    let msg = format!("too old resource version: {rv} ({})", st.compacted);
                    let _ = tx.send(Ok(WatchEvent::Error(Box::new(status(
                        410, "Expired", &msg,
                    )))));
                    return Ok(finish(rx, params.timeout));
                }
                Some(rv) if rv > st.rv => return Err(too_large(rv, st.rv)),
                Some(rv) => {
                    for ev in st.history.iter().filter(|e| e.rv > rv) {
                        let _ = tx.send(Ok(to_event(ev.kind, ev.obj.clone())));
                    }
                }
            }
        }
        st.watchers.push(Watcher {
            tx,
            bookmarks: params.bookmarks,
        });
        Ok(finish(rx, params.timeout))
    }
}

fn finish<K: Send + 'static>(
    rx: mpsc::UnboundedReceiver<Result<WatchEvent<K>, Error>>,
    timeout: Option<u32>,
) -> WatchStream<K> {
    let stream = UnboundedReceiverStream::new(rx);
    match timeout {
        Some(secs) => stream
            .take_until(tokio::time::sleep(Duration::from_secs(u64::from(secs))))
            .boxed(),
        None => stream.boxed(),
    }
}

impl<K: Clone> State<K> {
    fn record(&mut self, ev: HistoryEvent<K>) {
        let kind = ev.kind;
        let obj = ev.obj.clone();
        self.history.push_back(ev);
        self.watchers
            .retain(|w| w.tx.send(Ok(to_event(kind, obj.clone()))).is_ok());
        self.enforce_history_limit();
    }

    fn enforce_history_limit(&mut self) {
        if let Some(limit) = self.history_limit {
            while self.history.len() > limit {
                if let Some(ev) = self.history.pop_front() {
                    self.compacted = ev.rv;
                }
            }
        }
    }

    /// The objects as they were at `rv` (which must not be compacted).
    fn state_at(&self, rv: u64) -> BTreeMap<ObjectKey, K> {
        let mut objects = self.objects.clone();
        for ev in self.history.iter().rev().take_while(|e| e.rv > rv) {
            match &ev.prev {
                Some(prev) => objects.insert(ev.key.clone(), prev.clone()),
                None => objects.remove(&ev.key),
            };
        }
        objects
    }
}

fn to_event<K>(kind: Kind, obj: K) -> WatchEvent<K> {
    match kind {
        Kind::Added => WatchEvent::Added(obj),
        Kind::Modified => WatchEvent::Modified(obj),
        Kind::Deleted => WatchEvent::Deleted(obj),
    }
}

fn bookmark(rv: &str, initial_events_end: bool) -> Bookmark {
    let mut annotations = BTreeMap::new();
    if initial_events_end {
        annotations.insert(INITIAL_EVENTS_END_ANNOTATION.to_owned(), "true".to_owned());
    }
    Bookmark {
        types: TypeMeta::default(),
        metadata: BookmarkMeta {
            resource_version: rv.to_owned(),
            annotations,
        },
    }
}

fn list_type<K: Resource>() -> TypeMeta
where
    K::DynamicType: Default,
{
    let dt = K::DynamicType::default();
    TypeMeta {
        api_version: K::api_version(&dt).into_owned(),
        kind: format!("{}List", K::kind(&dt)),
    }
}

const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A `Status` as kube-apiserver builds it.
pub fn status(code: u16, reason: &str, message: &str) -> Status {
    serde_json::from_value(serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    }))
    .expect("a Status literal always deserializes")
}

fn too_large(requested: u64, current: u64) -> Error {
    let st: Status = serde_json::from_value(serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("Timeout: Too large resource version: {requested}, current: {current}"),
        "reason": "Timeout",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1},
        "code": 504,
    }))
    .expect("a Status literal always deserializes");
    Error::api(st, None)
}

fn encode_continue(rv: u64, start_after: &str) -> String {
    format!("{rv}:{start_after}")
}

fn decode_continue(token: &str) -> Option<(u64, String)> {
    let (rv, start) = token.split_once(':')?;
    Some((rv.parse().ok()?, start.to_owned()))
}

impl<K> ListerWatcher<K> for FakeSource<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        let mut stalled = self.stall.subscribe();
        // Waits while stalled; an error means the sender is gone, which cannot happen while
        // `self` holds it.
        let _ = stalled.wait_for(|s| !*s).await;
        self.do_list(params)
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, Error> {
        self.do_watch(params, resource_version)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_core::ObjectMeta;

    use super::*;

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn names(list: &ObjectList<ConfigMap>) -> Vec<String> {
        list.items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn paged_list_is_a_consistent_snapshot() {
        let src = FakeSource::new();
        for n in ["a", "b", "c", "d"] {
            src.upsert(cm(n));
        }
        let p = ListParams {
            limit: Some(2),
            ..ListParams::default()
        };
        let first = src.list(&p).await.unwrap();
        assert_eq!(names(&first), ["a", "b"]);
        assert_eq!(first.metadata.remaining_item_count, Some(2));
        src.delete(&ObjectKey::new(Some("ns"), "c"));
        src.upsert(cm("e"));
        let p2 = ListParams {
            continue_token: first.metadata.continue_.clone(),
            ..p
        };
        let second = src.list(&p2).await.unwrap();
        assert_eq!(
            names(&second),
            ["c", "d"],
            "the page sees the snapshot, not the later writes"
        );
        assert_eq!(
            second.metadata.resource_version,
            first.metadata.resource_version
        );
        assert!(second.metadata.continue_.is_none());
    }

    #[tokio::test]
    async fn compaction_expires_continue_tokens_and_old_watches() {
        let src = FakeSource::new();
        for n in ["a", "b", "c"] {
            src.upsert(cm(n));
        }
        let old_rv = src.resource_version();
        let first = src
            .list(&ListParams {
                limit: Some(1),
                ..ListParams::default()
            })
            .await
            .unwrap();
        src.upsert(cm("d"));
        src.compact();
        let err = src
            .list(&ListParams {
                limit: Some(1),
                continue_token: first.metadata.continue_,
                ..ListParams::default()
            })
            .await
            .unwrap_err();
        assert!(err.is_expired(), "{err}");
        let mut w = src
            .watch(
                &WatchParams::default(),
                &(old_rv.parse::<u64>().unwrap() - 1).to_string(),
            )
            .await
            .unwrap();
        match w.next().await {
            Some(Ok(WatchEvent::Error(s))) => {
                assert_eq!(s.code, 410);
                assert!(
                    s.message.starts_with("too old resource version: "),
                    "{}",
                    s.message
                );
            }
            other => panic!("expected an ERROR event, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn watch_replays_history_after_rv_then_streams_live() {
        let src = FakeSource::new();
        let rv = src.upsert(cm("a"));
        src.upsert(cm("b"));
        let mut w = src.watch(&WatchParams::default(), &rv).await.unwrap();
        src.delete(&ObjectKey::new(Some("ns"), "a"));
        assert!(
            matches!(w.next().await, Some(Ok(WatchEvent::Added(c))) if c.metadata.name.as_deref() == Some("b"))
        );
        assert!(
            matches!(w.next().await, Some(Ok(WatchEvent::Deleted(c))) if c.metadata.name.as_deref() == Some("a"))
        );
        src.drop_watches();
        assert!(w.next().await.is_none());
    }

    #[tokio::test]
    async fn future_resource_version_is_too_large() {
        let src = FakeSource::<ConfigMap>::new();
        let p = ListParams {
            resource_version: Some("999".into()),
            ..ListParams::default()
        };
        assert!(
            src.list(&p)
                .await
                .unwrap_err()
                .is_too_large_resource_version()
        );
    }
}
