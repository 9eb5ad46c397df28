//! [`RealFifo`]: the ordered log of deltas that informers use (client-go's `RealFIFO`).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    fmt,
    sync::Arc,
};

use parking_lot::MutexGuard;

use super::{
    DEFAULT_BATCH_SIZE, Delta, DeltaObject, DeltaType, Deltas, Error, Fifo,
    core::Core,
    synced::{Attempt, SyncTracker},
};
use crate::{
    store::{KeyFunc, KeyListerGetter, ObjectKey},
    store::{ReflectorStore, StoreError},
};

/// How a [`RealFifo`] turns relists and resyncs into deltas.
pub enum RealFifoMode<K> {
    /// client-go with the `AtomicFIFO` gate off: `replace` appends a `Deleted` tombstone per
    /// vanished key then a `Replaced` per listed object; `resync` appends a `Sync` per known
    /// key with nothing queued. Needs the consumer's store as `known_objects`, and keeps the
    /// queue locked while the consumer processes (so the store and the queue never disagree).
    NonAtomic {
        /// The consumer's cache (the informer's indexer).
        known_objects: Arc<dyn KeyListerGetter<K>>,
    },
    /// client-go 1.36's default (`AtomicFIFO`): `replace` appends one `ReplacedAll`, `resync`
    /// one `SyncAll`, and the consumer works out the differences against its own store.
    Atomic {
        /// Release the queue lock while the consumer processes a batch, unless 2 × batch size
        /// or more deltas are queued (then the lock is held as backpressure on the reflector).
        /// client-go 1.36: on (`UnlockWhileProcessingFIFO`).
        unlock_while_processing: bool,
        /// Append a `Bookmark` delta for every [`ReflectorStore::bookmark`]. client-go 1.36: on.
        emit_bookmarks: bool,
    },
}

impl<K> fmt::Debug for RealFifoMode<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NonAtomic { .. } => f.debug_struct("NonAtomic").finish_non_exhaustive(),
            Self::Atomic {
                unlock_while_processing,
                emit_bookmarks,
            } => f
                .debug_struct("Atomic")
                .field("unlock_while_processing", unlock_while_processing)
                .field("emit_bookmarks", emit_bookmarks)
                .finish(),
        }
    }
}

/// Settings of a [`RealFifo`]. `Default` is client-go 1.36's informer queue: atomic, unlocked
/// while processing, bookmarks emitted, batches of [`DEFAULT_BATCH_SIZE`].
#[non_exhaustive]
pub struct RealFifoConfig<K> {
    /// How relists and resyncs are queued.
    pub mode: RealFifoMode<K>,
    /// The largest batch [`RealFifo::pop_batch`] hands out (at least 1).
    pub batch_size: usize,
}

impl<K> fmt::Debug for RealFifoConfig<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealFifoConfig")
            .field("mode", &self.mode)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

impl<K> Default for RealFifoConfig<K> {
    fn default() -> Self {
        Self {
            mode: RealFifoMode::Atomic {
                unlock_while_processing: true,
                emit_bookmarks: true,
            },
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }
}

impl<K> RealFifoConfig<K> {
    /// Non-atomic mode against the consumer's store.
    pub fn non_atomic(known_objects: Arc<dyn KeyListerGetter<K>>) -> Self {
        Self {
            mode: RealFifoMode::NonAtomic { known_objects },
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }

    /// Sets how relists and resyncs are queued.
    #[must_use]
    pub fn mode(mut self, mode: RealFifoMode<K>) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the batch size (values below 1 count as 1).
    #[must_use]
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }
}

/// The informers' queue: every change is appended in order and handed to the consumer in that
/// order — nothing is merged, deletions are never lost (client-go's `RealFIFO`).
///
/// A cheap-`Clone` handle: the reflector writes through one clone ([`ReflectorStore`]), the
/// informer pops through another ([`Fifo`]). See the [module documentation](super) for what
/// `process` receives.
///
/// ```
/// use std::sync::Arc;
/// use kcache::fifo::{DeltaType, Fifo, RealFifo};
/// use kcache::reflector::ReflectorStore;
/// use kcache::store::{KeyFunc, ObjectKey};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let key: KeyFunc<String> = Arc::new(|s: &String| Ok(ObjectKey::new(None, s)));
/// let fifo = RealFifo::atomic(key);
/// fifo.replace(vec![Arc::new("a".to_string())], "10".into())?;
/// fifo.add(Arc::new("b".to_string()))?;
///
/// let kinds = fifo.pop_batch(|deltas, initial| {
///     assert!(initial);
///     deltas.iter().map(|d| d.kind).collect::<Vec<_>>()
/// }).await?;
/// assert_eq!(kinds, [DeltaType::ReplacedAll]);
/// assert!(fifo.has_synced());
/// # Ok(()) }
/// ```
pub struct RealFifo<K> {
    inner: Arc<Inner<K>>,
}

struct Inner<K> {
    core: Core<K, State<K>>,
    mode: RealFifoMode<K>,
    batch_size: usize,
}

struct State<K> {
    items: VecDeque<Delta<K>>,
    sync: SyncTracker,
}

impl<K> Clone for RealFifo<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for RealFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealFifo")
            .field(
                "atomic",
                &matches!(self.inner.mode, RealFifoMode::Atomic { .. }),
            )
            .field("len", &self.inner.core.len())
            .field("has_synced", &self.inner.core.has_synced())
            .field("closed", &self.inner.core.is_closed())
            .finish()
    }
}

impl<K: Send + Sync + 'static> RealFifo<K> {
    /// Raises `signal` (`notify_waiters`) once, when the FIFO turns synced: the informer's
    /// wake-up for a sync that needed no pop.
    pub(crate) fn set_synced_signal(&self, signal: std::sync::Arc<tokio::sync::Notify>) {
        self.inner.core.signals().set_synced_signal(signal);
    }

    /// A queue with explicit options.
    pub fn new(key_func: KeyFunc<K>, config: RealFifoConfig<K>) -> Self {
        Self {
            inner: Arc::new(Inner {
                core: Core::new(
                    key_func,
                    State {
                        items: VecDeque::new(),
                        sync: SyncTracker::default(),
                    },
                ),
                mode: config.mode,
                batch_size: config.batch_size.max(1),
            }),
        }
    }

    /// client-go 1.36's informer queue ([`RealFifoConfig::default`]).
    pub fn atomic(key_func: KeyFunc<K>) -> Self {
        Self::new(key_func, RealFifoConfig::default())
    }

    /// The non-atomic queue, checking vanished and resynced keys against `known_objects`.
    pub fn non_atomic(key_func: KeyFunc<K>, known_objects: Arc<dyn KeyListerGetter<K>>) -> Self {
        Self::new(key_func, RealFifoConfig::non_atomic(known_objects))
    }

    /// Whether this queue emits `ReplacedAll`/`SyncAll`.
    pub fn is_atomic(&self) -> bool {
        matches!(self.inner.mode, RealFifoMode::Atomic { .. })
    }

    /// Pops exactly one delta (client-go's `Pop`) and calls `process(vec![delta], initial)`.
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
        self.pop_up_to(1, process).await
    }

    async fn pop_up_to<F, R>(&self, max: usize, process: F) -> Result<R, Error>
    where
        F: FnOnce(Deltas<K>, bool) -> R + Send,
        R: Send,
    {
        let inner = &*self.inner;
        let core = &inner.core;
        let mut process = Some(process);
        core.signals()
            .pop_with(|| {
                let mut state = core.lock();
                if state.items.is_empty() {
                    return core.nothing_queued();
                }
                let Some(process) = process.take() else {
                    return Attempt::Closed;
                };
                let initial = !core.has_synced();
                let (batch, counted) = take_batch(&mut state, max);
                core.signals().set_len(state.items.len());
                let out = if inner.releases_lock(state.items.len()) {
                    MutexGuard::unlocked(&mut state, || process(batch, initial))
                } else {
                    process(batch, initial)
                };
                state.sync.on_processed(counted, core.signals());
                Attempt::Done(out)
            })
            .await
            .ok_or(Error::Closed)
    }

    fn key(&self, obj: &K) -> Result<ObjectKey, StoreError> {
        self.inner.core.key(obj)
    }

    /// Locks the state unless the queue is closed.
    fn lock_open(&self) -> Result<MutexGuard<'_, State<K>>, StoreError> {
        self.inner.core.lock_open()
    }

    fn append(&self, kind: DeltaType, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.key(&obj)?;
        let mut state = self.lock_open()?;
        state.sync.on_write(self.inner.core.signals());
        state.items.push_back(Delta::keyed(kind, key, obj));
        self.inner.published(&state);
        Ok(())
    }
}

impl<K> Inner<K> {
    fn releases_lock(&self, queued: usize) -> bool {
        matches!(
            self.mode,
            RealFifoMode::Atomic {
                unlock_while_processing: true,
                ..
            }
        ) && queued < 2 * self.batch_size
    }

    /// Publishes the new length and wakes waiting pops.
    fn published(&self, state: &State<K>) {
        self.core.published(state.items.len());
    }
}

/// Takes the next batch: up to `max` consecutive batchable deltas with distinct keys, never
/// past the end of the initial list, or one non-batchable delta alone. Returns it with the
/// number of initial-list entries it holds.
fn take_batch<K>(state: &mut State<K>, max: usize) -> (Deltas<K>, usize) {
    let initial = state.sync.initial_limit();
    let limit = initial
        .map_or(max, |initial| max.min(initial))
        .min(state.items.len());
    let n = if state.items.front().is_some_and(|d| !d.kind.is_batchable()) {
        1
    } else {
        let mut seen = HashSet::with_capacity(limit);
        state
            .items
            .iter()
            .take(limit)
            .take_while(|d| d.kind.is_batchable() && d.key().is_some_and(|k| seen.insert(k)))
            .count()
            .max(1)
    };
    let batch: Deltas<K> = state.items.drain(..n).collect();
    let counted = if initial.is_some() { batch.len() } else { 0 };
    (batch, counted)
}

impl<K: Send + Sync + 'static> ReflectorStore<K> for RealFifo<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.append(DeltaType::Added, obj)
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.append(DeltaType::Updated, obj)
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.append(DeltaType::Deleted, obj)
    }

    /// Atomic: one `ReplacedAll`. Non-atomic: a tombstone for every key that is not in `list`
    /// — first keys whose last queued delta is not a deletion (in queue order, with that
    /// delta's object), then known keys not queued at all (sorted, with the known object) —
    /// then a `Replaced` per listed object, in list order.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: String) -> Result<(), StoreError> {
        let keyed = list
            .into_iter()
            .map(|obj| Ok((self.key(&obj)?, obj)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut state = self.lock_open()?;
        match &self.inner.mode {
            RealFifoMode::Atomic { .. } => state.items.push_back(Delta {
                kind: DeltaType::ReplacedAll,
                object: DeltaObject::ReplacedAll {
                    objects: keyed,
                    resource_version,
                },
            }),
            RealFifoMode::NonAtomic { known_objects } => {
                let tombstones = vanished(&state.items, known_objects.as_ref(), &keyed);
                state.items.extend(tombstones);
                state.items.extend(
                    keyed
                        .into_iter()
                        .map(|(key, obj)| Delta::keyed(DeltaType::Replaced, key, obj)),
                );
            }
        }
        let queued = state.items.len();
        state.sync.on_replace(queued, self.inner.core.signals());
        self.inner.published(&state);
        Ok(())
    }

    /// Atomic: one `SyncAll`. Non-atomic: a `Sync` for every known key (sorted) that has
    /// nothing queued — a queued delta is newer than the store's copy.
    fn resync(&self) -> Result<(), StoreError> {
        let mut state = self.lock_open()?;
        match &self.inner.mode {
            RealFifoMode::Atomic { .. } => state.items.push_back(Delta {
                kind: DeltaType::SyncAll,
                object: DeltaObject::SyncAll,
            }),
            RealFifoMode::NonAtomic { known_objects } => {
                let queued: HashSet<&ObjectKey> =
                    state.items.iter().filter_map(Delta::key).collect();
                let mut known = known_objects.list_keyed();
                known.retain(|(key, _)| !queued.contains(key));
                known.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                state.items.extend(
                    known
                        .into_iter()
                        .map(|(key, obj)| Delta::keyed(DeltaType::Sync, key, obj)),
                );
            }
        }
        self.inner.published(&state);
        Ok(())
    }

    /// A `Bookmark` delta in atomic mode with bookmarks on; otherwise nothing.
    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        let mut state = self.lock_open()?;
        if let RealFifoMode::Atomic {
            emit_bookmarks: true,
            ..
        } = self.inner.mode
        {
            state.items.push_back(Delta {
                kind: DeltaType::Bookmark,
                object: DeltaObject::Bookmark {
                    resource_version: resource_version.to_owned(),
                },
            });
            self.inner.published(&state);
        }
        Ok(())
    }
}

/// The tombstones a non-atomic replace appends before its `Replaced` deltas.
fn vanished<K>(
    items: &VecDeque<Delta<K>>,
    known_objects: &dyn KeyListerGetter<K>,
    listed: &[(ObjectKey, Arc<K>)],
) -> Vec<Delta<K>> {
    let listed: HashSet<&ObjectKey> = listed.iter().map(|(key, _)| key).collect();
    // Queued keys in order of first appearance, each with its last queued delta.
    let mut order: Vec<&ObjectKey> = Vec::new();
    let mut last: HashMap<&ObjectKey, &Delta<K>> = HashMap::new();
    for delta in items {
        if let Some(key) = delta.key()
            && last.insert(key, delta).is_none()
        {
            order.push(key);
        }
    }
    let mut tombstones = Vec::new();
    for key in order {
        let delta = last[key];
        if listed.contains(key) || delta.kind == DeltaType::Deleted {
            continue;
        }
        if let Some(obj) = delta.object() {
            tombstones.push(Delta::tombstone(key.clone(), Arc::clone(obj)));
        }
    }
    let mut known = known_objects.list_keyed();
    known.retain(|(key, _)| !listed.contains(key) && !last.contains_key(key));
    known.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    tombstones.extend(
        known
            .into_iter()
            .map(|(key, obj)| Delta::tombstone(key, obj)),
    );
    tombstones
}

impl<K: Send + Sync + 'static> Fifo<K> for RealFifo<K> {
    fn pop_batch<F, R>(
        &self,
        process: F,
    ) -> impl std::future::Future<Output = Result<R, Error>> + Send
    where
        F: FnOnce(Deltas<K>, bool) -> R + Send,
        R: Send,
    {
        self.pop_up_to(self.inner.batch_size, process)
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
#[path = "real_fifo_tests.rs"]
mod tests;
