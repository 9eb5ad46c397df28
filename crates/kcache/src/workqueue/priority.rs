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
//!   ([`AddOpts`]); a delayed item takes its place among the ready items when its time comes.
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
//! Metrics go to the same [`MetricsProvider`] as the other queues: depth (ready items), adds
//! (items that became ready), queue latency (ready → `get`), work duration (`get` → `done`),
//! the two unfinished-work gauges and retries (every add with a delay or a rate limit).
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

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::Driver;
use super::error::ShutDownError;
use super::metrics::{MetricsProvider, QueueMetrics, Timestamps};
use super::queue::QueueConfig;
use super::rate_limiters::{RateLimiter, default_controller_rate_limiter};

/// The priority controller-runtime's handlers give to the objects of an informer's initial
/// list and to resyncs (`handler.LowPriority`).
pub const LOW: i32 = -100;

/// The priority of a plain [`add`](PriorityQueue::add) (controller-runtime's default, 0).
pub const NORMAL: i32 = 0;

/// Delays are capped at 30 years, as in [`DelayingQueue`](super::DelayingQueue).
const MAX_DELAY: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// How often the unfinished-work gauges are refreshed (client-go's value).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// How to build a [`PriorityQueue`]: name, metrics provider and rate limiter.
///
/// The defaults are those of [`RateLimitingQueueConfig`](super::RateLimitingQueueConfig):
/// unnamed (no metrics) and [`default_controller_rate_limiter`].
///
/// ```
/// use std::time::Duration;
/// use kcache::workqueue::{ItemExponentialFailureRateLimiter, PriorityQueue, priority};
///
/// let config = priority::Config::default()
///     .name("pods")
///     .rate_limiter(ItemExponentialFailureRateLimiter::new(
///         Duration::from_millis(5),
///         Duration::from_secs(10),
///     ));
/// let (queue, driver) = PriorityQueue::<String>::with_config(config);
/// # drop((queue, driver));
/// ```
pub struct Config<T> {
    queue: QueueConfig,
    rate_limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Config<T> {
    /// Names the queue (the `name` label of its metrics). Default: unnamed (no metrics).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.queue = self.queue.name(name);
        self
    }

    /// Sends the queue's metrics to `provider`. Default: none (no metrics).
    #[must_use]
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.queue = self.queue.metrics_provider(provider);
        self
    }

    /// Paces [`add_rate_limited`](PriorityQueue::add_rate_limited) with `limiter`.
    /// Default: [`default_controller_rate_limiter`].
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.rate_limiter = Arc::new(limiter);
        self
    }

    /// Like [`rate_limiter`](Self::rate_limiter), for a limiter shared with other code.
    #[must_use]
    pub fn shared_rate_limiter(mut self, limiter: Arc<dyn RateLimiter<T>>) -> Self {
        self.rate_limiter = limiter;
        self
    }
}

impl<T> Default for Config<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn default() -> Self {
        Self {
            queue: QueueConfig::default(),
            rate_limiter: Arc::new(default_controller_rate_limiter()),
        }
    }
}

impl<T> fmt::Debug for Config<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

/// How to add an item to a [`PriorityQueue`] (controller-runtime's `AddOpts`).
///
/// ```
/// use std::time::Duration;
/// use kcache::workqueue::priority::{self, AddOpts};
///
/// let opts = AddOpts::default().priority(priority::LOW).after(Duration::from_secs(1));
/// assert_eq!(opts.priority, -100);
/// assert_eq!(opts.after, Some(Duration::from_secs(1)));
/// assert!(!opts.rate_limited);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddOpts {
    /// The item's priority; higher is handed out first. Default [`NORMAL`].
    pub priority: i32,
    /// Hand the item out only after this delay. Default `None`: at once.
    pub after: Option<Duration>,
    /// Also wait what the queue's rate limiter says (counting one more failure of the item);
    /// with [`after`](Self::after), the longer of the two waits applies.
    pub rate_limited: bool,
}

impl AddOpts {
    /// Sets [`AddOpts::priority`].
    #[must_use]
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Sets [`AddOpts::after`].
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.after = Some(delay);
        self
    }

    /// Sets [`AddOpts::rate_limited`].
    #[must_use]
    pub fn rate_limited(mut self) -> Self {
        self.rate_limited = true;
        self
    }
}

/// A rate-limited, delaying work queue that hands out the highest priority first; see the
/// [module documentation](self) for its rules.
///
/// Its methods are those of [`RateLimitingQueue`](super::RateLimitingQueue), plus the
/// `*_with_priority` variants and [`add_with_opts`](Self::add_with_opts); a plain
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

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Signalled once per item that can be handed out, and on shutdown (`notify_waiters`).
    item_ready: Notify,
    /// Signalled when the processing set becomes empty or a drain is cut short.
    drained: Notify,
    /// Signalled when an add makes the earliest deadline earlier.
    earlier: Notify,
    metrics: Option<QueueMetrics>,
    rate_limiter: Arc<dyn RateLimiter<T>>,
    /// Cancelled at shutdown, or when the last public handle is dropped: stops the driver.
    stopped: CancellationToken,
}

/// One item that needs processing (queued, waiting for its delay, or re-added while held).
struct Entry {
    priority: i32,
    /// Order among ready items of one priority: given when the item became ready.
    seq: u64,
    /// `None`: ready. `Some(t)`: waiting until `t`.
    due: Option<Instant>,
}

struct State<T> {
    entries: HashMap<T, Entry>,
    /// The ready entries no worker holds, highest priority (then lowest seq) first.
    ready: BTreeMap<(Reverse<i32>, u64), T>,
    /// The entries waiting for their time, earliest first.
    waiting: BTreeMap<(Instant, u64), T>,
    /// Items a worker holds right now.
    processing: HashSet<T>,
    next_seq: u64,
    shutting_down: bool,
    drain: bool,
    /// Present only when the queue records metrics.
    timestamps: Option<Timestamps<T>>,
}

/// What a change under the lock asks for once the lock is released.
#[derive(Default)]
#[must_use]
struct Changes {
    /// Items that became ready (counted as adds, raise the depth).
    became_ready: usize,
    /// Items that became ready and can be handed out (each wakes one worker).
    wake: usize,
    /// Whether the earliest deadline moved earlier (wakes the driver).
    earlier: bool,
}

impl<T: Clone + Eq + Hash> State<T> {
    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Makes the entry of `item` (already in `entries`, not in `waiting`) ready now.
    fn make_ready(&mut self, item: T, now: Instant, changes: &mut Changes) {
        let seq = self.take_seq();
        let Some(entry) = self.entries.get_mut(&item) else {
            return;
        };
        entry.due = None;
        entry.seq = seq;
        let priority = entry.priority;
        if let Some(timestamps) = self.timestamps.as_mut() {
            timestamps.added(&item, now);
        }
        changes.became_ready += 1;
        if !self.processing.contains(&item) {
            self.ready.insert((Reverse(priority), seq), item);
            changes.wake += 1;
        }
    }

    /// Moves the entries whose time has come to the ready ones, earliest first.
    fn promote(&mut self, now: Instant, changes: &mut Changes) {
        while let Some(entry) = self.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let item = entry.remove();
            self.make_ready(item, now, changes);
        }
    }

    fn add(&mut self, item: T, priority: i32, due: Option<Instant>, now: Instant) -> Changes {
        let mut changes = Changes::default();
        self.promote(now, &mut changes);
        let Some(entry) = self.entries.get_mut(&item) else {
            let seq = self.take_seq();
            self.entries
                .insert(item.clone(), Entry { priority, seq, due });
            match due {
                Some(at) => {
                    changes.earlier = self.waiting.first_key_value().is_none_or(|(k, _)| at < k.0);
                    self.waiting.insert((at, seq), item);
                }
                None => self.make_ready(item, now, &mut changes),
            }
            return changes;
        };
        let old_priority = entry.priority;
        entry.priority = entry.priority.max(priority);
        match entry.due {
            // Ready already: only the priority can change.
            None => {
                if entry.priority != old_priority
                    && self
                        .ready
                        .remove(&(Reverse(old_priority), entry.seq))
                        .is_some()
                {
                    self.ready
                        .insert((Reverse(entry.priority), entry.seq), item);
                }
            }
            Some(old_due) => match due {
                None => {
                    self.waiting.remove(&(old_due, entry.seq));
                    self.make_ready(item, now, &mut changes);
                }
                Some(at) if at < old_due => {
                    let seq = entry.seq;
                    entry.due = Some(at);
                    self.waiting.remove(&(old_due, seq));
                    changes.earlier = self.waiting.first_key_value().is_none_or(|(k, _)| at < k.0);
                    self.waiting.insert((at, seq), item);
                }
                Some(_) => {}
            },
        }
        changes
    }
}

enum TryGet<T> {
    Item(T, i32),
    Empty,
    ShutDown,
}

impl<T> PriorityQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed queue with [`default_controller_rate_limiter`], and its [`Driver`].
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

    /// Adds `item` as `opts` say; the general form of every `add*` method.
    ///
    /// If the item already has an entry, the entry keeps the higher priority and the earlier
    /// ready time. A delay or a rate limit counts as a retry in the metrics.
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down; the rate limiter is not
    /// consulted then.
    pub fn add_with_opts(&self, item: T, opts: AddOpts) -> Result<(), ShutDownError<T>> {
        let shared = &*self.shared;
        if shared.state.lock().shutting_down {
            return Err(ShutDownError(item));
        }
        let mut delay = opts.after;
        if opts.rate_limited {
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
            state.add(item, opts.priority, due, now)
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
        self.add_with_opts(item, AddOpts::default())
    }

    /// Adds `item` at `priority`.
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add_with_priority(&self, item: T, priority: i32) -> Result<(), ShutDownError<T>> {
        self.add_with_opts(item, AddOpts::default().priority(priority))
    }

    /// Adds `item` at priority [`NORMAL`] once `delay` has passed (a zero delay: at once).
    /// Delays beyond 30 years are capped there.
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add_after(&self, item: T, delay: Duration) -> Result<(), ShutDownError<T>> {
        self.add_with_opts(item, AddOpts::default().after(delay))
    }

    /// Adds `item` at priority [`NORMAL`] after the wait the rate limiter gives it (which also
    /// counts one more failure of the item).
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add_rate_limited(&self, item: T) -> Result<(), ShutDownError<T>> {
        self.add_with_opts(item, AddOpts::default().rate_limited())
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
        self.add_with_opts(item, AddOpts::default().priority(priority).rate_limited())
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
        loop {
            let mut notified = pin!(shared.drained.notified());
            notified.as_mut().enable();
            {
                let state = shared.state.lock();
                if state.processing.is_empty() || !state.drain {
                    return;
                }
            }
            notified.await;
        }
    }
}

impl<T> Shared<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// Publishes what a change under the lock asks for; call it after releasing the lock.
    fn publish(&self, changes: Changes) {
        if let Some(metrics) = &self.metrics {
            for _ in 0..changes.became_ready {
                metrics.added();
            }
        }
        for _ in 0..changes.wake {
            self.item_ready.notify_one();
        }
        if changes.earlier {
            self.earlier.notify_one();
        }
    }

    fn try_get(&self) -> TryGet<T> {
        let now = Instant::now();
        let mut changes = Changes::default();
        let got = {
            let mut state = self.state.lock();
            state.promote(now, &mut changes);
            match state.ready.pop_first() {
                None => Err(state.shutting_down),
                Some(((Reverse(priority), _), item)) => {
                    let state = &mut *state;
                    state.entries.remove(&item);
                    state.processing.insert(item.clone());
                    let waited = state
                        .timestamps
                        .as_mut()
                        .and_then(|timestamps| timestamps.got(&item, now));
                    Ok((item, priority, waited))
                }
            }
        };
        self.publish(changes);
        match got {
            Ok((item, priority, waited)) => {
                if let Some(metrics) = &self.metrics {
                    metrics.got(waited);
                }
                TryGet::Item(item, priority)
            }
            Err(true) => TryGet::ShutDown,
            Err(false) => TryGet::Empty,
        }
    }

    fn done(&self, item: &T) {
        let now = Instant::now();
        let mut changes = Changes::default();
        let (idle, worked) = {
            let mut state = self.state.lock();
            if !state.processing.remove(item) {
                return;
            }
            let state = &mut *state;
            let worked = state
                .timestamps
                .as_mut()
                .and_then(|timestamps| timestamps.done(item, now));
            state.promote(now, &mut changes);
            if let Some(entry) = state.entries.get(item)
                && entry.due.is_none()
            {
                state
                    .ready
                    .insert((Reverse(entry.priority), entry.seq), item.clone());
                changes.wake += 1;
            }
            (state.processing.is_empty(), worked)
        };
        self.publish(changes);
        if idle {
            self.drained.notify_waiters();
        }
        if let (Some(metrics), Some(worked)) = (&self.metrics, worked) {
            metrics.done(worked);
        }
    }

    fn shutdown(&self, drain: bool) {
        let mut changes = Changes::default();
        {
            let mut state = self.state.lock();
            // Items whose time has already come stay, as if the driver had moved them.
            state.promote(Instant::now(), &mut changes);
            state.shutting_down = true;
            state.drain = drain;
            let state = &mut *state;
            for item in std::mem::take(&mut state.waiting).into_values() {
                state.entries.remove(&item);
            }
        }
        self.publish(changes);
        self.stopped.cancel();
        self.item_ready.notify_waiters();
        if !drain {
            self.drained.notify_waiters();
        }
    }

    fn update_unfinished_work(&self) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let work = {
            let state = self.state.lock();
            if state.shutting_down {
                return;
            }
            match &state.timestamps {
                Some(timestamps) => timestamps.unfinished(Instant::now()),
                None => return,
            }
        };
        metrics.unfinished(work);
    }
}

/// The driver: hands out delayed items when their time comes, and refreshes the metrics, until
/// the queue stops.
async fn drive<T>(shared: Arc<Shared<T>>)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    let metrics = async {
        if shared.metrics.is_none() {
            return;
        }
        let mut ticker = tokio::time::interval(UNFINISHED_WORK_UPDATE_PERIOD);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shared.stopped.cancelled() => return,
                _ = ticker.tick() => shared.update_unfinished_work(),
            }
        }
    };
    let timers = async {
        loop {
            let mut earlier = pin!(shared.earlier.notified());
            earlier.as_mut().enable();
            let mut changes = Changes::default();
            let next = {
                let mut state = shared.state.lock();
                state.promote(Instant::now(), &mut changes);
                state.waiting.first_key_value().map(|(k, _)| k.0)
            };
            shared.publish(changes);
            let sleep = async {
                match next {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shared.stopped.cancelled() => return,
                () = earlier => {}
                () = sleep => {}
            }
        }
    };
    tokio::join!(metrics, timers);
}

#[cfg(test)]
mod tests;
