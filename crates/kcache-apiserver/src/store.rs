//! MVCC storage: one global resourceVersion, the current objects of every resource type,
//! and a bounded per-type event history from which older snapshots are rebuilt.
//!
//! A snapshot at resourceVersion `r` is the current state with every event after `r`
//! undone. Events older than the history window are dropped; a read or watch at an RV
//! before the oldest kept event is *expired* (HTTP 410 / ERROR event).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::object::StoredObject;
use crate::resource::ResourceId;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventType {
    /// The watch event type string.
    #[must_use]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change in the history of a resource type.
#[derive(Debug, Clone)]
pub(crate) struct StoreEvent {
    /// resourceVersion of the change.
    pub(crate) rv: u64,
    /// What happened.
    pub(crate) kind: EventType,
    /// Storage key (`ns/name` or `name`).
    pub(crate) key: String,
    /// The new state; for `Deleted`, the last state stamped with the deletion RV.
    pub(crate) object: Arc<StoredObject>,
    /// The state before the change (`None` for `Added`).
    pub(crate) prev: Option<Arc<StoredObject>>,
    at: Instant,
    /// The JSON watch line, rendered once and shared by every watcher.
    line: std::sync::OnceLock<bytes::Bytes>,
}

impl StoreEvent {
    /// The event's JSON watch line (`{"type":..,"object":..}\n`), rendered on first use.
    pub(crate) fn json_line(&self, render: impl FnOnce() -> bytes::Bytes) -> bytes::Bytes {
        self.line.get_or_init(render).clone()
    }
}

/// How much history to keep per resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryConfig {
    /// Keep at most this many events per resource type.
    pub max_events: usize,
    /// Drop events older than this (checked on writes and by the server's maintenance tick).
    pub max_age: Option<Duration>,
}

impl Default for HistoryConfig {
    /// 10,000 events per resource type, no age limit.
    fn default() -> Self {
        Self {
            max_events: 10_000,
            max_age: None,
        }
    }
}

/// Errors of storage reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StoreError {
    /// The requested resourceVersion is older than the kept history.
    #[error("too old resource version: {requested} ({oldest})")]
    TooOld {
        /// The RV asked for.
        requested: u64,
        /// The oldest RV that can still be served.
        oldest: u64,
    },
    /// The requested resourceVersion is newer than the store's.
    #[error("too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// The RV asked for.
        requested: u64,
        /// The store's current RV.
        current: u64,
    },
}

/// What a write closure decided.
#[derive(Debug)]
pub(crate) enum Mutation {
    /// Store this value (create or replace).
    Put(Value),
    /// Remove the object.
    Delete,
    /// Change nothing.
    Keep,
}

/// The result of a write.
#[derive(Debug, Clone)]
pub(crate) struct WriteOutcome {
    /// The object after the write (the last state for a delete); `None` if nothing existed.
    pub(crate) object: Option<Arc<StoredObject>>,
}

/// Which state a list reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAt {
    /// The latest state.
    Latest,
    /// The state exactly at this resourceVersion.
    Exact(u64),
}

/// A list request against one resource type.
pub(crate) struct ListQuery<'a> {
    /// Restrict to one namespace.
    pub(crate) namespace: Option<&'a str>,
    /// Which state to read.
    pub(crate) at: ReadAt,
    /// Continue strictly after this key (relative to the namespace prefix).
    pub(crate) start_after: Option<&'a str>,
    /// At most this many items.
    pub(crate) limit: Option<usize>,
    /// Only items for which this returns true.
    pub(crate) filter: &'a (dyn Fn(&Value) -> bool + Sync),
    /// Whether to count the remaining items when a page is cut.
    pub(crate) count_remaining: bool,
}

impl std::fmt::Debug for ListQuery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListQuery")
            .field("namespace", &self.namespace)
            .field("at", &self.at)
            .field("start_after", &self.start_after)
            .field("limit", &self.limit)
            .field("count_remaining", &self.count_remaining)
            .finish_non_exhaustive()
    }
}

/// One page of a list.
#[derive(Debug, Clone)]
pub(crate) struct ListPage {
    /// The items, ordered by key.
    pub(crate) items: Vec<Arc<StoredObject>>,
    /// The resourceVersion the page is consistent at.
    pub(crate) rv: u64,
    /// When more items follow: the key (relative to the namespace prefix) of the last item.
    pub(crate) continue_after: Option<String>,
    /// How many matching items follow, when counted.
    pub(crate) remaining: Option<u64>,
}

struct Table {
    objects: BTreeMap<String, Arc<StoredObject>>,
    log: VecDeque<Arc<StoreEvent>>,
    compacted: u64,
    latest: u64,
    notify: watch::Sender<u64>,
}

impl Table {
    fn new(compacted: u64) -> Self {
        Self {
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            compacted,
            latest: 0,
            notify: watch::channel(0).0,
        }
    }

    fn trim(&mut self, cfg: &HistoryConfig, now: Instant) {
        while self.log.len() > cfg.max_events
            || cfg.max_age.is_some_and(|age| {
                self.log
                    .front()
                    .is_some_and(|e| now.saturating_duration_since(e.at) > age)
            })
        {
            if let Some(e) = self.log.pop_front() {
                self.compacted = self.compacted.max(e.rv);
            }
        }
    }
}

struct Inner {
    rv: u64,
    floor: u64,
    tables: HashMap<ResourceId, Table>,
}

impl Inner {
    fn table_mut(&mut self, id: &ResourceId) -> &mut Table {
        let floor = self.floor;
        self.tables
            .entry(id.clone())
            .or_insert_with(|| Table::new(floor))
    }
}

/// The MVCC object store shared by every request; cheap to clone.
#[derive(Clone)]
pub(crate) struct Store {
    inner: Arc<RwLock<Inner>>,
    history: HistoryConfig,
    rv_tx: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rv", &self.current_rv())
            .field("history", &self.history)
            .finish()
    }
}

impl Store {
    /// An empty store at resourceVersion 1.
    #[must_use]
    pub(crate) fn new(history: HistoryConfig) -> Self {
        Self {
            inner: Arc::new(RwLock::new(Inner {
                rv: 1,
                floor: 0,
                tables: HashMap::new(),
            })),
            history,
            rv_tx: Arc::new(watch::channel(1).0),
        }
    }

    /// The latest resourceVersion.
    #[must_use]
    pub(crate) fn current_rv(&self) -> u64 {
        self.inner.read().rv
    }

    /// A receiver that sees the global resourceVersion advance.
    #[must_use]
    pub(crate) fn subscribe_rv(&self) -> watch::Receiver<u64> {
        self.rv_tx.subscribe()
    }

    /// A receiver that sees the latest event RV of one resource type advance.
    #[must_use]
    pub(crate) fn subscribe(&self, id: &ResourceId) -> watch::Receiver<u64> {
        self.inner.write().table_mut(id).notify.subscribe()
    }

    /// The current object under `key`.
    #[must_use]
    pub(crate) fn get(&self, id: &ResourceId, key: &str) -> Option<Arc<StoredObject>> {
        self.inner.read().tables.get(id)?.objects.get(key).cloned()
    }

    /// Atomically reads the object under `key`, lets `f` decide, and applies the decision
    /// with a new resourceVersion. `f` receives the current object and the RV the write
    /// would get.
    ///
    /// # Errors
    /// Whatever `f` returns.
    pub(crate) fn mutate<E>(
        &self,
        id: &ResourceId,
        key: &str,
        f: impl FnOnce(Option<&Arc<StoredObject>>, u64) -> Result<Mutation, E>,
    ) -> Result<WriteOutcome, E> {
        let mut inner = self.inner.write();
        let next = inner.rv + 1;
        let table = inner.table_mut(id);
        let current = table.objects.get(key).cloned();
        let decision = f(current.as_ref(), next)?;
        let (object, kind) = match decision {
            Mutation::Keep => {
                return Ok(WriteOutcome { object: current });
            }
            Mutation::Put(value) => {
                let obj = Arc::new(StoredObject::new(value, next));
                table.objects.insert(key.to_owned(), obj.clone());
                let kind = if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (obj, kind)
            }
            Mutation::Delete => {
                let Some(prev) = table.objects.remove(key) else {
                    return Ok(WriteOutcome { object: None });
                };
                (
                    Arc::new(StoredObject::new(prev.value().clone(), next)),
                    EventType::Deleted,
                )
            }
        };
        let now = Instant::now();
        table.log.push_back(Arc::new(StoreEvent {
            rv: next,
            kind,
            key: key.to_owned(),
            object: object.clone(),
            prev: current,
            at: now,
            line: std::sync::OnceLock::new(),
        }));
        table.latest = next;
        table.trim(&self.history, now);
        table.notify.send_replace(next);
        inner.rv = next;
        drop(inner);
        self.rv_tx.send_replace(next);
        Ok(WriteOutcome {
            object: Some(object),
        })
    }

    /// Keys of the current objects of `id` whose key starts with `prefix`.
    #[must_use]
    pub(crate) fn keys_with_prefix(&self, id: &ResourceId, prefix: &str) -> Vec<String> {
        let inner = self.inner.read();
        let Some(t) = inner.tables.get(id) else {
            return Vec::new();
        };
        t.objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Reads one page of a list.
    ///
    /// # Errors
    /// [`StoreError::TooOld`] when an exact RV is older than the history window,
    /// [`StoreError::TooLarge`] when it is newer than the store.
    pub(crate) fn list(&self, id: &ResourceId, q: &ListQuery<'_>) -> Result<ListPage, StoreError> {
        let inner = self.inner.read();
        let current = inner.rv;
        let empty;
        let table = match inner.tables.get(id) {
            Some(t) => t,
            None => {
                empty = Table::new(inner.floor);
                &empty
            }
        };
        let rv = match q.at {
            ReadAt::Latest => current,
            ReadAt::Exact(r) if r > current => {
                return Err(StoreError::TooLarge {
                    requested: r,
                    current,
                });
            }
            ReadAt::Exact(r) if r < table.compacted => {
                return Err(StoreError::TooOld {
                    requested: r,
                    oldest: table.compacted,
                });
            }
            ReadAt::Exact(r) => r,
        };
        // State at `rv` for keys changed after it: the `prev` of the earliest later event.
        let mut overrides: BTreeMap<&str, Option<&Arc<StoredObject>>> = BTreeMap::new();
        for ev in table.log.iter().rev().take_while(|e| e.rv > rv) {
            overrides.insert(ev.key.as_str(), ev.prev.as_ref());
        }
        let prefix = q.namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
        let start_key = q.start_after.map(|s| format!("{prefix}{s}"));
        let lower: Bound<&str> = match &start_key {
            Some(k) => Bound::Excluded(k.as_str()),
            None => Bound::Included(prefix.as_str()),
        };
        let mut cur = table
            .objects
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(k, v)| (k.as_str(), Some(v)))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .peekable();
        let mut ovr = overrides
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(k, v)| (*k, *v))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .peekable();
        let merged = std::iter::from_fn(move || {
            let take_cur = match (cur.peek(), ovr.peek()) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((a, _)), Some((b, _))) => {
                    if a == b {
                        cur.next();
                        false
                    } else {
                        a < b
                    }
                }
            };
            if take_cur { cur.next() } else { ovr.next() }
        })
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .filter(|(_, v)| (q.filter)(v.value()));

        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0u64;
        let mut more = false;
        for (k, v) in merged {
            if q.limit.is_some_and(|l| items.len() >= l) {
                more = true;
                if !q.count_remaining {
                    break;
                }
                remaining += 1;
                continue;
            }
            items.push(v.clone());
            last_key = Some(k);
        }
        let continue_after = if more {
            last_key.map(|k| k[prefix.len()..].to_owned())
        } else {
            None
        };
        Ok(ListPage {
            items,
            rv,
            continue_after,
            remaining: (more && q.count_remaining).then_some(remaining),
        })
    }

    /// Up to `max` events of `id` with an RV greater than `after`.
    ///
    /// # Errors
    /// [`StoreError::TooOld`] when events after `after` were already dropped.
    pub(crate) fn events_since(
        &self,
        id: &ResourceId,
        after: u64,
        max: usize,
    ) -> Result<Vec<Arc<StoreEvent>>, StoreError> {
        let inner = self.inner.read();
        let Some(table) = inner.tables.get(id) else {
            if after < inner.floor {
                return Err(StoreError::TooOld {
                    requested: after,
                    oldest: inner.floor,
                });
            }
            return Ok(Vec::new());
        };
        if after < table.compacted {
            return Err(StoreError::TooOld {
                requested: after,
                oldest: table.compacted,
            });
        }
        let start = table.log.partition_point(|e| e.rv <= after);
        Ok(table.log.range(start..).take(max).cloned().collect())
    }

    /// Drops all history: every RV before the current one becomes expired.
    pub(crate) fn compact_now(&self) {
        let mut inner = self.inner.write();
        let rv = inner.rv;
        inner.floor = rv;
        for t in inner.tables.values_mut() {
            t.log.clear();
            t.compacted = rv;
        }
    }

    /// Applies the age limit of the history window (called periodically by the server).
    pub(crate) fn maintain(&self) {
        if self.history.max_age.is_none() {
            return;
        }
        let now = Instant::now();
        let mut inner = self.inner.write();
        for t in inner.tables.values_mut() {
            t.trim(&self.history, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id() -> ResourceId {
        ResourceId {
            group: String::new(),
            version: "v1".into(),
            plural: "configmaps".into(),
        }
    }

    fn put(s: &Store, name: &str, v: &str) -> u64 {
        let out = s
            .mutate::<()>(&id(), &format!("ns/{name}"), |_, _| {
                Ok(Mutation::Put(
                    json!({"metadata": {"name": name, "namespace": "ns"}, "data": {"v": v}}),
                ))
            })
            .unwrap();
        out.object.unwrap().rv()
    }

    fn all(_: &Value) -> bool {
        true
    }

    fn names(p: &ListPage) -> Vec<String> {
        p.items.iter().map(|o| o.name().to_owned()).collect()
    }

    #[test]
    fn exact_read_rebuilds_the_historical_snapshot() {
        let s = Store::new(HistoryConfig::default());
        put(&s, "a", "1");
        let rv_b = put(&s, "b", "1");
        put(&s, "c", "1");
        put(&s, "a", "2");
        s.mutate::<()>(&id(), "ns/b", |_, _| Ok(Mutation::Delete))
            .unwrap();
        let q = ListQuery {
            namespace: Some("ns"),
            at: ReadAt::Exact(rv_b),
            start_after: None,
            limit: None,
            filter: &all,
            count_remaining: true,
        };
        let page = s.list(&id(), &q).unwrap();
        assert_eq!(names(&page), ["a", "b"]);
        assert_eq!(page.items[0].value()["data"]["v"], "1");
        let latest = s
            .list(
                &id(),
                &ListQuery {
                    at: ReadAt::Latest,
                    ..q
                },
            )
            .unwrap();
        assert_eq!(names(&latest), ["a", "c"]);
    }

    #[test]
    fn pages_continue_strictly_after_the_last_key_and_count_the_rest() {
        let s = Store::new(HistoryConfig::default());
        for n in ["a", "b", "c", "d", "e"] {
            put(&s, n, "1");
        }
        let q = ListQuery {
            namespace: Some("ns"),
            at: ReadAt::Latest,
            start_after: None,
            limit: Some(2),
            filter: &all,
            count_remaining: true,
        };
        let p1 = s.list(&id(), &q).unwrap();
        assert_eq!(names(&p1), ["a", "b"]);
        assert_eq!(p1.remaining, Some(3));
        let after = p1.continue_after.clone().unwrap();
        let p2 = s
            .list(
                &id(),
                &ListQuery {
                    start_after: Some(&after),
                    at: ReadAt::Exact(p1.rv),
                    ..q
                },
            )
            .unwrap();
        assert_eq!(names(&p2), ["c", "d"]);
        assert_eq!(p2.remaining, Some(1));
    }

    #[test]
    fn history_window_by_count_expires_old_rvs() {
        let s = Store::new(HistoryConfig {
            max_events: 2,
            max_age: None,
        });
        let first = put(&s, "a", "1");
        put(&s, "a", "2");
        put(&s, "a", "3");
        let err = s.events_since(&id(), first - 1, 10).unwrap_err();
        assert!(matches!(err, StoreError::TooOld { .. }));
        assert_eq!(s.events_since(&id(), first, 10).unwrap().len(), 2);
        s.compact_now();
        assert!(s.events_since(&id(), first, 10).is_err());
        assert!(
            s.events_since(&id(), s.current_rv(), 10)
                .unwrap()
                .is_empty()
        );
    }
}
