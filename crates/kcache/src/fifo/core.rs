//! [`Core`]: what both FIFOs share — the key function, the state behind one mutex, the closed
//! flag and the lock-free signals (`has_synced`, `len`, wake-ups) — so that [`RealFifo`] and
//! [`DeltaFifo`] differ only in what their state holds and how a delta joins it.
//!
//! [`RealFifo`]: super::RealFifo
//! [`DeltaFifo`]: super::DeltaFifo

use std::sync::atomic::Ordering;

use parking_lot::{Mutex, MutexGuard};

use super::synced::{Attempt, Signals};
use crate::{
    reflector::StoreError,
    store::{KeyFunc, ObjectKey},
};

/// A FIFO's shared machinery around its state `S`.
///
/// The closed flag is stored once, in [`Signals`]; it is only set while the state lock is
/// held, so a writer that checks it under the lock ([`Core::lock_open`]) never appends to a
/// closed queue, and lock-free readers ([`Core::is_closed`]) see it without the lock.
pub(super) struct Core<K, S> {
    key_func: KeyFunc<K>,
    /// The FIFO's state (its tests probe whether it is locked).
    pub(super) state: Mutex<S>,
    signals: Signals,
}

impl<K, S> Core<K, S> {
    /// A core around the empty `state`.
    pub(super) fn new(key_func: KeyFunc<K>, state: S) -> Self {
        Self {
            key_func,
            state: Mutex::new(state),
            signals: Signals::default(),
        }
    }

    /// The object's key.
    pub(super) fn key(&self, obj: &K) -> Result<ObjectKey, StoreError> {
        Ok((self.key_func)(obj)?)
    }

    /// Locks the state, open or closed (readers and pops).
    pub(super) fn lock(&self) -> MutexGuard<'_, S> {
        self.state.lock()
    }

    /// Locks the state unless the queue is closed (writers).
    pub(super) fn lock_open(&self) -> Result<MutexGuard<'_, S>, StoreError> {
        let state = self.state.lock();
        if self.signals.is_closed() {
            return Err(StoreError::Closed);
        }
        Ok(state)
    }

    /// What a pop that found nothing queued reports: the queue is drained for good once
    /// closed, else it waits.
    pub(super) fn nothing_queued<T>(&self) -> Attempt<T> {
        if self.signals.is_closed() {
            Attempt::Closed
        } else {
            Attempt::Empty
        }
    }

    /// Publishes the new length and wakes waiting pops (call with the lock held).
    pub(super) fn published(&self, len: usize) {
        self.signals.set_len(len);
        self.signals.wake();
    }

    /// Closes the queue: writes fail from now on, pops drain what is queued and then fail.
    pub(super) fn close(&self) {
        let _state = self.state.lock();
        self.signals.closed.store(true, Ordering::Release);
        self.signals.wake();
    }

    /// The lock-free views and the wake-up signal.
    pub(super) fn signals(&self) -> &Signals {
        &self.signals
    }

    /// Whether the queue is closed.
    pub(super) fn is_closed(&self) -> bool {
        self.signals.is_closed()
    }

    /// Whether the first replace's items have all been popped and processed.
    pub(super) fn has_synced(&self) -> bool {
        self.signals.has_synced()
    }

    /// The number of queued entries, as last published.
    pub(super) fn len(&self) -> usize {
        self.signals.len()
    }
}
