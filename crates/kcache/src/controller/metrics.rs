//! [`Metrics`]: counters of what the reconcile workers did.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) reconciles: AtomicU64,
    pub(super) succeeded: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) retried: AtomicU64,
    pub(super) gave_up: AtomicU64,
    pub(super) terminal: AtomicU64,
    pub(super) panicked: AtomicU64,
    pub(super) timed_out: AtomicU64,
}

impl Counters {
    pub(super) fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counters of a [`Controller`](super::Controller)'s reconciles; cheap to clone, shared with
/// the controller (read them while it runs).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    pub(super) counters: Arc<Counters>,
}

macro_rules! getter {
    ($($(#[$doc:meta])+ $name:ident)*) => {
        impl Metrics {
            $($(#[$doc])+ pub fn $name(&self) -> u64 {
                self.counters.$name.load(Ordering::Relaxed)
            })*
        }
    };
}

getter! {
    /// Reconciles started.
    reconciles
    /// Reconciles that returned `Ok`.
    succeeded
    /// Reconciles that failed: `Err` (terminal or not), panicked or timed out.
    failed
    /// Failed keys queued again (with backoff or after a delay).
    retried
    /// Keys given up: [`ErrorAction::GiveUp`](super::ErrorAction::GiveUp) or
    /// [`max_retries`](super::Config::max_retries) reached.
    gave_up
    /// Terminal errors (never retried).
    terminal
    /// Reconciles that panicked (caught, retried with backoff).
    panicked
    /// Reconciles cancelled by [`reconcile_timeout`](super::Config::reconcile_timeout).
    timed_out
}
