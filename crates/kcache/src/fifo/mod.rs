//! Queues between the reflector and the informer: [`RealFifo`] (the informers' queue) and
//! [`DeltaFifo`] (kept for parity with client-go), both behind the [`Fifo`] trait; an
//! informer's [`QueueKind`] chooses between them.
//!
//! The reflector writes into a queue through [`ReflectorStore`]; one consumer (the informer)
//! takes changes out with [`Fifo::pop_batch`], applies them to its
//! [`ThreadSafeStore`](crate::store::ThreadSafeStore) and notifies handlers. What the
//! consumer's `process` callback receives depends on the queue:
//!
//! * [`RealFifo`]: up to `batch_size` (1000) **consecutive** deltas with **distinct keys**,
//!   oldest first — or a single non-batchable delta (`ReplacedAll`, `SyncAll`, `Bookmark`)
//!   alone. A batch never mixes deltas of the first relist with later ones.
//! * [`DeltaFifo`]: **all** queued deltas of **one key**, oldest first (at least one; never two
//!   consecutive `Deleted`).
//!
//! In both cases the consumer applies the deltas in order: `Added`/`Updated`/`Replaced`/`Sync`
//! upsert the object, `Deleted` removes the key (a [`DeltaObject::DeletedFinalStateUnknown`]
//! tombstone carries the last known state), `ReplacedAll` replaces the whole content,
//! `SyncAll` re-delivers every known object, `Bookmark` records a resourceVersion. The `bool`
//! passed with them says whether they belong to the initial list (the first `replace`, before
//! [`Fifo::has_synced`] turned true).
//!
//! # Example: the informer's consumer loop
//!
//! ```
//! use std::sync::Arc;
//! use kcache::fifo::{DeltaObject, DeltaType, Fifo, RealFifo};
//! use kcache::reflector::ReflectorStore;
//! use kcache::store::{Indexers, KeyFunc, ObjectKey, ThreadSafeStore, Transaction};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let key: KeyFunc<String> = Arc::new(|s: &String| Ok(ObjectKey::new(None, s)));
//! let store = ThreadSafeStore::without_resource_versions(key.clone(), Indexers::new());
//! let fifo = RealFifo::atomic(key);
//!
//! // The reflector's side.
//! fifo.replace(vec![Arc::new("a".to_string()), Arc::new("b".to_string())], "1".into())?;
//! fifo.delete(Arc::new("a".to_string()))?;
//! fifo.close();
//!
//! // The informer's side: apply each batch as one transaction, then notify handlers.
//! while let Ok(()) = fifo
//!     .pop_batch(|deltas, _is_in_initial_list| {
//!         let mut txns = Vec::new();
//!         for delta in deltas {
//!             match delta.object {
//!                 // Added, Updated, Replaced, Sync
//!                 DeltaObject::Object { key, obj } if delta.kind != DeltaType::Deleted => {
//!                     txns.push(Transaction::Upsert(key, obj));
//!                 }
//!                 DeltaObject::Object { key, .. }
//!                 | DeltaObject::DeletedFinalStateUnknown { key, .. } => {
//!                     txns.push(Transaction::Delete(key));
//!                 }
//!                 DeltaObject::ReplacedAll { objects, resource_version } => {
//!                     let list = objects.into_iter().map(|(_key, obj)| obj).collect();
//!                     let _previous = store.replace(list, resource_version).expect("keyed once");
//!                 }
//!                 DeltaObject::SyncAll => {}
//!                 DeltaObject::Bookmark { resource_version } => {
//!                     store.set_resource_version(resource_version);
//!                 }
//!             }
//!         }
//!         // `apply` returns each key's previous object: old vs new for `on_update`.
//!         let _previous = store.apply(txns);
//!     })
//!     .await
//! {}
//! assert_eq!(store.list_keys(), [ObjectKey::new(None, "b")]);
//! # Ok(()) }
//! ```

mod any_fifo;
mod core;
mod delta;
mod delta_fifo;
mod real_fifo;
mod synced;

use std::future::Future;

pub(crate) use any_fifo::AnyFifo;
pub use any_fifo::QueueKind;
pub use delta::{Delta, DeltaObject, DeltaType, Deltas};
pub use delta_fifo::{DeltaFifo, DeltaFifoConfig};
pub use real_fifo::{RealFifo, RealFifoConfig, RealFifoMode};

use crate::store::ReflectorStore;

/// The batch size client-go's RealFIFO uses (`defaultBatchSize`).
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// Why a pop returned without deltas.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The queue was closed and everything queued before has been popped.
    #[error("the queue is closed and drained")]
    Closed,
}

/// A queue the informer can drain: the write side is [`ReflectorStore`], the read side is
/// [`pop_batch`](Self::pop_batch). Implemented by [`RealFifo`] and [`DeltaFifo`] (and by the
/// informer's queue, either of them chosen at run time by a [`QueueKind`]).
///
/// There is meant to be **one** consumer. `process` callbacks must not call back into the
/// queue that invoked them (some queues hold their lock while `process` runs).
pub trait Fifo<K>: ReflectorStore<K> {
    /// Waits until deltas are queued, takes the next batch out and calls
    /// `process(deltas, is_in_initial_list)` with it; returns what `process` returned. See the
    /// [module documentation](self) for what a batch is for each queue.
    ///
    /// # Errors
    /// [`Error::Closed`] once the queue is closed **and** empty; until then it keeps
    /// delivering what was queued before `close`.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future while it waits removes nothing. Once deltas are taken,
    /// `process` runs synchronously to completion within the same poll.
    fn pop_batch<F, R>(&self, process: F) -> impl Future<Output = Result<R, Error>> + Send
    where
        F: FnOnce(Deltas<K>, bool) -> R + Send,
        R: Send;

    /// True once the first `replace`'s deltas have all been popped **and** processed, or when
    /// an add/update/delete came before any `replace`. Never blocks.
    fn has_synced(&self) -> bool;

    /// Closes the queue: writes fail with [`StoreError::Closed`](crate::store::StoreError),
    /// pops drain what is left and then fail with [`Error::Closed`]; waiting pops wake up.
    fn close(&self);

    /// Whether [`close`](Self::close) was called.
    fn is_closed(&self) -> bool;

    /// The number of queued entries (deltas for [`RealFifo`], keys for [`DeltaFifo`]). Never
    /// blocks.
    fn len(&self) -> usize;

    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod test_util;
