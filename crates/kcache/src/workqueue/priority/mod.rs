//! A rate-limited, delaying work queue that hands out the highest priority first:
//! [`PriorityQueue`] (controller-runtime's `pkg/controller/priorityqueue`, the default queue of
//! controller-runtime ≥ 0.23).
//!
//! The rules, each pinned by a unit test of the same name:
//!
//! - **Highest priority first, FIFO within a priority**: [`get`](PriorityQueue::get) hands out
//!   the ready item with the highest priority; among equal priorities, the one that became
//!   ready first.
//! - **One entry per item**: adding an item that is already queued (or waiting for its delay)
//!   keeps one entry with the *higher* of the two priorities and the *earlier* of the two ready
//!   times (a plain add means "now"). The entry keeps its place among items of its priority.
//! - **Stingy**: an item a worker holds is never handed out again until that worker calls
//!   [`done`](PriorityQueue::done); an item added while it is held is handed out after `done`,
//!   at the priority it was re-added with.
//! - **Delays and rate limits**: [`add_after`](PriorityQueue::add_after) and
//!   [`add_rate_limited`](PriorityQueue::add_rate_limited) take a priority too
//!   ([`AddConfig`]); a delayed item takes its place among the ready items when its time comes.
//! - **Shutdown**, as [`Queue`](super::Queue): new items are refused with a
//!   [`ShutDownError`], items waiting for a delay are dropped, workers drain what is ready and
//!   then see `None`; [`shutdown_with_drain`](PriorityQueue::shutdown_with_drain) also waits for
//!   the items in flight.
//!
//! Priorities are plain `i32`s. A controller uses [`NORMAL`] for changes and [`LOW`] for the
//! objects of an informer's initial list and for resyncs (old and new object with the same
//! resourceVersion), as controller-runtime's handlers do, so that an object created right
//! after a relist of 10,000 objects is reconciled before them.
//!
//! Metrics go to the same [`MetricsProvider`](super::MetricsProvider) as the other queues:
//! depth (ready items), adds (items that became ready), queue latency (ready → `get`), work
//! duration (`get` → `done`), the two unfinished-work gauges and retries (every add with a
//! delay or a rate limit).
//!
//! ```
//! use kcache::workqueue::{PriorityQueue, priority};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let (queue, driver) = PriorityQueue::<&str>::new();
//! tokio::spawn(driver);
//!
//! queue.add_with_priority("relisted-a", priority::LOW).unwrap();
//! queue.add_with_priority("relisted-b", priority::LOW).unwrap();
//! queue.add("created").unwrap(); // priority::NORMAL
//! // Raised: still one entry, and it keeps its place (it was added before "created").
//! queue.add_with_priority("relisted-b", priority::NORMAL).unwrap();
//!
//! assert_eq!(queue.get_with_priority().await, Some(("relisted-b", priority::NORMAL)));
//! assert_eq!(queue.get().await, Some("created"));
//! assert_eq!(queue.get_with_priority().await, Some(("relisted-a", priority::LOW)));
//! # }
//! ```
//!
//! The queue's public handle is here, its settings ([`Config`], [`AddConfig`]) in `config`, the
//! entries and their transitions under the lock in `state`, and the task that hands out
//! delayed items in `driver`.

mod config;
mod driver;
mod state;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::Driver;
use super::error::ShutDownError;
use super::metrics::{QueueMetrics, Timestamps};
pub use config::{AddConfig, Config};
use driver::drive;
use state::{Changes, Shared, State, TryGet};

/// The priority controller-runtime's handlers give to the objects of an informer's initial
/// list and to resyncs (`handler.LowPriority`).
pub const LOW: i32 = -100;

/// The priority of a plain [`add`](PriorityQueue::add) (controller-runtime's default, 0).
pub const NORMAL: i32 = 0;

/// Delays are capped at 30 years, as in [`DelayingQueue`](super::DelayingQueue).
const MAX_DELAY: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// A rate-limited, delaying work queue that hands out the highest priority first; see the
/// [module documentation](self) for its rules.
///
/// Its methods are those of [`RateLimitingQueue`](super::RateLimitingQueue), plus the
/// `*_with_priority` variants and [`add_with_config`](Self::add_with_config); a plain
/// [`add`](Self::add) uses priority [`NORMAL`].
///
/// Cheap to clone. The [`Driver`] returned by the constructors must run (e.g.
/// `tokio::spawn(driver)`) for delayed items to be handed out to a waiting worker; it ends at
/// shutdown or when the last handle is dropped.
pub struct PriorityQueue<T> {
    shared: Arc<Shared<T>>,
    /// Cancels `shared.stopped` when the last public handle goes away.
    _alive: Arc<DropGuard>,
}

impl<T> Clone for PriorityQueue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            _alive: Arc::clone(&self._alive),
        }
    }
}

impl<T> fmt::Debug for PriorityQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("PriorityQueue")
            .field("ready", &state.ready.len())
            .field("waiting", &state.waiting.len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}
impl<T> PriorityQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed queue with
    /// [`default_controller_rate_limiter`](super::default_controller_rate_limiter), and its
    /// [`Driver`].
    pub fn new() -> (Self, Driver) {
        Self::with_config(Config::default())
    }

    /// A queue built from `config`, and its [`Driver`], which must run for delayed and
    /// rate-limited items to reach a waiting worker (it also refreshes the unfinished-work
    /// gauges).
    pub fn with_config(config: Config<T>) -> (Self, Driver) {
        let metrics = QueueMetrics::new(&config.queue.name, config.queue.metrics_provider.as_ref());
        let timestamps = metrics.as_ref().map(|_| Timestamps::new());
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                entries: HashMap::new(),
                ready: BTreeMap::new(),
                waiting: BTreeMap::new(),
                processing: HashSet::new(),
                next_seq: 0,
                shutting_down: false,
                drain: false,
                timestamps,
            }),
            item_ready: Notify::new(),
            drained: Notify::new(),
            earlier: Notify::new(),
            metrics,
            rate_limiter: config.rate_limiter,
            stopped: CancellationToken::new(),
        });
        let driver = Driver::new(drive(Arc::clone(&shared)));
        let alive = Arc::new(shared.stopped.clone().drop_guard());
        let queue = Self {
            shared,
            _alive: alive,
        };
        (queue, driver)
    }

    /// Adds `item` as `config` says; the general form of every `add*` method.
    ///
    /// If the item already has an entry, the entry keeps the higher priority and the earlier
    /// ready time. A delay or a rate limit counts as a retry in the metrics.
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down; the rate limiter is not
    /// consulted then.
    pub fn add_with_config(&self, item: T, config: AddConfig) -> Result<(), ShutDownError<T>> {
        let shared = &*self.shared;
        if shared.state.lock().shutting_down {
            return Err(ShutDownError(item));
        }
        let mut delay = config.after;
        if config.rate_limited {
            let limited = shared.rate_limiter.when(&item);
            delay = Some(delay.map_or(limited, |d| d.max(limited)));
        }
        let now = Instant::now();
        let due = delay
            .filter(|d| !d.is_zero())
            .map(|d| now + d.min(MAX_DELAY));
        let changes = {
            let mut state = shared.state.lock();
            // Checked again under the lock: shutdown clears the waiting entries, so an item
            // accepted here is never left behind in a stopped queue.
            if state.shutting_down {
                return Err(ShutDownError(item));
            }
            state.add(item, config.priority, due, now)
        };
        if delay.is_some()
            && let Some(metrics) = &shared.metrics
        {
            metrics.retry();
        }
        shared.publish(changes);
        Ok(())
    }

    /// Adds `item` at priority [`NORMAL`].
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add(&self, item: T) -> Result<(), ShutDownError<T>> {
        self.add_with_config(item, AddConfig::default())
    }

    /// Adds `item` at `priority`.
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add_with_priority(&self, item: T, priority: i32) -> Result<(), ShutDownError<T>> {
        self.add_with_config(item, AddConfig::default().priority(priority))
    }

    /// Adds `item` at priority [`NORMAL`] once `delay` has passed (a zero delay: at once).
    /// Delays beyond 30 years are capped there.
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add_after(&self, item: T, delay: Duration) -> Result<(), ShutDownError<T>> {
        self.add_with_config(item, AddConfig::default().after(delay))
    }

    /// Adds `item` at priority [`NORMAL`] after the wait the rate limiter gives it (which also
    /// counts one more failure of the item).
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add_rate_limited(&self, item: T) -> Result<(), ShutDownError<T>> {
        self.add_with_config(item, AddConfig::default().rate_limited())
    }

    /// Like [`add_rate_limited`](Self::add_rate_limited), at `priority`.
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add_rate_limited_with_priority(
        &self,
        item: T,
        priority: i32,
    ) -> Result<(), ShutDownError<T>> {
        self.add_with_config(item, AddConfig::default().priority(priority).rate_limited())
    }

    /// Stops the rate limiter tracking `item` (resets its failures). You still have to call
    /// [`done`](Self::done).
    pub fn forget(&self, item: &T) {
        self.shared.rate_limiter.forget(item);
    }

    /// How many times `item` was rate limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.shared.rate_limiter.num_requeues(item)
    }

    /// Waits for the ready item with the highest priority and marks it as being processed.
    /// Call [`done`](Self::done) with the item when finished. Returns `None` when the queue is
    /// shut down and nothing is ready: the worker should stop.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Queue::get`](super::Queue::get).
    pub async fn get(&self) -> Option<T> {
        self.get_with_priority().await.map(|(item, _)| item)
    }

    /// Like [`get`](Self::get), also returning the priority the item was queued with.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Queue::get`](super::Queue::get).
    pub async fn get_with_priority(&self) -> Option<(T, i32)> {
        let shared = &*self.shared;
        loop {
            let mut notified = pin!(shared.item_ready.notified());
            // Register before looking, so an add between the look and the await is not missed.
            notified.as_mut().enable();
            match shared.try_get() {
                TryGet::Item(item, priority) => return Some((item, priority)),
                TryGet::ShutDown => return None,
                TryGet::Empty => notified.await,
            }
        }
    }

    /// Marks `item` as processed. If it was added again meanwhile, it can be handed out again.
    /// Calling `done` for an item that is not being processed does nothing.
    pub fn done(&self, item: &T) {
        self.shared.done(item);
    }

    /// The number of ready items no worker holds. For information only.
    pub fn len(&self) -> usize {
        let shared = &*self.shared;
        let (len, changes) = {
            let mut state = shared.state.lock();
            let mut changes = Changes::default();
            state.promote(Instant::now(), &mut changes);
            (state.ready.len(), changes)
        };
        shared.publish(changes);
        len
    }

    /// Whether no ready item is waiting for a worker. See [`len`](Self::len).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of items waiting for a delay or rate limit (for tests and debugging).
    pub fn waiting_len(&self) -> usize {
        let now = Instant::now();
        let state = self.shared.state.lock();
        state.waiting.keys().filter(|(at, _)| *at > now).count()
    }

    /// Whether [`shutdown`](Self::shutdown) or [`shutdown_with_drain`](Self::shutdown_with_drain)
    /// was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.state.lock().shutting_down
    }

    /// Refuses new items from now on and drops the items waiting for a delay. Workers still
    /// receive the ready items; then [`get`](Self::get) returns `None`. Makes a pending
    /// [`shutdown_with_drain`](Self::shutdown_with_drain) return at once. Idempotent.
    pub fn shutdown(&self) {
        self.shared.shutdown(false);
    }

    /// Like [`shutdown`](Self::shutdown), then waits until no item is being processed.
    /// Workers must call `done`, or this never returns; a later [`shutdown`](Self::shutdown)
    /// stops the wait.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future stops waiting; the queue stays shut down.
    pub async fn shutdown_with_drain(&self) {
        let shared = &*self.shared;
        shared.shutdown(true);
        crate::workqueue::drain::wait(&shared.drained, || {
            let state = shared.state.lock();
            state.processing.is_empty() || !state.drain
        })
        .await;
    }
}

#[cfg(test)]
mod tests;
