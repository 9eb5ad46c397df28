//! The basic work queue: fair, stingy, many producers and consumers, shutdown.

use std::collections::{HashSet, VecDeque};
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

/// How often the unfinished-work gauges are refreshed (client-go's value).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// Options shared by every kind of queue: its name and where its metrics go.
///
/// Metrics are recorded only when the queue has a non-empty name *and* a provider, as in
/// client-go; otherwise the queue does no metric bookkeeping at all.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct QueueConfig {
    pub(crate) name: String,
    pub(crate) metrics_provider: Option<Arc<dyn MetricsProvider>>,
}

impl QueueConfig {
    /// Names the queue (the `name` label of its metrics). Default: unnamed (no metrics).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sends the queue's metrics to `provider`. Default: none (no metrics).
    #[must_use]
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics_provider = Some(provider);
        self
    }
}

impl fmt::Debug for QueueConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueConfig")
            .field("name", &self.name)
            .field("metrics_provider", &self.metrics_provider.is_some())
            .finish()
    }
}

/// A work queue (client-go's `workqueue.Typed`).
///
/// - **Fair**: items are handed out in the order they were added.
/// - **Stingy**: an item is never handed to two workers at once, and an item added many times
///   before a worker takes it is handed out once.
/// - **Re-adds while processing**: an item added while a worker holds it waits (it is *dirty*)
///   and is queued again when the worker calls [`done`](Self::done).
/// - **Shutdown**: [`shutdown`](Self::shutdown) refuses new items; workers keep receiving the
///   items already queued, and [`get`](Self::get) returns `None` once the queue is empty.
///
/// `Queue` is a cheap handle: clone it for every producer and worker. When the last handle is
/// dropped, the queue's [`Driver`] (if any) stops.
///
/// # Examples
///
/// ```
/// use kcache::workqueue::Queue;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = Queue::new();
/// queue.add("default/web-0").unwrap();
/// queue.add("default/web-0").unwrap(); // collapsed with the first add
/// queue.shutdown();
///
/// while let Some(key) = queue.get().await {
///     // ... reconcile `key` ...
///     queue.done(&key);
/// }
/// # }
/// ```
pub struct Queue<T> {
    pub(crate) shared: Arc<Shared<T>>,
    /// Cancels `shared.stopped` when the last public handle goes away.
    _alive: Arc<DropGuard>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            _alive: Arc::clone(&self._alive),
        }
    }
}

impl<T> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("Queue")
            .field("len", &state.queue.len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

/// The state behind every handle of one queue (and its drivers).
pub(crate) struct Shared<T> {
    state: Mutex<State<T>>,
    /// Signalled once per queued item (`notify_one`) and on shutdown (`notify_waiters`).
    item_ready: Notify,
    /// Signalled when the processing set becomes empty or a drain is cut short.
    drained: Notify,
    metrics: Option<QueueMetrics>,
    /// Cancelled at shutdown, or when the last public handle is dropped: stops drivers.
    pub(crate) stopped: CancellationToken,
}

struct State<T> {
    /// Items ready for a worker, in order. Each is in `dirty` and not in `processing`.
    queue: VecDeque<T>,
    /// Items that need processing (queued, or re-added while being processed).
    dirty: HashSet<T>,
    /// Items a worker holds right now.
    processing: HashSet<T>,
    shutting_down: bool,
    drain: bool,
    /// Present only when the queue records metrics.
    timestamps: Option<Timestamps<T>>,
}

enum TryGet<T> {
    Item(T),
    Empty,
    ShutDown,
}

impl<T> Queue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed queue without metrics. It needs no driver.
    pub fn new() -> Self {
        Self::from_shared(Shared::new(&QueueConfig::default()))
    }

    /// A queue with a name and a metrics provider.
    ///
    /// The returned [`Driver`] refreshes the unfinished-work gauges every 500 ms; spawn it (for
    /// example with `tokio::spawn`) when the queue has metrics. It finishes at shutdown, when
    /// every handle is dropped, or at once when the queue records no metrics.
    pub fn with_config(config: QueueConfig) -> (Self, Driver) {
        let shared = Shared::new(&config);
        let driver = Driver::new(Arc::clone(&shared).update_unfinished_work_loop());
        (Self::from_shared(shared), driver)
    }

    pub(crate) fn from_shared(shared: Arc<Shared<T>>) -> Self {
        let alive = Arc::new(shared.stopped.clone().drop_guard());
        Self {
            shared,
            _alive: alive,
        }
    }

    /// Marks `item` as needing processing.
    ///
    /// An item that is already waiting is not queued twice; an item a worker holds is queued
    /// again once that worker calls [`done`](Self::done).
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add(&self, item: T) -> Result<(), ShutDownError<T>> {
        self.shared.add(item)
    }

    /// Waits for an item and marks it as being processed. Call [`done`](Self::done) with the
    /// item when finished. Returns `None` when the queue is shut down and empty: the worker
    /// should stop.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an item is taken from the queue only in the poll that returns it, and a
    /// wake-up received by a dropped `get` is passed on to another waiting `get`.
    pub async fn get(&self) -> Option<T> {
        let shared = &*self.shared;
        loop {
            let mut notified = pin!(shared.item_ready.notified());
            // Register before looking, so an add between the look and the await is not missed.
            notified.as_mut().enable();
            match shared.try_get() {
                TryGet::Item(item) => return Some(item),
                TryGet::ShutDown => return None,
                TryGet::Empty => notified.await,
            }
        }
    }

    /// Marks `item` as processed. If it was added again meanwhile, it is queued again.
    ///
    /// Calling `done` for an item that is not being processed does nothing. (client-go would
    /// queue a dirty item a second time in that case; we keep the queue stingy.)
    pub fn done(&self, item: &T) {
        self.shared.done(item);
    }

    /// The number of items waiting for a worker (not counting items being processed).
    /// For information only: by the time you read it, it may have changed.
    pub fn len(&self) -> usize {
        self.shared.state.lock().queue.len()
    }

    /// Whether no item is waiting for a worker. See [`len`](Self::len).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`shutdown`](Self::shutdown) or [`shutdown_with_drain`](Self::shutdown_with_drain)
    /// was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.state.lock().shutting_down
    }

    /// Refuses new items from now on. Workers still receive the items already queued; then
    /// [`get`](Self::get) returns `None`. Does not wait for anything, and makes a pending
    /// [`shutdown_with_drain`](Self::shutdown_with_drain) return at once. Idempotent.
    pub fn shutdown(&self) {
        self.shared.shutdown(false);
    }

    /// Like [`shutdown`](Self::shutdown), then waits until no item is being processed (every
    /// item handed out by `get` got its `done`). Items still waiting in the queue are not
    /// waited for, but workers may keep taking them.
    ///
    /// Workers must call `done`, or this never returns; a later [`shutdown`](Self::shutdown)
    /// stops the wait.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future stops waiting; the queue stays shut down.
    pub async fn shutdown_with_drain(&self) {
        let shared = &*self.shared;
        shared.shutdown(true);
        super::drain::wait(&shared.drained, || {
            let state = shared.state.lock();
            state.processing.is_empty() || !state.drain
        })
        .await;
    }
}

impl<T> Default for Queue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Shared<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    pub(crate) fn new(config: &QueueConfig) -> Arc<Self> {
        let metrics = QueueMetrics::new(&config.name, config.metrics_provider.as_ref());
        let timestamps = metrics.as_ref().map(|_| Timestamps::new());
        Arc::new(Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                shutting_down: false,
                drain: false,
                timestamps,
            }),
            item_ready: Notify::new(),
            drained: Notify::new(),
            metrics,
            stopped: CancellationToken::new(),
        })
    }

    pub(crate) fn metrics(&self) -> Option<&QueueMetrics> {
        self.metrics.as_ref()
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.state.lock().shutting_down
    }

    pub(crate) fn add(&self, item: T) -> Result<(), ShutDownError<T>> {
        let now = self.metrics.as_ref().map(|_| Instant::now());
        let queued = {
            let mut state = self.state.lock();
            if state.shutting_down {
                return Err(ShutDownError(item));
            }
            if state.dirty.contains(&item) {
                return Ok(());
            }
            let state = &mut *state;
            if let (Some(timestamps), Some(now)) = (state.timestamps.as_mut(), now) {
                timestamps.added(&item, now);
            }
            state.dirty.insert(item.clone());
            if state.processing.contains(&item) {
                false
            } else {
                state.queue.push_back(item);
                true
            }
        };
        if let Some(metrics) = &self.metrics {
            metrics.added();
        }
        if queued {
            self.item_ready.notify_one();
        }
        Ok(())
    }

    fn try_get(&self) -> TryGet<T> {
        let now = self.metrics.as_ref().map(|_| Instant::now());
        let (item, waited) = {
            let mut state = self.state.lock();
            let Some(item) = state.queue.pop_front() else {
                return if state.shutting_down {
                    TryGet::ShutDown
                } else {
                    TryGet::Empty
                };
            };
            let state = &mut *state;
            state.dirty.remove(&item);
            state.processing.insert(item.clone());
            let waited = match (state.timestamps.as_mut(), now) {
                (Some(timestamps), Some(now)) => timestamps.got(&item, now),
                _ => None,
            };
            (item, waited)
        };
        if let Some(metrics) = &self.metrics {
            metrics.got(waited);
        }
        TryGet::Item(item)
    }

    fn done(&self, item: &T) {
        let now = self.metrics.as_ref().map(|_| Instant::now());
        let (requeued, idle, worked) = {
            let mut state = self.state.lock();
            if !state.processing.remove(item) {
                return;
            }
            let state = &mut *state;
            let worked = match (state.timestamps.as_mut(), now) {
                (Some(timestamps), Some(now)) => timestamps.done(item, now),
                _ => None,
            };
            let requeued = state.dirty.contains(item);
            if requeued {
                state.queue.push_back(item.clone());
            }
            (requeued, state.processing.is_empty(), worked)
        };
        if requeued {
            self.item_ready.notify_one();
        }
        if idle {
            self.drained.notify_waiters();
        }
        if let (Some(metrics), Some(worked)) = (&self.metrics, worked) {
            metrics.done(worked);
        }
    }

    fn shutdown(&self, drain: bool) {
        {
            let mut state = self.state.lock();
            state.shutting_down = true;
            state.drain = drain;
        }
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

    /// Refreshes the unfinished-work gauges until the queue stops.
    pub(crate) async fn update_unfinished_work_loop(self: Arc<Self>) {
        if self.metrics.is_none() {
            return;
        }
        let mut ticker = tokio::time::interval(UNFINISHED_WORK_UPDATE_PERIOD);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.stopped.cancelled() => return,
                _ = ticker.tick() => self.update_unfinished_work(),
            }
        }
    }
}

#[cfg(test)]
mod tests;
