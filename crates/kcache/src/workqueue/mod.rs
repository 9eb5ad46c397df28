//! Work queues for controllers (client-go's `util/workqueue`): [`Queue`], [`DelayingQueue`],
//! [`RateLimitingQueue`], [`PriorityQueue`] and the [`RateLimiter`]s that pace retries. Every
//! queue implements client-go's interfaces — [`Interface`], [`DelayingInterface`],
//! [`RateLimitingInterface`] — and the two rate-limited queues share one configuration,
//! [`RateLimitingQueueConfig`] (`priority::Config` is the same type).
//!
//! The queues promise what client-go's do:
//! - **Fair**: items are processed in the order in which they are added.
//! - **Stingy**: an item is never processed by two workers at once, and an item added many times
//!   before it is processed is processed once.
//! - **Many producers and consumers**; an item may be added again while it is being processed,
//!   and is then processed again after [`done`](Queue::done).
//! - **Shutdown**: [`shutdown`](Queue::shutdown) refuses new items (they are handed back in a
//!   [`ShutDownError`]); workers drain what is queued and then see `None` from `get`;
//!   [`shutdown_with_drain`](Queue::shutdown_with_drain) also waits for the items in flight.
//!
//! # Background work
//!
//! The caller owns every task. Constructors that need background work (moving delayed items
//! into the queue, refreshing metrics) return a [`Driver`] future next to the queue: spawn it
//! (`tokio::spawn(driver)`) or poll it yourself. A driver ends when its queue shuts down or when
//! the last handle of the queue is dropped.
//!
//! # Example: a controller's worker loop
//!
//! ```
//! use std::time::Duration;
//! use kcache::workqueue::RateLimitingQueue;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let (queue, driver) = RateLimitingQueue::<String>::new();
//! tokio::spawn(driver);
//!
//! queue.add("default/web-0".to_string()).unwrap();
//! queue.add_after("default/web-1".to_string(), Duration::from_millis(10)).unwrap();
//!
//! let mut reconciled = 0;
//! while let Some(key) = queue.get().await {
//!     let ok = true; // reconcile(&key)
//!     if ok {
//!         queue.forget(&key); // success: reset the key's failure count
//!     } else {
//!         queue.add_rate_limited(key.clone()).unwrap(); // retry later
//!     }
//!     queue.done(&key);
//!     reconciled += 1;
//!     if reconciled == 2 {
//!         queue.shutdown_with_drain().await;
//!     }
//! }
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

mod delaying;
mod drain;
mod error;
mod interface;
pub mod metrics;
pub mod priority;
mod queue;
mod rate_limiters;
mod rate_limiting;

pub use delaying::DelayingQueue;
pub use error::{Error, Result, ShutDownError};
pub use interface::{DelayingInterface, Interface, RateLimitingInterface};
pub use metrics::{MetricsProvider, NoopMetricsProvider};
pub use priority::PriorityQueue;
pub use queue::{Queue, QueueConfig};
pub use rate_limiters::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
    default_item_based_rate_limiter,
};
pub use rate_limiting::{RateLimitingQueue, RateLimitingQueueConfig};

/// The background work of a queue, as a future the caller runs (see the
/// [module documentation](self#background-work)).
///
/// It completes when the queue shuts down or when every handle of the queue is dropped.
///
/// # Cancel safety
///
/// Dropping the driver stops the background work: items waiting in
/// [`add_after`](DelayingQueue::add_after) are then never queued, and the unfinished-work
/// gauges stop updating. Nothing else is affected.
#[must_use = "a driver does nothing unless it is spawned or polled"]
pub struct Driver {
    inner: Pin<Box<dyn Future<Output = ()> + Send + 'static>>,
}

impl Driver {
    pub(crate) fn new(future: impl Future<Output = ()> + Send + 'static) -> Self {
        Self {
            inner: Box::pin(future),
        }
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.inner.as_mut().poll(cx)
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod send_sync {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<Queue<String>>();
        assert_send_sync::<DelayingQueue<String>>();
        assert_send_sync::<RateLimitingQueue<String>>();
        assert_send_sync::<PriorityQueue<String>>();
        assert_send_sync::<MaxOfRateLimiter<String>>();
        assert_send_sync::<BucketRateLimiter>();
        assert_send_sync::<ShutDownError<String>>();
        assert_send::<Driver>();
        let queue = Queue::<String>::new();
        let get = queue.get();
        fn is_send<F: Send>(_: &F) {}
        is_send(&get);
    }
}
