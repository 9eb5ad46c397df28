//! How to build a [`PriorityQueue`](super::PriorityQueue) ([`Config`], the same as the
//! rate-limiting queue's: name, metrics provider, rate limiter) and how to add an item to it ([`AddConfig`]: priority, delay, rate limit).

use std::time::Duration;

use crate::workqueue::RateLimitingQueueConfig;

/// How to build a [`PriorityQueue`](super::PriorityQueue): the rate-limited queues' one
/// configuration, [`RateLimitingQueueConfig`] (name, metrics provider, rate limiter; unnamed
/// and [`default_controller_rate_limiter`](crate::workqueue::default_controller_rate_limiter)
/// by default).
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
pub type Config<T> = RateLimitingQueueConfig<T>;

/// How to add an item to a [`PriorityQueue`](super::PriorityQueue) (controller-runtime's
/// `AddOpts`).
///
/// ```
/// use std::time::Duration;
/// use kcache::workqueue::priority::{self, AddConfig};
///
/// let config = AddConfig::default().priority(priority::LOW).after(Duration::from_secs(1));
/// assert_eq!(config.priority, -100);
/// assert_eq!(config.after, Some(Duration::from_secs(1)));
/// assert!(!config.rate_limited);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddConfig {
    /// The item's priority; higher is handed out first. Default [`NORMAL`](super::NORMAL).
    pub priority: i32,
    /// Hand the item out only after this delay. Default `None`: at once.
    pub after: Option<Duration>,
    /// Also wait what the queue's rate limiter says (counting one more failure of the item);
    /// with [`after`](Self::after), the longer of the two waits applies.
    pub rate_limited: bool,
}

impl AddConfig {
    /// Sets [`AddConfig::priority`].
    #[must_use]
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Sets [`AddConfig::after`].
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.after = Some(delay);
        self
    }

    /// Sets [`AddConfig::rate_limited`].
    #[must_use]
    pub fn rate_limited(mut self) -> Self {
        self.rate_limited = true;
        self
    }
}
