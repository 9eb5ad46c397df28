//! The queues' shared interface: client-go's `TypedInterface`, `TypedDelayingInterface` and
//! `TypedRateLimitingInterface`, implemented by every queue of this module, so that code that
//! drives a queue (a worker loop, an event handler that enqueues keys) is written once.

use std::future::Future;
use std::hash::Hash;
use std::ops::Deref;
use std::time::Duration;

use super::priority::{AddConfig, NORMAL};
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

    /// Queues `item` as `config` says (controller-runtime's `AddWithOpts`): at its priority,
    /// after its delay, rate limited. A queue without priorities ignores the priority; by
    /// default a rate-limited add ignores `config.after` (a [`PriorityQueue`] waits the longer
    /// of the two).
    ///
    /// # Errors
    /// [`ShutDownError`] with the item after a shutdown.
    fn add_with_config(&self, item: T, config: AddConfig) -> Result<(), ShutDownError<T>> {
        match config.after {
            _ if config.rate_limited => self.add_rate_limited(item),
            Some(delay) => self.add_after(item, delay),
            None => self.add(item),
        }
    }

    /// Like [`get`](Interface::get), with the priority the item was queued at
    /// (controller-runtime's `GetWithPriority`); by default always
    /// [`NORMAL`](super::priority::NORMAL).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`get`](Interface::get).
    fn get_with_priority(&self) -> impl Future<Output = Option<(T, i32)>> + Send {
        let get = self.get();
        async move { get.await.map(|item| (item, NORMAL)) }
    }
}

/// A handle that dereferences to a queue is that queue: [`DelayingQueue`] (a [`Queue`] plus
/// timers) and [`RateLimitingQueue`] (a [`DelayingQueue`] plus a rate limiter) get their
/// [`Interface`] here, as do `&Q`, `Arc<Q>` and `Box<Q>` of any queue.
impl<T, Q> Interface<T> for Q
where
    Q: Deref + Send + Sync,
    Q::Target: Interface<T>,
{
    fn add(&self, item: T) -> Result<(), ShutDownError<T>> {
        (**self).add(item)
    }
    fn get(&self) -> impl Future<Output = Option<T>> + Send {
        (**self).get()
    }
    fn done(&self, item: &T) {
        (**self).done(item);
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    fn shutdown(&self) {
        (**self).shutdown();
    }
    fn shutdown_with_drain(&self) -> impl Future<Output = ()> + Send {
        (**self).shutdown_with_drain()
    }
    fn is_shutting_down(&self) -> bool {
        (**self).is_shutting_down()
    }
}

impl<T> Interface<T> for Queue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn add(&self, item: T) -> Result<(), ShutDownError<T>> {
        Queue::add(self, item)
    }
    fn get(&self) -> impl Future<Output = Option<T>> + Send {
        Queue::get(self)
    }
    fn done(&self, item: &T) {
        Queue::done(self, item);
    }
    fn len(&self) -> usize {
        Queue::len(self)
    }
    fn shutdown(&self) {
        Queue::shutdown(self);
    }
    fn shutdown_with_drain(&self) -> impl Future<Output = ()> + Send {
        Queue::shutdown_with_drain(self)
    }
    fn is_shutting_down(&self) -> bool {
        Queue::is_shutting_down(self)
    }
}

impl<T> DelayingInterface<T> for DelayingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn add_after(&self, item: T, delay: Duration) -> Result<(), ShutDownError<T>> {
        DelayingQueue::add_after(self, item, delay)
    }
}

impl<T> DelayingInterface<T> for RateLimitingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn add_after(&self, item: T, delay: Duration) -> Result<(), ShutDownError<T>> {
        DelayingQueue::add_after(self, item, delay)
    }
}

impl<T> RateLimitingInterface<T> for RateLimitingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn add_rate_limited(&self, item: T) -> Result<(), ShutDownError<T>> {
        RateLimitingQueue::add_rate_limited(self, item)
    }
    fn forget(&self, item: &T) {
        RateLimitingQueue::forget(self, item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        RateLimitingQueue::num_requeues(self, item)
    }
}

impl<T> Interface<T> for PriorityQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn add(&self, item: T) -> Result<(), ShutDownError<T>> {
        PriorityQueue::add(self, item)
    }
    fn get(&self) -> impl Future<Output = Option<T>> + Send {
        PriorityQueue::get(self)
    }
    fn done(&self, item: &T) {
        PriorityQueue::done(self, item);
    }
    fn len(&self) -> usize {
        PriorityQueue::len(self)
    }
    fn shutdown(&self) {
        PriorityQueue::shutdown(self);
    }
    fn shutdown_with_drain(&self) -> impl Future<Output = ()> + Send {
        PriorityQueue::shutdown_with_drain(self)
    }
    fn is_shutting_down(&self) -> bool {
        PriorityQueue::is_shutting_down(self)
    }
}

impl<T> DelayingInterface<T> for PriorityQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn add_after(&self, item: T, delay: Duration) -> Result<(), ShutDownError<T>> {
        PriorityQueue::add_after(self, item, delay)
    }
}

impl<T> RateLimitingInterface<T> for PriorityQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn add_rate_limited(&self, item: T) -> Result<(), ShutDownError<T>> {
        PriorityQueue::add_rate_limited(self, item)
    }
    fn forget(&self, item: &T) {
        PriorityQueue::forget(self, item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        PriorityQueue::num_requeues(self, item)
    }
    fn add_with_config(&self, item: T, config: AddConfig) -> Result<(), ShutDownError<T>> {
        PriorityQueue::add_with_config(self, item, config)
    }
    fn get_with_priority(&self) -> impl Future<Output = Option<(T, i32)>> + Send {
        PriorityQueue::get_with_priority(self)
    }
}

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
