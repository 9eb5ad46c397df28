//! [`DeltaFifo`]: per-key accumulated deltas in FIFO order (client-go's `DeltaFIFO`).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    fmt,
    sync::Arc,
};

use parking_lot::MutexGuard;

use super::{
    Delta, DeltaType, Deltas, Error, Fifo,
    core::Core,
    synced::{Attempt, SyncTracker},
};
use crate::{
    store::{KeyFunc, KeyListerGetter, ObjectKey},
    store::{ReflectorStore, StoreError},
};

/// Settings of a [`DeltaFifo`].
#[non_exhaustive]
pub struct DeltaFifoConfig<K> {
    /// The consumer's store. Without it, deletions of keys that are not queued are ignored,
    /// `replace` cannot detect keys that vanished from the store, and `resync` does nothing.
    pub known_objects: Option<Arc<dyn KeyListerGetter<K>>>,
    /// `replace` queues `Replaced` (true, the default) or, in the legacy mode, `Sync` (false).
    pub emit_replaced: bool,
}

impl<K> std::fmt::Debug for DeltaFifoConfig<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaFifoConfig")
            .field("known_objects", &self.known_objects.is_some())
            .field("emit_replaced", &self.emit_replaced)
            .finish()
    }
}

impl<K> Default for DeltaFifoConfig<K> {
    fn default() -> Self {
        Self {
            known_objects: None,
            emit_replaced: true,
        }
    }
}

impl<K> DeltaFifoConfig<K> {
    /// Sets the consumer's store.
    #[must_use]
    pub fn known_objects(mut self, known_objects: Arc<dyn KeyListerGetter<K>>) -> Self {
        self.known_objects = Some(known_objects);
        self
    }

    /// Queues `Replaced` (true, the default) or, in the legacy mode, `Sync` (false) on `replace`.
    #[must_use]
    pub fn emit_replaced(mut self, emit_replaced: bool) -> Self {
        self.emit_replaced = emit_replaced;
        self
    }
}

/// A queue of keys, each with every delta that happened to it since it was last popped
/// (client-go's `DeltaFIFO`, kept for parity; informers use [`RealFifo`](super::RealFifo)).
///
/// A key appears at most once in the queue and keeps its place when more deltas arrive; two
/// consecutive `Deleted` deltas collapse into one (a real final state wins over a tombstone).
/// A pop hands out all deltas of the oldest key. The lock is held while the consumer processes
/// them, so that the queue and the consumer's store never disagree.
///
/// ```
/// use std::sync::Arc;
/// use kcache::fifo::{DeltaFifo, DeltaType, Fifo};
/// use kcache::reflector::ReflectorStore;
/// use kcache::store::{KeyFunc, ObjectKey};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let key: KeyFunc<(String, u32)> = Arc::new(|o: &(String, u32)| Ok(ObjectKey::new(None, &o.0)));
/// let fifo = DeltaFifo::new(key, Default::default());
/// fifo.add(Arc::new(("a".into(), 1)))?;
/// fifo.add(Arc::new(("b".into(), 1)))?;
/// fifo.update(Arc::new(("a".into(), 2)))?;
///
/// let kinds = fifo.pop_batch(|deltas, _| deltas.iter().map(|d| d.kind).collect::<Vec<_>>()).await?;
/// assert_eq!(kinds, [DeltaType::Added, DeltaType::Updated]); // both about "a"
/// # Ok(()) }
/// ```
pub struct DeltaFifo<K> {
    inner: Arc<Inner<K>>,
}

struct Inner<K> {
    core: Core<K, State<K>>,
    known_objects: Option<Arc<dyn KeyListerGetter<K>>>,
    emit_replaced: bool,
}

struct State<K> {
    items: HashMap<ObjectKey, Deltas<K>>,
    queue: VecDeque<ObjectKey>,
    sync: SyncTracker,
}

impl<K> Clone for DeltaFifo<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeltaFifo")
            .field("len", &self.inner.core.len())
            .field("has_synced", &self.inner.core.has_synced())
            .field("closed", &self.inner.core.is_closed())
            .finish()
    }
}

impl<K> State<K> {
    /// Appends a delta to `key`'s list (queueing the key if new) and collapses two trailing
    /// deletions.
    fn queue_action(&mut self, key: ObjectKey, delta: Delta<K>) {
        let deltas = match self.items.get_mut(&key) {
            Some(deltas) => deltas,
            None => {
                self.queue.push_back(key.clone());
                self.items.entry(key).or_default()
            }
        };
        deltas.push(delta);
        dedup_deletions(deltas);
    }
}

/// Two consecutive `Deleted`: keep the one with more information — the older one unless it is
/// a tombstone.
fn dedup_deletions<K>(deltas: &mut Deltas<K>) {
    let n = deltas.len();
    if n < 2 || deltas[n - 1].kind != DeltaType::Deleted || deltas[n - 2].kind != DeltaType::Deleted
    {
        return;
    }
    let newer = deltas.pop();
    if deltas[n - 2].is_tombstone()
        && let Some(newer) = newer
    {
        deltas[n - 2] = newer;
    }
}

impl<K: Send + Sync + 'static> DeltaFifo<K> {
    /// Raises `signal` (`notify_waiters`) once, when the FIFO turns synced: the informer's
    /// wake-up for a sync that needed no pop.
    pub(crate) fn set_synced_signal(&self, signal: std::sync::Arc<tokio::sync::Notify>) {
        self.inner.core.signals().set_synced_signal(signal);
    }

    /// An empty queue.
    pub fn new(key_func: KeyFunc<K>, config: DeltaFifoConfig<K>) -> Self {
        Self {
            inner: Arc::new(Inner {
                core: Core::new(
                    key_func,
                    State {
                        items: HashMap::new(),
                        queue: VecDeque::new(),
                        sync: SyncTracker::default(),
                    },
                ),
                known_objects: config.known_objects,
                emit_replaced: config.emit_replaced,
            }),
        }
    }

    /// Pops the oldest key's deltas; the same as [`Fifo::pop_batch`] (client-go's `Pop`).
    ///
    /// # Errors
    /// [`Error::Closed`] once the queue is closed and drained.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Fifo::pop_batch`].
    pub async fn pop<F, R>(&self, process: F) -> Result<R, Error>
    where
        F: FnOnce(Deltas<K>, bool) -> R + Send,
        R: Send,
    {
        let core = &self.inner.core;
        let mut process = Some(process);
        core.signals()
            .pop_with(|| {
                let mut state = core.lock();
                let Some(key) = state.queue.front().cloned() else {
                    return core.nothing_queued();
                };
                let Some(process) = process.take() else {
                    return Attempt::Closed;
                };
                let initial = !core.has_synced();
                let counted = usize::from(state.sync.initial_limit().is_some());
                state.queue.pop_front();
                let deltas = state.items.remove(&key).unwrap_or_default();
                core.signals().set_len(state.queue.len());
                let out = process(deltas, initial);
                state.sync.on_processed(counted, core.signals());
                Attempt::Done(out)
            })
            .await
            .ok_or(Error::Closed)
    }

    /// The keys queued, oldest first.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.core.lock().queue.iter().cloned().collect()
    }

    /// The deltas queued for `key`, oldest first.
    pub fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        self.inner.core.lock().items.get(key).cloned()
    }

    fn key(&self, obj: &K) -> Result<ObjectKey, StoreError> {
        self.inner.core.key(obj)
    }

    fn lock_open(&self) -> Result<MutexGuard<'_, State<K>>, StoreError> {
        self.inner.core.lock_open()
    }

    fn write(&self, kind: DeltaType, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.key(&obj)?;
        let mut state = self.lock_open()?;
        state.sync.on_write(self.inner.core.signals());
        if kind == DeltaType::Deleted && !state.items.contains_key(&key) {
            let known = self
                .inner
                .known_objects
                .as_ref()
                .is_some_and(|known| known.get_by_key(key.as_str()).is_some());
            if !known {
                // Neither queued nor known: there is nothing to delete.
                return Ok(());
            }
        }
        state.queue_action(key.clone(), Delta::keyed(kind, key, obj));
        self.published(&state);
        Ok(())
    }

    fn published(&self, state: &State<K>) {
        self.inner.core.published(state.queue.len());
    }
}

impl<K: Send + Sync + 'static> ReflectorStore<K> for DeltaFifo<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.write(DeltaType::Added, obj)
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.write(DeltaType::Updated, obj)
    }

    /// Queued only if the key is queued or known; otherwise ignored (client-go).
    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.write(DeltaType::Deleted, obj)
    }

    /// `Replaced` (or `Sync` in legacy mode) per listed object, in list order; then a
    /// tombstone for every queued key not listed (in queue order, with its newest state); then
    /// one for every known key neither listed nor queued (sorted, with the known object).
    fn replace(&self, list: Vec<Arc<K>>, _resource_version: String) -> Result<(), StoreError> {
        let keyed = list
            .into_iter()
            .map(|obj| Ok((self.key(&obj)?, obj)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut state = self.lock_open()?;
        let kind = if self.inner.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let listed: HashSet<ObjectKey> = keyed.iter().map(|(key, _)| key.clone()).collect();
        for (key, obj) in keyed {
            state.queue_action(key.clone(), Delta::keyed(kind, key, obj));
        }
        let queued_vanished: Vec<(ObjectKey, Arc<K>)> = state
            .queue
            .iter()
            .filter(|key| !listed.contains(*key))
            .filter_map(|key| {
                let newest = state.items.get(key)?.last()?.object()?;
                Some((key.clone(), Arc::clone(newest)))
            })
            .collect();
        for (key, obj) in queued_vanished {
            state.queue_action(key.clone(), Delta::tombstone(key, obj));
        }
        if let Some(known) = &self.inner.known_objects {
            let mut known = known.list_keyed();
            known.retain(|(key, _)| !listed.contains(key) && !state.items.contains_key(key));
            known.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            for (key, obj) in known {
                state.queue_action(key.clone(), Delta::tombstone(key, obj));
            }
        }
        let queued = state.queue.len();
        state.sync.on_replace(queued, self.inner.core.signals());
        self.published(&state);
        Ok(())
    }

    /// Bookmarks carry no change a `DeltaFifo` could queue: nothing happens (an error once
    /// closed, like every other write).
    fn bookmark(&self, _resource_version: &str) -> Result<(), StoreError> {
        self.lock_open().map(drop)
    }

    /// A `Sync` for every known key (sorted) with nothing queued.
    fn resync(&self) -> Result<(), StoreError> {
        let mut state = self.lock_open()?;
        let Some(known) = &self.inner.known_objects else {
            return Ok(());
        };
        let mut known = known.list_keyed();
        known.retain(|(key, _)| !state.items.contains_key(key));
        known.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (key, obj) in known {
            state.queue_action(key.clone(), Delta::keyed(DeltaType::Sync, key, obj));
        }
        self.published(&state);
        Ok(())
    }
}

impl<K: Send + Sync + 'static> Fifo<K> for DeltaFifo<K> {
    fn pop_batch<F, R>(
        &self,
        process: F,
    ) -> impl std::future::Future<Output = Result<R, Error>> + Send
    where
        F: FnOnce(Deltas<K>, bool) -> R + Send,
        R: Send,
    {
        self.pop(process)
    }

    fn has_synced(&self) -> bool {
        self.inner.core.has_synced()
    }

    fn close(&self) {
        self.inner.core.close();
    }

    fn is_closed(&self) -> bool {
        self.inner.core.is_closed()
    }

    fn len(&self) -> usize {
        self.inner.core.len()
    }
}

#[cfg(test)]
#[path = "delta_fifo_tests.rs"]
mod tests;
