//! How to build a [`PriorityQueue`](super::PriorityQueue) ([`Config`]: name, metrics provider,
//! rate limiter) and how to add an item to it ([`AddOpts`]: priority, delay, rate limit).

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::workqueue::metrics::MetricsProvider;
use crate::workqueue::queue::QueueConfig;
use crate::workqueue::rate_limiters::{RateLimiter, default_controller_rate_limiter};

/// How to build a [`PriorityQueue`](super::PriorityQueue): name, metrics provider and rate limiter.
///
/// The defaults are those of
/// [`RateLimitingQueueConfig`](crate::workqueue::RateLimitingQueueConfig): unnamed (no metrics)
/// and [`default_controller_rate_limiter`].
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
    pub(super) queue: QueueConfig,
    pub(super) rate_limiter: Arc<dyn RateLimiter<T>>,
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

    /// Paces [`add_rate_limited`](super::PriorityQueue::add_rate_limited) with `limiter`.
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

/// How to add an item to a [`PriorityQueue`](super::PriorityQueue) (controller-runtime's
/// `AddOpts`).
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
    /// The item's priority; higher is handed out first. Default [`NORMAL`](super::NORMAL).
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
