//! Where and when a listener's handler is called.
//!
//! The informer's writer (the reflector's task, see `informer/run.rs`) applies a batch to the
//! indexer, pushes its notifications into each listener's buffer and then calls
//! [`Listener::flush`]. For a [`Delivery::Inline`] handler (declared never to block, like the
//! controllers' enqueueing handlers) that is idle, the writer calls the handler itself, right
//! there: no task is woken for the event. Every other handler has its listener's task woken,
//! which calls a [`Delivery::Adaptive`] handler on itself while the handler is quick and hands
//! batches to tokio's blocking pool once it was slow; a [`Delivery::BlockingPool`] handler is
//! always called there. A handler that blocks therefore never holds the writer, nor the other
//! handlers (client-go's guarantee: each listener on its own goroutine). One flag, `busy`, is
//! held by whoever delivers, so a handler sees its notifications one at a time and in order,
//! whoever calls it.
//!
//! A [`Delivery::Adaptive`] handler starts on the blocking pool and moves to its listener's task
//! after [`QUICK_CALLS_TO_MOVE`] quick calls in a row there: a handler that blocks on its first
//! calls (waiting for a gate, a lock, I/O) never holds a runtime worker — a blocked worker can
//! strand the task tokio put in its LIFO slot, which other workers cannot steal. It moves back
//! to the pool for good at its first call on the task that takes longer than [`SLOW_CALL`], or
//! that panics with tokio's "blocking inside the runtime" message (a `blocking_send`, a
//! `Handle::block_on`): that notification is then delivered again, on the pool — the one case
//! where a handler sees a notification twice. On Linux a long call counts as slow only when the
//! thread waited or computed in it, not when the OS ran other threads meanwhile (see
//! `usage.rs`).

use std::{
    panic::AssertUnwindSafe,
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use tracing::{error, info};

use super::{
    Listener, Notification,
    usage::{Usage, held_against},
};

/// A handler call longer than this moves a [`Delivery::Adaptive`] handler to the blocking
/// pool: about ten times what the informer's own work per event costs, so a quick handler
/// never holds the writer (and the events behind it) for long.
pub const SLOW_CALL: Duration = Duration::from_millis(1);

/// Quick calls in a row (each under [`SLOW_CALL`]) after which a [`Delivery::Adaptive`] handler
/// leaves the blocking pool for its listener's task.
pub const QUICK_CALLS_TO_MOVE: u32 = 8;

/// Where a handler is called ([`HandlerConfig::delivery`](crate::informer::HandlerConfig)).
///
/// ```
/// use kcache::informer::{Delivery, HandlerConfig};
///
/// // A handler that waits on I/O or uses `blocking_send`: always on the blocking pool.
/// let config = HandlerConfig::default().delivery(Delivery::BlockingPool);
/// assert_eq!(config.delivery, Delivery::BlockingPool);
/// assert_eq!(HandlerConfig::default().delivery, Delivery::Adaptive);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// On tokio's blocking pool for its first [`QUICK_CALLS_TO_MOVE`] quick calls, then on the
    /// listener's own async task while every call stays under [`SLOW_CALL`] (on Linux: a
    /// longer call counts only if the handler waited or computed in it, not if the OS ran other
    /// threads meanwhile); from the first slow call there on (or the first that blocks inside
    /// the runtime), on the pool for good.
    /// That first slow call holds one runtime worker for its length: a handler that may block
    /// at any time, for long, belongs on [`Delivery::BlockingPool`].
    #[default]
    Adaptive,
    /// On the informer's writer task, right after the cache is updated (no task wake-up per
    /// event), or on the listener's task when a delivery is already in progress; never moved.
    /// Only for handlers that never block, e.g. one that adds keys to a work queue: a blocking
    /// call here holds the informer's writer, every other handler and every event behind it.
    Inline,
    /// Always on tokio's blocking pool (a thread hop per batch): for handlers that block.
    BlockingPool,
}

/// The end of a batch delivered off the pool.
enum Quick<K> {
    Done,
    /// The listener was closed: stop.
    Closed,
    /// The handler turned out slow: these are left, for the pool.
    ToPool(Vec<Notification<K>>),
}

impl<K: Send + Sync + 'static> Listener<K> {
    /// Delivers what the writer just pushed: on the caller's task for an idle
    /// [`Delivery::Inline`] listener, else by waking the listener's task.
    pub(crate) fn flush(self: &Arc<Self>) {
        if self.buffer.lock().len() == 0 {
            return;
        }
        if self.delivery != Delivery::Inline || !self.try_begin() {
            self.wake.notify_one();
            return;
        }
        let active = self.activity.enter();
        let (batch, initial) = self.buffer.lock().drain();
        match self.deliver_quick(batch) {
            Quick::Done | Quick::Closed => {
                self.initial_handled(initial);
                drop(active);
                self.end();
            }
            Quick::ToPool(rest) => {
                drop(self.deliver_on_pool(rest, initial));
            }
        }
    }

    /// Delivers notifications until closed. The listener counts as active (see
    /// [`Activity`](super::Activity)) from this call, before the future is first polled, until
    /// the future ends or is dropped.
    pub(crate) fn run(self: Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let active = self.activity.enter();
        async move {
            let _active = active;
            self.run_loop().await;
        }
    }

    async fn run_loop(self: Arc<Self>) {
        loop {
            if !self.try_begin() {
                // Whoever delivers wakes this task when it ends with something pending.
                if self.is_closed() {
                    return;
                }
                self.wake.notified().await;
                continue;
            }
            let (batch, initial) = self.buffer.lock().drain();
            if batch.is_empty() && initial == 0 {
                self.busy.store(false, Ordering::SeqCst);
                if self.is_closed() {
                    return;
                }
                self.wake.notified().await;
                continue;
            }
            let rest = if self.on_pool.load(Ordering::Acquire) {
                batch
            } else {
                match self.deliver_quick(batch) {
                    Quick::Done => Vec::new(),
                    Quick::Closed => {
                        self.initial_handled(initial);
                        self.end();
                        return;
                    }
                    Quick::ToPool(rest) => rest,
                }
            };
            if rest.is_empty() {
                self.initial_handled(initial);
                self.end();
            } else {
                // The batch ends the delivery itself, also if this task is dropped meanwhile.
                if let Some(batch) = self.deliver_on_pool(rest, initial) {
                    let _ = batch.await;
                }
            }
            if self.is_closed() {
                return;
            }
            // A batch costs one unit of the task's coop budget: the task yields once the budget
            // is spent. Not `yield_now`: a yield after every batch leaves the worker searching
            // for work when it polls the deferred task again, and tokio's last searcher wakes a
            // parked worker — a futex wake and two context switches per event.
            tokio::task::coop::consume_budget().await;
        }
    }

    fn try_begin(&self) -> bool {
        self.busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Ends a delivery; wakes the listener's task when something is pending (or to let it
    /// see the listener closed).
    fn end(&self) {
        self.busy.store(false, Ordering::SeqCst);
        if self.buffer.lock().len() > 0 || self.is_closed() {
            self.wake.notify_one();
        }
    }

    fn initial_handled(&self, initial: usize) {
        if initial > 0 {
            self.pending_initial.fetch_sub(initial, Ordering::AcqRel);
            self.sync_notify.notify_waiters();
        }
    }

    /// Delivers `batch` on the blocking pool and then ends the delivery. The batch counts as
    /// active until it returns. Without a runtime to spawn on, delivers here.
    fn deliver_on_pool(
        self: &Arc<Self>,
        batch: Vec<Notification<K>>,
        initial: usize,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let this = Arc::clone(self);
        let active = self.activity.enter();
        // The handler's log lines keep the informer's span (and a scoped subscriber).
        let span = tracing::Span::current();
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        let job = move || {
            let _active = active;
            tracing::dispatcher::with_default(&dispatch, || {
                span.in_scope(|| this.deliver_all(batch));
            });
            this.initial_handled(initial);
            this.end();
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Some(runtime.spawn_blocking(job)),
            Err(_) => {
                job();
                None
            }
        }
    }

    /// Delivers on the pool: every notification, unless the listener is closed meanwhile. An
    /// adaptive handler on probation counts its quick calls here.
    fn deliver_all(&self, batch: Vec<Notification<K>>) {
        let probation =
            self.delivery == Delivery::Adaptive && !self.demoted.load(Ordering::Acquire);
        for n in batch {
            if self.is_closed() {
                return;
            }
            let started = Instant::now();
            let _ = self.deliver(n, false);
            self.delivered.fetch_add(1, Ordering::Relaxed);
            if probation {
                if started.elapsed() > SLOW_CALL {
                    self.quick_calls.store(0, Ordering::Relaxed);
                } else if self.quick_calls.fetch_add(1, Ordering::Relaxed) + 1
                    >= QUICK_CALLS_TO_MOVE
                {
                    // From the next batch on (this one stays here, in order).
                    self.on_pool.store(false, Ordering::Release);
                }
            }
        }
    }

    /// Delivers on the calling task while the handler stays quick.
    fn deliver_quick(&self, batch: Vec<Notification<K>>) -> Quick<K> {
        let adaptive = self.delivery == Delivery::Adaptive;
        let batch_started = Instant::now();
        let account = adaptive.then(Usage::of_this_thread).flatten();
        let mut batch = batch.into_iter();
        while let Some(n) = batch.next() {
            if self.is_closed() {
                return Quick::Closed;
            }
            let started = Instant::now();
            match self.deliver(n, true) {
                Ok(()) => {
                    self.delivered.fetch_add(1, Ordering::Relaxed);
                    let took = started.elapsed();
                    if took > SLOW_CALL
                        && adaptive
                        && held_against(account, Usage::of_this_thread(), started - batch_started)
                    {
                        self.move_to_pool(&format!("a call took {took:?}"));
                        let rest: Vec<_> = batch.collect();
                        return if rest.is_empty() {
                            Quick::Done
                        } else {
                            Quick::ToPool(rest)
                        };
                    }
                }
                Err(again) => {
                    self.move_to_pool("it blocked inside the async runtime");
                    return Quick::ToPool(std::iter::once(again).chain(batch).collect());
                }
            }
        }
        Quick::Done
    }

    fn move_to_pool(&self, why: &str) {
        self.on_pool.store(true, Ordering::Release);
        if !self.demoted.swap(true, Ordering::AcqRel) {
            info!(handler = %self.name, why, "event handler moved to the blocking pool for good");
        }
    }

    /// Calls the handler. A panic is logged and the notification dropped for this handler —
    /// except, off the pool, tokio's "blocking inside the runtime" panic: then the
    /// notification comes back, to be delivered again on the pool.
    fn deliver(&self, n: Notification<K>, off_pool: bool) -> Result<(), Notification<K>> {
        let handler = &self.handler;
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| match &n {
            Notification::Add { obj, initial, .. } => handler.on_add(obj, *initial),
            Notification::Update { old, new, .. } => handler.on_update(old, new),
            Notification::Delete { obj, .. } => handler.on_delete(obj),
        }));
        let Err(payload) = result else {
            return Ok(());
        };
        let panic = panic_message(payload.as_ref());
        if off_pool && self.delivery == Delivery::Adaptive && panic.contains(TOKIO_BLOCKING_PANIC) {
            return Err(n);
        }
        let key = match &n {
            Notification::Add { key, .. }
            | Notification::Update { key, .. }
            | Notification::Delete { key, .. } => key,
        };
        error!(handler = %self.name, %key, panic, "event handler panicked; the notification is dropped for this handler");
        Ok(())
    }
}

/// What tokio's panics say when a runtime thread blocks (`blocking_send`, `blocking_recv`,
/// `Handle::block_on`, dropping a runtime).
const TOKIO_BLOCKING_PANIC: &str = "being used to drive asynchronous tasks";

/// The message a panic was raised with (`panic!("…")`'s text), or a placeholder for a payload
/// of another type.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a non-string panic payload"
    }
}
