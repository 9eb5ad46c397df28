//! The bookkeeping behind `has_synced` and the blocking pop, shared by both FIFOs.

use std::{
    pin::pin,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use tokio::sync::Notify;

/// client-go's `populated` / `initialPopulationCount` pair. Lives inside a FIFO's mutex; the
/// result is published to the [`Signals`] (an atomic, so that `has_synced` never takes the
/// lock, and the consumer's synced signal, raised once when it turns true).
#[derive(Debug, Default)]
pub(crate) struct SyncTracker {
    /// A replace, add, update or delete has happened.
    populated: bool,
    /// Entries of the first replace not yet popped and processed.
    initial_remaining: usize,
}

impl SyncTracker {
    /// An add/update/delete: if nothing was populated yet, there is no initial list to wait for.
    pub(crate) fn on_write(&mut self, synced: &Signals) {
        self.populated = true;
        self.publish(synced);
    }

    /// A replace that left `queued` entries in the queue: the first one defines the initial list.
    pub(crate) fn on_replace(&mut self, queued: usize, synced: &Signals) {
        if !self.populated {
            self.populated = true;
            self.initial_remaining = queued;
            self.publish(synced);
        }
    }

    /// How many of the next `taken` entries belong to the initial list (what to pass to
    /// [`on_processed`](Self::on_processed) afterwards).
    pub(crate) fn initial_limit(&self) -> Option<usize> {
        (self.initial_remaining > 0).then_some(self.initial_remaining)
    }

    /// `counted` initial entries were processed.
    pub(crate) fn on_processed(&mut self, counted: usize, synced: &Signals) {
        self.initial_remaining = self.initial_remaining.saturating_sub(counted);
        self.publish(synced);
    }

    fn publish(&self, signals: &Signals) {
        if self.populated
            && self.initial_remaining == 0
            && !signals.synced.swap(true, Ordering::AcqRel)
            && let Some(signal) = signals.synced_signal.get()
        {
            signal.notify_waiters();
        }
    }
}

/// The lock-free views of a FIFO (`has_synced`, `len`) and its wake-up signal.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    pub(crate) synced: AtomicBool,
    /// Raised (`notify_waiters`) when `synced` turns true: the consumer's wake-up, so that it
    /// learns of a sync that needed no pop (an empty initial list) without polling the FIFO.
    synced_signal: OnceLock<Arc<Notify>>,
    pub(crate) len: AtomicUsize,
    pub(crate) closed: AtomicBool,
    notify: Notify,
}

/// What one attempt to pop found.
pub(crate) enum Attempt<T> {
    /// Deltas were taken and processed.
    Done(T),
    /// Nothing queued and the queue is closed.
    Closed,
    /// Nothing queued yet.
    Empty,
}

impl Signals {
    /// Sets the signal raised when the FIFO has synced; only the first call counts.
    pub(crate) fn set_synced_signal(&self, signal: Arc<Notify>) {
        let _ = self.synced_signal.set(signal);
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub(crate) fn set_len(&self, len: usize) {
        self.len.store(len, Ordering::Release);
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Wakes every waiting pop. Call after changing the queue (the lock may still be held).
    pub(crate) fn wake(&self) {
        self.notify.notify_waiters();
    }

    /// Calls `attempt` until it finds deltas or a closed queue, sleeping on the notification in
    /// between. The waiter is registered (`enable`) *before* each attempt, so a wake-up between
    /// the attempt and the sleep is not lost.
    pub(crate) async fn pop_with<T>(&self, mut attempt: impl FnMut() -> Attempt<T>) -> Option<T> {
        loop {
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            // Nothing produced by the attempt may live across the await (keeps the future Send).
            match attempt() {
                Attempt::Done(value) => return Some(value),
                Attempt::Closed => return None,
                Attempt::Empty => {}
            }
            notified.await;
        }
    }
}
