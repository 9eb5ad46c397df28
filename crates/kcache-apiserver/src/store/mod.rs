//! MVCC storage: one global resourceVersion, the current objects of every resource type,
//! and a bounded per-type event history from which older snapshots are rebuilt.
//!
//! A snapshot at resourceVersion `r` is the current state with every event after `r`
//! undone. Events older than the history window are dropped; a read or watch at an RV
//! before the oldest kept event is *expired* (HTTP 410 / ERROR event).

//!
//! This module holds the objects and the write path; `history.rs` the event log, its window
//! and the reads of events (watch fan-out); `snapshot.rs` the list reads at a
//! resourceVersion.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::object::StoredObject;
use crate::resource::ResourceId;

mod history;
mod snapshot;
#[cfg(test)]
mod tests;

pub use history::HistoryConfig;
pub(crate) use history::{EventType, StoreEvent};
pub(crate) use snapshot::{ListQuery, ReadAt};

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

    /// The current objects of `id`.
    #[must_use]
    pub(crate) fn objects(&self, id: &ResourceId) -> Vec<Arc<StoredObject>> {
        let inner = self.inner.read();
        inner
            .tables
            .get(id)
            .map(|t| t.objects.values().cloned().collect())
            .unwrap_or_default()
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
}
