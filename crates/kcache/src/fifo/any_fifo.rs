//! [`AnyFifo`]: the queue an informer chose ([`QueueKind`]), behind one [`Fifo`].

use std::{fmt, sync::Arc};

use super::{DeltaFifo, DeltaFifoConfig, Deltas, Error, Fifo, RealFifo};
use crate::{
    store::{KeyFunc, KeyListerGetter},
    store::{ReflectorStore, StoreError},
};

/// Which queue sits between the reflector and the indexer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueKind {
    /// client-go 1.36's informer queue: an atomic [`RealFifo`] (one `ReplacedAll` per relist,
    /// batched pops, lock released while processing).
    #[default]
    RealFifo,
    /// A non-atomic [`RealFifo`] (tombstones + `Replaced` per object on relist).
    RealFifoNonAtomic,
    /// The legacy [`DeltaFifo`] (one entry per key).
    DeltaFifo,
}

/// One of the informer's queues, chosen at run time by a [`QueueKind`]; every [`Fifo`] and
/// [`ReflectorStore`] call goes to the queue inside. A cheap-`Clone` handle, like the queues.
/// The informer's own: users pick a queue with [`QueueKind`], or use [`RealFifo`] and
/// [`DeltaFifo`] directly.
pub(crate) enum AnyFifo<K> {
    /// A [`RealFifo`], atomic or not.
    Real(RealFifo<K>),
    /// A [`DeltaFifo`].
    Delta(DeltaFifo<K>),
}

impl<K: Send + Sync + 'static> AnyFifo<K> {
    /// The queue `kind` names, keyed by `key_func`. `known_objects` is the consumer's cache
    /// (the informer's indexer): the non-atomic queues check vanished and resynced keys
    /// against it; the atomic [`RealFifo`] does not need it.
    pub(crate) fn new(
        kind: QueueKind,
        key_func: KeyFunc<K>,
        known_objects: Arc<dyn KeyListerGetter<K>>,
    ) -> Self {
        match kind {
            QueueKind::RealFifo => Self::Real(RealFifo::atomic(key_func)),
            QueueKind::RealFifoNonAtomic => {
                Self::Real(RealFifo::non_atomic(key_func, known_objects))
            }
            QueueKind::DeltaFifo => Self::Delta(DeltaFifo::new(
                key_func,
                DeltaFifoConfig {
                    known_objects: Some(known_objects),
                    emit_replaced: true,
                },
            )),
        }
    }

    /// Raises `signal` once, when the queue turns synced (see [`Fifo::has_synced`]).
    pub(crate) fn set_synced_signal(&self, signal: Arc<tokio::sync::Notify>) {
        match self {
            Self::Real(q) => q.set_synced_signal(signal),
            Self::Delta(q) => q.set_synced_signal(signal),
        }
    }

    /// Whether every batch [`pop_batch`](Fifo::pop_batch) hands out concerns one key (a
    /// [`DeltaFifo`]), so that its deltas must be applied one by one.
    pub(crate) fn pops_one_key(&self) -> bool {
        matches!(self, Self::Delta(_))
    }
}

impl<K> Clone for AnyFifo<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Real(q) => Self::Real(q.clone()),
            Self::Delta(q) => Self::Delta(q.clone()),
        }
    }
}

impl<K> fmt::Debug for AnyFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Real(q) => f.debug_tuple("Real").field(q).finish(),
            Self::Delta(q) => f.debug_tuple("Delta").field(q).finish(),
        }
    }
}

impl<K: Send + Sync + 'static> ReflectorStore<K> for AnyFifo<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        match self {
            Self::Real(q) => q.add(obj),
            Self::Delta(q) => q.add(obj),
        }
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        match self {
            Self::Real(q) => q.update(obj),
            Self::Delta(q) => q.update(obj),
        }
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        match self {
            Self::Real(q) => q.delete(obj),
            Self::Delta(q) => q.delete(obj),
        }
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: String) -> Result<(), StoreError> {
        match self {
            Self::Real(q) => q.replace(list, resource_version),
            Self::Delta(q) => q.replace(list, resource_version),
        }
    }

    fn resync(&self) -> Result<(), StoreError> {
        match self {
            Self::Real(q) => q.resync(),
            Self::Delta(q) => q.resync(),
        }
    }

    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        match self {
            Self::Real(q) => q.bookmark(resource_version),
            Self::Delta(q) => q.bookmark(resource_version),
        }
    }
}

impl<K: Send + Sync + 'static> Fifo<K> for AnyFifo<K> {
    async fn pop_batch<F, R>(&self, process: F) -> Result<R, Error>
    where
        F: FnOnce(Deltas<K>, bool) -> R + Send,
        R: Send,
    {
        match self {
            Self::Real(q) => q.pop_batch(process).await,
            Self::Delta(q) => q.pop_batch(process).await,
        }
    }

    fn has_synced(&self) -> bool {
        match self {
            Self::Real(q) => q.has_synced(),
            Self::Delta(q) => q.has_synced(),
        }
    }

    fn close(&self) {
        match self {
            Self::Real(q) => q.close(),
            Self::Delta(q) => q.close(),
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            Self::Real(q) => q.is_closed(),
            Self::Delta(q) => q.is_closed(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Real(q) => q.len(),
            Self::Delta(q) => q.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ObjectKey, ThreadSafeStore};

    #[tokio::test]
    async fn a_delta_fifo_kind_pops_one_key_and_forwards_writes() {
        let key: KeyFunc<String> = Arc::new(|s: &String| Ok(ObjectKey::new(None, s)));
        let cache = ThreadSafeStore::without_resource_versions(key.clone(), Default::default());
        let fifo = AnyFifo::new(QueueKind::DeltaFifo, key.clone(), Arc::new(cache.clone()));
        assert!(fifo.pops_one_key());
        assert!(!AnyFifo::new(QueueKind::RealFifo, key, Arc::new(cache)).pops_one_key());
        fifo.add(Arc::new("a".to_string())).unwrap();
        let n = fifo
            .pop_batch(|deltas, _initial| deltas.len())
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
}
