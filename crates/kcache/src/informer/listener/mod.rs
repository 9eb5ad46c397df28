//! Per-handler listeners: each registered handler has its own buffer and task.
//!
//! A note on the buffer bound. client-go's per-handler buffer is unbounded on purpose: the
//! informer must never block on a slow handler (that would stall the FIFO and every other
//! handler), and it must never drop a notification. We keep that default
//! ([`BufferMode::Unbounded`]) — its memory is one pointer-sized notification per pending change
//! (objects are shared with the cache) and its depth is visible through
//! [`HandlerRegistration::pending`](super::HandlerRegistration::pending) — and add
//! [`BufferMode::Coalescing`], whose memory is bounded by the number of distinct keys: while a
//! key waits, newer changes to it replace the pending one, so the handler sees the latest state
//! and skips intermediate ones.
//!
//! The buffers ([`BufferMode`], and the notifications they hold) are in `buffer`; the listener
//! that owns one, its task and its resync schedule are here.

mod buffer;
mod delivery;
mod usage;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use super::handler::EventHandler;
use buffer::Buffer;
pub use buffer::BufferMode;
pub(crate) use buffer::Notification;
pub use delivery::{Delivery, QUICK_CALLS_TO_MOVE, SLOW_CALL};
use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};

/// Counts what may still call a listener's handler: its task (from the moment it is spawned
/// until it ends, or is dropped unpolled) and each batch it hands to the blocking pool (until
/// that batch returns). Zero, once the listener is closed, means the handler is called no more.
#[derive(Default)]
pub(crate) struct Activity {
    count: AtomicUsize,
    idle: Notify,
}

impl Activity {
    fn enter(self: &Arc<Self>) -> ActiveGuard {
        self.count.fetch_add(1, Ordering::SeqCst);
        ActiveGuard(Arc::clone(self))
    }

    /// Waits until nothing may call the handler. Cancel safe.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One unit of [`Activity`], released on drop (also when a task is dropped or panics).
struct ActiveGuard(Arc<Activity>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A handler with its buffer, resync schedule and sync tracking.
pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    /// The handler's name (`handler-N` unless the registration named it).
    pub(crate) name: Arc<str>,
    /// The largest buffer depth reached.
    max_depth: AtomicUsize,
    handler: Box<dyn EventHandler<K>>,
    buffer: Mutex<Buffer<K>>,
    wake: Notify,
    closed: AtomicBool,
    /// Initial-list adds queued but not yet handled.
    pending_initial: AtomicUsize,
    delivered: AtomicU64,
    pub(crate) requested_resync: Duration,
    /// Where the handler is called: set by the registration, `on_pool` once it runs there.
    delivery: Delivery,
    on_pool: AtomicBool,
    /// An adaptive handler was slow on its task: it stays on the pool.
    demoted: AtomicBool,
    /// An adaptive handler's quick calls in a row on the pool, before it moves to its task.
    quick_calls: std::sync::atomic::AtomicU32,
    /// Held by whoever is delivering (the writer's flush, the listener's task, or a batch on
    /// the blocking pool): one delivery at a time, in order.
    busy: AtomicBool,
    resync: Mutex<ResyncState>,
    /// Poked whenever sync progress may have changed (shared with the informer).
    sync_notify: Arc<Notify>,
    /// What may still call the handler (for a removal that waits).
    pub(crate) activity: Arc<Activity>,
}

struct ResyncState {
    period: Duration,
    next: Instant,
}

impl<K: Send + Sync + 'static> Listener<K> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        name: Option<String>,
        handler: Box<dyn EventHandler<K>>,
        mode: BufferMode,
        delivery: Delivery,
        requested_resync: Duration,
        resync_period: Duration,
        sync_notify: Arc<Notify>,
    ) -> Self {
        Self {
            id,
            name: name.unwrap_or_else(|| format!("handler-{id}")).into(),
            max_depth: AtomicUsize::new(0),
            handler,
            buffer: Mutex::new(Buffer::new(mode)),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            pending_initial: AtomicUsize::new(0),
            delivered: AtomicU64::new(0),
            requested_resync,
            delivery,
            on_pool: AtomicBool::new(delivery != Delivery::Inline),
            demoted: AtomicBool::new(false),
            quick_calls: std::sync::atomic::AtomicU32::new(0),
            busy: AtomicBool::new(false),
            resync: Mutex::new(ResyncState {
                period: resync_period,
                next: Instant::now() + resync_period,
            }),
            sync_notify,
            activity: Arc::new(Activity::default()),
        }
    }

    /// Queues a notification and wakes the listener's task; never blocks on the handler.
    pub(crate) fn add(&self, n: Notification<K>) {
        self.push(n);
        self.wake.notify_one();
    }

    /// Queues a notification without waking anything: the informer's writer calls
    /// [`flush`](Self::flush) once its batch is distributed.
    pub(crate) fn push(&self, n: Notification<K>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        if matches!(n, Notification::Add { initial: true, .. }) {
            self.pending_initial.fetch_add(1, Ordering::AcqRel);
        }
        let depth = {
            let mut buffer = self.buffer.lock();
            buffer.push(n);
            buffer.len()
        };
        self.max_depth.fetch_max(depth, Ordering::Relaxed);
    }

    /// The largest [`pending`](Self::pending) reached so far.
    pub(crate) fn max_pending(&self) -> usize {
        self.max_depth.load(Ordering::Relaxed)
    }

    /// Pending notifications (keys, in coalescing mode).
    pub(crate) fn pending(&self) -> usize {
        self.buffer.lock().len()
    }

    /// Notifications handed to the handler so far.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// Whether every initial-list add queued so far has been handled.
    pub(crate) fn initial_done(&self) -> bool {
        self.pending_initial.load(Ordering::Acquire) == 0
    }

    /// Closes the listener: from the next notification on its handler is not called. A call
    /// in progress goes on; [`Activity::idle`] waits for it.
    pub(crate) fn close(&self) {
        // SeqCst with the task's start (`Activity::enter`) and its checks of `closed`: a task
        // that `Activity::idle` did not see running is sure to see the listener closed.
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        self.sync_notify.notify_waiters();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Whether this listener's resync is due at `now`.
    pub(crate) fn resync_due(&self, now: Instant) -> bool {
        let r = self.resync.lock();
        !r.period.is_zero() && now >= r.next
    }

    pub(crate) fn schedule_next_resync(&self, now: Instant) {
        let mut r = self.resync.lock();
        r.next = now + r.period;
    }

    pub(crate) fn set_resync_period(&self, period: Duration) {
        self.resync.lock().period = period;
    }

    pub(crate) fn resync_period(&self) -> Duration {
        self.resync.lock().period
    }
}

/// client-go's `determineResyncPeriod`: 0 stays 0; an informer that does not resync gives 0;
/// otherwise at least the informer's check period.
pub(crate) fn determine_resync_period(desired: Duration, check: Duration) -> Duration {
    if desired.is_zero() {
        Duration::ZERO
    } else if check.is_zero() {
        tracing::warn!(
            ?desired,
            "resync period ignored: this informer does not resync"
        );
        Duration::ZERO
    } else if desired < check {
        tracing::warn!(
            ?desired,
            ?check,
            "resync period raised to the informer's resync check period"
        );
        check
    } else {
        desired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{informer::HandlerFns, store::ObjectKey, testing::config_map};
    use k8s_openapi::api::core::v1::ConfigMap;

    fn listener(name: Option<&str>) -> Arc<Listener<ConfigMap>> {
        Arc::new(Listener::new(
            7,
            name.map(str::to_owned),
            Box::new(HandlerFns::<ConfigMap>::new()),
            BufferMode::Unbounded,
            Delivery::Adaptive,
            Duration::ZERO,
            Duration::ZERO,
            Arc::new(Notify::new()),
        ))
    }

    fn add(l: &Listener<ConfigMap>, name: &str) {
        l.add(Notification::Add {
            key: ObjectKey::new(Some("ns"), name),
            obj: Arc::new(config_map(name)),
            initial: false,
        });
    }

    #[test]
    fn a_listener_is_named_after_its_registration_or_handler_n() {
        assert_eq!(&*listener(None).name, "handler-7");
        assert_eq!(&*listener(Some("audit")).name, "audit");
    }

    #[tokio::test]
    async fn max_pending_keeps_the_deepest_backlog_after_it_drains() {
        let l = listener(None);
        for n in ["a", "b", "c", "d", "e"] {
            add(&l, n);
        }
        assert_eq!((l.pending(), l.max_pending()), (5, 5));
        let task = tokio::spawn(Arc::clone(&l).run());
        while l.delivered() < 5 {
            tokio::task::yield_now().await;
        }
        assert_eq!((l.pending(), l.max_pending()), (0, 5));
        add(&l, "f");
        while l.delivered() < 6 {
            tokio::task::yield_now().await;
        }
        assert_eq!(l.max_pending(), 5, "a shallower backlog leaves the maximum");
        l.close();
        task.await.unwrap();
    }

    #[test]
    fn resync_period_rules_follow_client_go() {
        let s = Duration::from_secs;
        assert_eq!(determine_resync_period(s(0), s(10)), s(0));
        assert_eq!(
            determine_resync_period(s(5), s(0)),
            s(0),
            "an informer without resync"
        );
        assert_eq!(
            determine_resync_period(s(5), s(10)),
            s(10),
            "raised to the check period"
        );
        assert_eq!(determine_resync_period(s(30), s(10)), s(30));
    }
}
