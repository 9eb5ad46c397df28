//! How a [`FakeSource`] answers: lists at a resourceVersion (paged, expired, too large) and
//! watches replaying its history, with the [`ListerWatcher`] implementation on top.

use std::{collections::BTreeMap, time::Duration};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube_core::{
    Resource, TypeMeta,
    watch::{Bookmark, BookmarkMeta},
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::{Call, FakeSource, HistoryEvent, Kind, State, Watcher, status};
use crate::{
    lister_watcher::{
        Error, INITIAL_EVENTS_END_ANNOTATION, ListParams, ListerWatcher, ObjectList, Status,
        VersionMatch, WatchEvent, WatchParams, WatchStream,
    },
    store::ObjectKey,
};

impl<K> FakeSource<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default,
{
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
    pub(super) fn record(&mut self, ev: HistoryEvent<K>) {
        let kind = ev.kind;
        let obj = ev.obj.clone();
        self.history.push_back(ev);
        self.watchers
            .retain(|w| w.tx.send(Ok(to_event(kind, obj.clone()))).is_ok());
        self.enforce_history_limit();
    }

    pub(super) fn enforce_history_limit(&mut self) {
        if let Some(limit) = self.history_limit {
            while self.history.len() > limit {
                if let Some(ev) = self.history.pop_front() {
                    self.compacted = ev.rv;
                }
            }
        }
    }

    /// The objects as they were at `rv` (which must not be compacted).
    pub(super) fn state_at(&self, rv: u64) -> BTreeMap<ObjectKey, K> {
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

pub(super) fn bookmark(rv: &str, initial_events_end: bool) -> Bookmark {
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

    /// Hands the page's items to `sink` one by one, as kcache-client does while it decodes.
    async fn list_each(
        &self,
        params: &ListParams,
        next: Option<tokio::sync::oneshot::Sender<String>>,
        sink: &mut (dyn FnMut(K) + Send),
    ) -> Result<ObjectList<K>, Error> {
        drop(next);
        let mut page = self.list(params).await?;
        std::mem::take(&mut page.items).into_iter().for_each(sink);
        Ok(page)
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, Error> {
        self.do_watch(params, resource_version)
    }
}
