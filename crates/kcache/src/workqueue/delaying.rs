//! A work queue that can add an item later: [`DelayingQueue`].

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Driver;
use super::error::ShutDownError;
use super::queue::{Queue, QueueConfig, Shared};

/// Delays are capped at 30 years (tokio's own "far future"): a longer delay means "never" in
/// practice and would overflow `Instant` arithmetic.
const MAX_DELAY: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// A [`Queue`] that can also add an item after a delay (client-go's `DelayingInterface`).
///
/// Waiting items live in a timer heap; the queue's [`Driver`] moves each into the queue when
/// its time comes. If an item is already waiting, [`add_after`](Self::add_after) keeps the
/// *earliest* of the requested times. Time is tokio's, so tests can pause and advance it.
///
/// Shutting down drops the items still waiting, and the driver ends.
///
/// It dereferences to its [`Queue`], so [`add`](Queue::add), [`get`](Queue::get),
/// [`done`](Queue::done), [`len`](Queue::len) (which does not count the items still waiting
/// for their delay) and the shutdown methods are the queue's.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache::workqueue::DelayingQueue;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (queue, driver) = DelayingQueue::new();
/// tokio::spawn(driver);
///
/// queue.add_after("retry-me", Duration::from_millis(5)).unwrap();
/// assert_eq!(queue.len(), 0); // not yet
/// assert_eq!(queue.get().await, Some("retry-me"));
/// # }
/// ```
pub struct DelayingQueue<T> {
    queue: Queue<T>,
    waiting: Arc<Waiting<T>>,
}

impl<T> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            waiting: Arc::clone(&self.waiting),
        }
    }
}

impl<T> fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingQueue")
            .field("queue", &self.queue)
            .field("waiting", &self.waiting.timers.lock().by_item.len())
            .finish()
    }
}

/// The items waiting for their time, shared by the handles and the driver.
struct Waiting<T> {
    timers: Mutex<Timers<T>>,
    /// Signalled when an add makes the earliest deadline earlier.
    earlier: Notify,
}

struct Timers<T> {
    /// Min-heap on (ready_at, seq). May hold stale entries: an entry is live only if `by_item`
    /// maps its item to its `seq`.
    heap: BinaryHeap<Timer<T>>,
    /// Each waiting item's live deadline and sequence number.
    by_item: HashMap<T, (Instant, u64)>,
    next_seq: u64,
}

struct Timer<T> {
    ready_at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Timer<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<T> Eq for Timer<T> {}
impl<T> PartialOrd for Timer<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Timer<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: the earliest deadline (then the oldest request) is the heap's maximum.
        (other.ready_at, other.seq).cmp(&(self.ready_at, self.seq))
    }
}

impl<T: Clone + Eq + Hash> Timers<T> {
    /// Records a request; returns whether it became the earliest deadline.
    fn insert(&mut self, item: T, ready_at: Instant) -> bool {
        if let Some(&(existing, _)) = self.by_item.get(&item)
            && existing <= ready_at
        {
            return false;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_item.insert(item.clone(), (ready_at, seq));
        self.heap.push(Timer {
            ready_at,
            seq,
            item,
        });
        // Stale entries pile up only when deadlines are moved earlier; rebuild when they
        // outnumber the live ones so memory stays proportional to the waiting items.
        if self.heap.len() > 2 * self.by_item.len() + 64 {
            self.compact();
        }
        self.heap.peek().is_some_and(|head| head.seq == seq)
    }

    fn compact(&mut self) {
        let by_item = &self.by_item;
        self.heap.retain(|timer| {
            by_item
                .get(&timer.item)
                .is_some_and(|&(_, s)| s == timer.seq)
        });
    }

    /// Removes the items whose time has come, earliest first; returns them and the next
    /// live deadline.
    fn take_ready(&mut self, now: Instant) -> (Vec<T>, Option<Instant>) {
        let mut ready = Vec::new();
        while let Some(head) = self.heap.peek() {
            let live = self
                .by_item
                .get(&head.item)
                .is_some_and(|&(_, seq)| seq == head.seq);
            if live && head.ready_at > now {
                return (ready, Some(head.ready_at));
            }
            let Some(timer) = self.heap.pop() else { break };
            if live {
                self.by_item.remove(&timer.item);
                ready.push(timer.item);
            }
        }
        (ready, None)
    }

    fn clear(&mut self) {
        self.heap.clear();
        self.by_item.clear();
    }
}

impl<T> DelayingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed delaying queue without metrics, and its [`Driver`], which must run (e.g.
    /// `tokio::spawn(driver)`) for delayed items to reach the queue.
    pub fn new() -> (Self, Driver) {
        Self::with_config(QueueConfig::default())
    }

    /// A delaying queue with a name and metrics provider, and its [`Driver`], which must run
    /// for delayed items to reach the queue (it also refreshes the unfinished-work gauges).
    pub fn with_config(config: QueueConfig) -> (Self, Driver) {
        let shared = Shared::new(&config);
        let waiting = Arc::new(Waiting {
            timers: Mutex::new(Timers {
                heap: BinaryHeap::new(),
                by_item: HashMap::new(),
                next_seq: 0,
            }),
            earlier: Notify::new(),
        });
        let driver = Driver::new(drive(Arc::clone(&shared), Arc::clone(&waiting)));
        let queue = Self {
            queue: Queue::from_shared(shared),
            waiting,
        };
        (queue, driver)
    }

    /// Adds `item` once `delay` has passed; a zero delay adds it at once.
    ///
    /// If the item is already waiting, the earlier of the two times wins. Waiting does not stop
    /// the item from being added directly meanwhile (it will then be added again when its time
    /// comes, as in client-go). Counts as a retry in the metrics. Delays beyond 30 years are
    /// capped there.
    ///
    /// # Errors
    ///
    /// [`ShutDownError`] with the item when the queue is shutting down.
    pub fn add_after(&self, item: T, delay: Duration) -> Result<(), ShutDownError<T>> {
        let shared = &self.queue.shared;
        if shared.is_shutting_down() {
            return Err(ShutDownError(item));
        }
        if let Some(metrics) = shared.metrics() {
            metrics.retry();
        }
        if delay.is_zero() {
            return shared.add(item);
        }
        let ready_at = Instant::now() + delay.min(MAX_DELAY);
        let earliest = {
            let mut timers = self.waiting.timers.lock();
            // Checked again under the timers' lock: the driver clears them after a shutdown,
            // so an item accepted here is never left behind in a stopped queue.
            if shared.stopped.is_cancelled() {
                return Err(ShutDownError(item));
            }
            timers.insert(item, ready_at)
        };
        if earliest {
            self.waiting.earlier.notify_one();
        }
        Ok(())
    }

    /// The number of items waiting for their delay (for tests and debugging).
    pub fn waiting_len(&self) -> usize {
        self.waiting.timers.lock().by_item.len()
    }
}

/// A delaying queue is a [`Queue`] (whose methods it offers as its own) plus the timers.
impl<T> Deref for DelayingQueue<T> {
    type Target = Queue<T>;

    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

/// The driver: moves due items into the queue, and refreshes the metrics, until the queue stops.
async fn drive<T>(shared: Arc<Shared<T>>, waiting: Arc<Waiting<T>>)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    let metrics = Arc::clone(&shared).update_unfinished_work_loop();
    let timers = async {
        loop {
            let mut earlier = pin!(waiting.earlier.notified());
            earlier.as_mut().enable();
            let (ready, next) = waiting.timers.lock().take_ready(Instant::now());
            for item in ready {
                // Refused only when shutting down; the loop ends just below then.
                let _ = shared.add(item);
            }
            let sleep = async {
                match next {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shared.stopped.cancelled() => break,
                () = earlier => {}
                () = sleep => {}
            }
        }
        waiting.timers.lock().clear();
    };
    tokio::join!(metrics, timers);
}

#[cfg(test)]
mod tests;
