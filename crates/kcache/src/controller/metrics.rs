//! [`Metrics`]: counters of what the reconcile workers did.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use crate::histogram::{AtomicHistogram, HistogramSnapshot, RECONCILE_TIME_BUCKETS};

/// Seconds per reconcile, in controller-runtime's buckets.
#[derive(Debug)]
pub(super) struct ReconcileTime(pub(super) AtomicHistogram);

impl Default for ReconcileTime {
    fn default() -> Self {
        Self(AtomicHistogram::new(RECONCILE_TIME_BUCKETS))
    }
}

/// Counts the workers inside a reconcile: up on creation, down on drop (so a reconcile whose
/// future is dropped, or that panics, still leaves).
pub(super) struct Active<'a>(&'a AtomicU64);

impl<'a> Active<'a> {
    pub(super) fn enter(counter: &'a AtomicU64) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    /// Workers inside a reconcile now.
    pub(super) active: AtomicU64,
    pub(super) reconcile_time: ReconcileTime,
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

impl Metrics {
    /// Workers reconciling right now (controller-runtime's `active_workers`): at most
    /// [`workers`](super::Config::workers).
    pub fn active_workers(&self) -> u64 {
        self.counters.active.load(Ordering::Relaxed)
    }

    /// Seconds per reconcile, whatever its outcome (controller-runtime's
    /// `reconcile_time_seconds`), in controller-runtime's buckets (5 ms … 60 s).
    pub fn reconcile_time(&self) -> HistogramSnapshot {
        self.counters.reconcile_time.0.snapshot()
    }
}
