//! A delaying queue that paces retries with a rate limiter: [`RateLimitingQueue`].

use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

use super::Driver;
use super::delaying::DelayingQueue;
use super::error::ShutDownError;
use super::metrics::MetricsProvider;
use super::queue::QueueConfig;
use super::rate_limiters::{RateLimiter, default_controller_rate_limiter};

/// How to build a [`RateLimitingQueue`]: name, rate limiter and metrics provider.
///
/// The defaults are client-go's: unnamed (so no metrics) and
/// [`default_controller_rate_limiter`] (per-item exponential 5 ms → 1000 s, overall token
/// bucket 10 qps with burst 100).
///
/// ```
/// use std::time::Duration;
/// use kcache::workqueue::{ItemFastSlowRateLimiter, RateLimitingQueue, RateLimitingQueueConfig};
///
/// let config = RateLimitingQueueConfig::default()
///     .name("pods")
///     .rate_limiter(ItemFastSlowRateLimiter::new(
///         Duration::from_millis(5),
///         Duration::from_secs(10),
///         3,
///     ));
/// let (queue, driver) = RateLimitingQueue::<String>::with_config(config);
/// # drop((queue, driver));
/// ```
#[non_exhaustive]
pub struct RateLimitingQueueConfig<T> {
    pub(super) queue: QueueConfig,
    pub(super) rate_limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> RateLimitingQueueConfig<T> {
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

    /// Paces [`add_rate_limited`](RateLimitingQueue::add_rate_limited) with `limiter`.
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

impl<T> Default for RateLimitingQueueConfig<T>
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

impl<T> fmt::Debug for RateLimitingQueueConfig<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueueConfig")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

/// A [`DelayingQueue`] whose retries are paced by a [`RateLimiter`] (client-go's
/// `TypedRateLimitingInterface`).
///
/// After a failed reconcile, call [`add_rate_limited`](Self::add_rate_limited); after a
/// success (or when giving up), call [`forget`](Self::forget) so the limiter stops tracking
/// the item. Either way, call [`done`](super::Queue::done).
///
/// It dereferences to its [`DelayingQueue`] (and so to its [`Queue`](super::Queue)): `add`,
/// `add_after`, `get`, `done`, `len` and the shutdown methods are theirs. Cheap to clone; see
/// the [module documentation](super) for a worker loop.
pub struct RateLimitingQueue<T> {
    queue: DelayingQueue<T>,
    rate_limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            rate_limiter: Arc::clone(&self.rate_limiter),
        }
    }
}

impl<T> fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<T> RateLimitingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed queue with [`default_controller_rate_limiter`], and its [`Driver`], which must
    /// run (e.g. `tokio::spawn(driver)`) for delayed and rate-limited items to reach the queue.
    pub fn new() -> (Self, Driver) {
        Self::with_config(RateLimitingQueueConfig::default())
    }

    /// A queue built from `config`, and its [`Driver`], which must run for delayed and
    /// rate-limited items to reach the queue.
    pub fn with_config(config: RateLimitingQueueConfig<T>) -> (Self, Driver) {
        let (queue, driver) = DelayingQueue::with_config(config.queue);
        let queue = Self {
            queue,
            rate_limiter: config.rate_limiter,
        };
        (queue, driver)
    }

    /// Adds `item` after the wait the rate limiter gives it (which also counts one more
    /// failure of the item).
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down; the limiter is not
    /// consulted then.
    pub fn add_rate_limited(&self, item: T) -> Result<(), ShutDownError<T>> {
        if self.queue.is_shutting_down() {
            return Err(ShutDownError(item));
        }
        let delay = self.rate_limiter.when(&item);
        self.queue.add_after(item, delay)
    }

    /// Stops the rate limiter tracking `item` (resets its failures). You still have to call
    /// [`done`](super::Queue::done).
    pub fn forget(&self, item: &T) {
        self.rate_limiter.forget(item);
    }

    /// How many times `item` was rate limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.rate_limiter.num_requeues(item)
    }
}

/// A rate-limiting queue is a [`DelayingQueue`] (whose methods it offers as its own) plus the
/// rate limiter.
impl<T> Deref for RateLimitingQueue<T> {
    type Target = DelayingQueue<T>;

    fn deref(&self) -> &DelayingQueue<T> {
        &self.queue
    }
}

#[cfg(test)]
mod tests;
