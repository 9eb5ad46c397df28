//! The queues' shared interface: client-go's `TypedInterface`, `TypedDelayingInterface` and
//! `TypedRateLimitingInterface`, implemented by every queue of this module, so that code that
//! drives a queue (a worker loop, an event handler that enqueues keys) is written once.

use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use super::{DelayingQueue, PriorityQueue, Queue, RateLimitingQueue, ShutDownError};

/// A work queue (client-go's `workqueue.TypedInterface`): fair, stingy, with a drain. See the
/// [module documentation](super) for the promises.
///
/// ```
/// use kcache::workqueue::{Interface, Queue};
///
/// async fn drain_one<Q: Interface<String>>(queue: &Q) -> Option<String> {
///     let item = queue.get().await?;
///     queue.done(&item);
///     Some(item)
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = Queue::new();
/// queue.add("default/web-0".to_string()).unwrap();
/// assert_eq!(drain_one(&queue).await.as_deref(), Some("default/web-0"));
/// # }
/// ```
pub trait Interface<T>: Send + Sync {
    /// Queues `item` unless it is already queued (it is then processed once); an item being
    /// processed is queued again after its [`done`](Self::done).
    ///
    /// # Errors
    /// [`ShutDownError`] with the item after a shutdown.
    fn add(&self, item: T) -> Result<(), ShutDownError<T>>;

    /// The next item, waiting until there is one; `None` once shut down and drained.
    ///
    /// # Cancel safety
    /// Cancel safe: an item is taken only when the future completes.
    fn get(&self) -> impl Future<Output = Option<T>> + Send;

    /// Marks `item` processed; it may be handed out again if it was added meanwhile.
    fn done(&self, item: &T);

    /// Items ready to be handed out.
    fn len(&self) -> usize;

    /// Whether no item is ready.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Refuses new items; workers drain what is queued and then get `None`.
    fn shutdown(&self);

    /// Like [`shutdown`](Self::shutdown), then waits until no item is being processed.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future stops waiting; the queue stays shut down.
    fn shutdown_with_drain(&self) -> impl Future<Output = ()> + Send;

    /// Whether a shutdown was asked for.
    fn is_shutting_down(&self) -> bool;
}

/// A queue that can add an item after a delay (client-go's `TypedDelayingInterface`).
pub trait DelayingInterface<T>: Interface<T> {
    /// Queues `item` once `delay` has passed; if it is already waiting, the earlier time wins.
    ///
    /// # Errors
    /// [`ShutDownError`] with the item after a shutdown.
    fn add_after(&self, item: T, delay: Duration) -> Result<(), ShutDownError<T>>;
}

/// A queue whose retries are paced by a rate limiter (client-go's
/// `TypedRateLimitingInterface`).
pub trait RateLimitingInterface<T>: DelayingInterface<T> {
    /// Queues `item` after its rate limiter's delay (a retry).
    ///
    /// # Errors
    /// [`ShutDownError`] with the item after a shutdown.
    fn add_rate_limited(&self, item: T) -> Result<(), ShutDownError<T>>;

    /// Stops tracking `item`'s failures (after a success, or when giving up).
    fn forget(&self, item: &T);

    /// How many times `item` was retried since it was last forgotten.
    fn num_requeues(&self, item: &T) -> usize;
}

macro_rules! interface {
    ($queue:ident) => {
        impl<T> Interface<T> for $queue<T>
        where
            T: Clone + Eq + Hash + Send + Sync + 'static,
        {
            fn add(&self, item: T) -> Result<(), ShutDownError<T>> {
                $queue::add(self, item)
            }
            fn get(&self) -> impl Future<Output = Option<T>> + Send {
                $queue::get(self)
            }
            fn done(&self, item: &T) {
                $queue::done(self, item)
            }
            fn len(&self) -> usize {
                $queue::len(self)
            }
            fn shutdown(&self) {
                $queue::shutdown(self)
            }
            fn shutdown_with_drain(&self) -> impl Future<Output = ()> + Send {
                $queue::shutdown_with_drain(self)
            }
            fn is_shutting_down(&self) -> bool {
                $queue::is_shutting_down(self)
            }
        }
    };
}

macro_rules! delaying {
    ($queue:ident) => {
        impl<T> DelayingInterface<T> for $queue<T>
        where
            T: Clone + Eq + Hash + Send + Sync + 'static,
        {
            fn add_after(&self, item: T, delay: Duration) -> Result<(), ShutDownError<T>> {
                $queue::add_after(self, item, delay)
            }
        }
    };
}

macro_rules! rate_limiting {
    ($queue:ident) => {
        impl<T> RateLimitingInterface<T> for $queue<T>
        where
            T: Clone + Eq + Hash + Send + Sync + 'static,
        {
            fn add_rate_limited(&self, item: T) -> Result<(), ShutDownError<T>> {
                $queue::add_rate_limited(self, item)
            }
            fn forget(&self, item: &T) {
                $queue::forget(self, item)
            }
            fn num_requeues(&self, item: &T) -> usize {
                $queue::num_requeues(self, item)
            }
        }
    };
}

interface!(Queue);
interface!(DelayingQueue);
interface!(RateLimitingQueue);
interface!(PriorityQueue);
delaying!(DelayingQueue);
delaying!(RateLimitingQueue);
delaying!(PriorityQueue);
rate_limiting!(RateLimitingQueue);
rate_limiting!(PriorityQueue);

#[cfg(test)]
mod tests {
    use super::*;

    /// One worker loop for every queue: the same items come out of each.
    async fn drain<Q: RateLimitingInterface<&'static str>>(q: &Q) -> Vec<&'static str> {
        q.add("a").unwrap();
        q.add("b").unwrap();
        q.add("a").unwrap();
        q.add_after("c", Duration::from_millis(10)).unwrap();
        q.add_rate_limited("d").unwrap();
        let mut out = Vec::new();
        while out.len() < 4 {
            let item = q.get().await.unwrap();
            q.forget(&item);
            q.done(&item);
            out.push(item);
        }
        assert_eq!(q.num_requeues(&"d"), 0);
        q.shutdown_with_drain().await;
        assert!(q.is_shutting_down());
        assert!(q.add("e").is_err());
        out.sort_unstable();
        out
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_limited_queues_behave_alike_through_the_interface() {
        let (rl, driver) = RateLimitingQueue::new();
        tokio::spawn(driver);
        assert_eq!(drain(&rl).await, ["a", "b", "c", "d"]);
        let (pq, driver) = PriorityQueue::new();
        tokio::spawn(driver);
        assert_eq!(drain(&pq).await, ["a", "b", "c", "d"]);
    }

    #[tokio::test]
    async fn a_plain_queue_through_the_interface() {
        let q = Queue::new();
        Interface::add(&q, 1).unwrap();
        Interface::add(&q, 1).unwrap();
        assert_eq!(Interface::len(&q), 1);
        let item = Interface::get(&q).await.unwrap();
        Interface::done(&q, &item);
        assert!(Interface::is_empty(&q));
    }
}
