//! client-go v0.36.5's `util/workqueue` tests — `queue_test.go`, `delaying_queue_test.go`,
//! `rate_limiting_queue_test.go`, `default_rate_limiters_test.go` and `metrics_test.go` —
//! ported one for one to kcache's [`Queue`], [`DelayingQueue`], [`RateLimitingQueue`], rate
//! limiters and [`MetricsProvider`]. kcache has no parallelizer, so `parallelizer_test.go` has
//! nothing to port.
//!
//! Each test is named after the Go test it ports (snake case). Where client-go steps a fake
//! clock, these tests pause tokio's clock and advance it. `README.md` lists every Go
//! test with its Rust counterpart and status.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kcache::workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};
use kcache::workqueue::{
    DelayingQueue, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    Queue, QueueConfig, RateLimiter, RateLimitingQueue, RateLimitingQueueConfig,
    WithMaxWaitRateLimiter,
};
use parking_lot::Mutex;
use tokio::task::{JoinHandle, yield_now};
use tokio::time::advance;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// How long any wait may take before the test fails (in paused-time tests, virtual time).
const WAIT: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the test loudly if it takes longer than [`WAIT`].
async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// Awaits a spawned task, failing the test if it panicked or did not finish in time.
async fn join<T>(what: &str, task: JoinHandle<T>) -> T {
    within(what, task)
        .await
        .unwrap_or_else(|e| panic!("{what} failed: {e}"))
}

/// Lets every other task (a queue's driver in particular) run until it waits. Yielding keeps
/// this task ready, so a paused clock is never auto-advanced meanwhile.
async fn settle() {
    for _ in 0..64 {
        yield_now().await;
    }
}

/// Yields until `len()` is `want` (client-go's `waitForAdded` polls `Len()` the same way).
async fn wait_for_len(what: &str, len: impl Fn() -> usize, want: usize) {
    for _ in 0..10_000 {
        if len() == want {
            return;
        }
        yield_now().await;
    }
    panic!("{what}: length stayed {} instead of {want}", len());
}

/// Asserts for a while that `len()` stays 0 (client-go polls `Len()` for 30 ms expecting a
/// timeout).
async fn stays_empty(what: &str, len: impl Fn() -> usize) {
    for _ in 0..256 {
        assert_eq!(len(), 0, "{what}: should not have added");
        yield_now().await;
    }
}

// ---------------------------------------------------------------------------------------------
// queue_test.go
// ---------------------------------------------------------------------------------------------

/// What a producer adds once the queue is shutting down; no worker may ever receive it.
const ADDED_AFTER_SHUTDOWN: &str = "added after shutdown!";

async fn basic(drain: bool) {
    let queue: Queue<String> = Queue::new();

    const PRODUCERS: usize = 50;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|i| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    queue
                        .add(i.to_string())
                        .expect("the queue is not shutting down yet");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        })
        .collect();

    const CONSUMERS: usize = 10;
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                while let Some(item) = queue.get().await {
                    assert_ne!(
                        item, ADDED_AFTER_SHUTDOWN,
                        "got an item added after shutdown"
                    );
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    queue.done(&item);
                }
            })
        })
        .collect();

    for producer in producers {
        join("a producer", producer).await;
    }
    if drain {
        within("shutdown_with_drain", queue.shutdown_with_drain()).await;
    } else {
        queue.shutdown();
    }
    // client-go drops it silently; kcache hands it back.
    let refused = queue.add(ADDED_AFTER_SHUTDOWN.to_owned());
    assert_eq!(
        refused.map_err(|e| e.into_inner()),
        Err(ADDED_AFTER_SHUTDOWN.to_owned())
    );
    for consumer in consumers {
        join("a consumer", consumer).await;
    }
    assert_eq!(queue.len(), 0, "expected the queue to be empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_basic() {
    // client-go runs the same scenario once with ShutDown and once with ShutDownWithDrain.
    basic(false).await;
    basic(true).await;
}

async fn add_while_processing(drain: bool) {
    let queue: Queue<usize> = Queue::new();

    const PRODUCERS: usize = 50;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|i| {
            let queue = queue.clone();
            tokio::spawn(async move {
                queue.add(i).expect("the queue is not shutting down yet");
            })
        })
        .collect();

    const CONSUMERS: usize = 10;
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                // Every worker adds every item it gets back once more while still holding it:
                // the dirty-while-processing case.
                let mut counters: HashMap<usize, usize> = HashMap::new();
                while let Some(item) = queue.get().await {
                    let count = counters.entry(item).or_default();
                    *count += 1;
                    if *count < 2 {
                        // Refused only once the queue is shutting down (client-go drops it then).
                        let _ = queue.add(item);
                    }
                    queue.done(&item);
                }
            })
        })
        .collect();

    for producer in producers {
        join("a producer", producer).await;
    }
    if drain {
        within("shutdown_with_drain", queue.shutdown_with_drain()).await;
    } else {
        queue.shutdown();
    }
    for consumer in consumers {
        join("a consumer", consumer).await;
    }
    assert_eq!(queue.len(), 0, "expected the queue to be empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_add_while_processing() {
    // client-go runs the same scenario once with ShutDown and once with ShutDownWithDrain.
    add_while_processing(false).await;
    add_while_processing(true).await;
}

#[test]
fn test_len() {
    let q = Queue::new();
    q.add("foo").unwrap();
    assert_eq!(q.len(), 1);
    q.add("bar").unwrap();
    assert_eq!(q.len(), 2);
    q.add("foo").unwrap(); // already queued: the length stays
    assert_eq!(q.len(), 2);
}

#[tokio::test]
async fn test_reinsert() {
    let q = Queue::new();
    q.add("foo").unwrap();

    // Start processing.
    let i = within("get", q.get()).await;
    assert_eq!(i, Some("foo"));
    let i = i.unwrap();

    // Add it back while processing, then finish.
    q.add(i).unwrap();
    q.done(&i);

    // It is back on the queue.
    let i = within("get", q.get()).await;
    assert_eq!(i, Some("foo"));
    q.done(&i.unwrap());

    assert_eq!(q.len(), 0, "expected the queue to be empty");
}

#[tokio::test]
async fn test_collapse() {
    // client-go plugs a tracing queue in underneath to also check that the second add only
    // "touched" the item; kcache's queue storage is not pluggable, so that check has no
    // counterpart. The observable behaviour is ported in full.
    let q = Queue::new();
    q.add("bar").unwrap();
    q.add("bar").unwrap();

    let i = within("get", q.get()).await;
    assert_eq!(i, Some("bar"));
    q.done(&i.unwrap());

    assert_eq!(q.len(), 0, "expected the queue to be empty");
}

#[tokio::test(start_paused = true)]
async fn test_collapse_while_processing() {
    // client-go also checks, through a tracing queue underneath, that nothing was "touched";
    // kcache's queue storage is not pluggable, so that check has no counterpart.
    let q = Queue::new();
    q.add("foo").unwrap();

    // Start processing.
    let i = within("get", q.get()).await;
    assert_eq!(i, Some("foo"));

    // Add the same item twice while it is being processed.
    q.add("foo").unwrap();
    q.add("foo").unwrap();

    // Another worker waits for it.
    let worker = {
        let q = q.clone();
        tokio::spawn(async move {
            let i = q.get().await;
            assert_eq!(i, Some("foo"));
            q.done(&i.unwrap());
        })
    };

    // Give the worker a head start (paused clock: this is instant, after the worker waits).
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !worker.is_finished(),
        "the worker should be blocked until we are done"
    );
    q.done(&"foo");

    // The worker takes the re-added item; then nothing is left.
    join("the worker", worker).await;
    assert_eq!(q.len(), 0, "expected the queue to be empty");
}

/// Calls `get` until it reports that the queue is shut down, dropping whatever it returns.
async fn get_until_shut_down<T>(q: &Queue<T>)
where
    T: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    within("get to report the shutdown", async {
        while q.get().await.is_some() {}
    })
    .await;
}

#[tokio::test]
async fn test_queue_drainage_using_shut_down_with_drain() {
    let q = Queue::new();
    q.add("foo").unwrap();
    q.add("bar").unwrap();
    let first_item = within("get", q.get()).await.unwrap();
    let second_item = within("get", q.get()).await.unwrap();

    let finished = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown_with_drain().await })
    };

    // The drain has started before the items are done: it waits for them.
    get_until_shut_down(&q).await;

    q.done(&first_item);
    q.done(&second_item);

    join("shutdown_with_drain", finished).await;
}

#[tokio::test]
async fn test_no_queue_drainage_using_shut_down() {
    let q = Queue::new();
    q.add("foo").unwrap();
    q.add("bar").unwrap();
    within("get", q.get()).await.unwrap();
    within("get", q.get()).await.unwrap();

    // ShutDown does not wait for the two items in flight.
    let finished = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown() })
    };
    join("shutdown", finished).await;
}

#[tokio::test]
async fn test_force_queue_shutdown_using_shut_down() {
    let q = Queue::new();
    q.add("foo").unwrap();
    q.add("bar").unwrap();
    within("get", q.get()).await.unwrap();
    within("get", q.get()).await.unwrap();

    let finished = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown_with_drain().await })
    };

    // The drain has started before ShutDown is called.
    get_until_shut_down(&q).await;

    // A second, forceful shutdown (e.g. a second SIGTERM) ends the drain although neither item
    // is done.
    q.shutdown();

    join("shutdown_with_drain", finished).await;
}

#[tokio::test]
async fn test_queue_drainage_using_shut_down_with_drain_with_dirty_item() {
    let q = Queue::new();
    q.add("foo").unwrap();
    let gotten = within("get", q.get()).await.unwrap();
    q.add("foo").unwrap();

    let finished = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown_with_drain().await })
    };

    // The drain has started (and waits).
    get_until_shut_down(&q).await;

    // Finishing the work puts the dirty item back into the queue...
    q.done(&gotten);
    let again = within("get", q.get()).await;
    assert!(again.is_some(), "should not have been done");
    q.done(&again.unwrap());

    // ...and now the queue is really done.
    assert!(
        within("get", q.get()).await.is_none(),
        "should have been done"
    );

    join("shutdown_with_drain", finished).await;
}

#[tokio::test]
async fn test_garbage_collection() {
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct BigObject {
        data: Vec<u8>,
    }
    let leak_queue: Queue<Arc<BigObject>> = Queue::new();
    let c = Arc::new(BigObject {
        data: b"hello".to_vec(),
    });
    let collected = Arc::downgrade(&c);

    leak_queue.add(c).unwrap();
    let o = within("get", leak_queue.get()).await.unwrap();
    leak_queue.done(&o);
    drop(o);

    // The queue is still alive, but must hold on to nothing once the item is done.
    assert!(
        collected.upgrade().is_none(),
        "object was not released by the queue"
    );
    drop(leak_queue);
}

// ---------------------------------------------------------------------------------------------
// delaying_queue_test.go
// ---------------------------------------------------------------------------------------------

fn delaying_queue() -> DelayingQueue<&'static str> {
    let (q, driver) = DelayingQueue::new();
    tokio::spawn(driver);
    q
}

#[tokio::test(start_paused = true)]
async fn test_simple_queue() {
    let q = delaying_queue();
    let first = "foo";

    q.add_after(first, Duration::from_millis(50)).unwrap();
    settle().await;
    assert_eq!(q.waiting_len(), 1);
    assert_eq!(q.len(), 0, "should not have added");

    advance(Duration::from_millis(60)).await;
    wait_for_len("should have added", || q.len(), 1).await;
    let item = within("get", q.get()).await.unwrap();
    q.done(&item);

    // Step past the next heartbeat: nothing more is added.
    advance(Duration::from_secs(10)).await;
    stays_empty("after the heartbeat", || q.len()).await;
    assert_eq!(q.len(), 0, "should not have added");
}

#[tokio::test(start_paused = true)]
async fn test_deduping() {
    let q = delaying_queue();
    let first = "foo";

    q.add_after(first, Duration::from_millis(50)).unwrap();
    settle().await;
    q.add_after(first, Duration::from_millis(70)).unwrap();
    settle().await;
    assert_eq!(q.len(), 0, "should not have added");

    // Past the first time: the item is added.
    advance(Duration::from_millis(60)).await;
    wait_for_len("should have added", || q.len(), 1).await;
    let item = within("get", q.get()).await.unwrap();
    q.done(&item);

    // Past the second time: the later request was merged into the earlier one.
    advance(Duration::from_millis(20)).await;
    stays_empty("past the second add", || q.len()).await;

    // Again, but now the later request has the earlier time, which wins.
    q.add_after(first, Duration::from_millis(50)).unwrap();
    q.add_after(first, Duration::from_millis(30)).unwrap();
    settle().await;
    assert_eq!(q.len(), 0, "should not have added");

    advance(Duration::from_millis(40)).await;
    wait_for_len("should have added", || q.len(), 1).await;
    let item = within("get", q.get()).await.unwrap();
    q.done(&item);

    // Past the other request's time.
    advance(Duration::from_millis(20)).await;
    stays_empty("past the second add", || q.len()).await;
}

#[tokio::test(start_paused = true)]
async fn test_add_two_fire_early() {
    let q = delaying_queue();
    let (first, second, third) = ("foo", "bar", "baz");

    q.add_after(first, Duration::from_secs(1)).unwrap();
    q.add_after(second, Duration::from_millis(50)).unwrap();
    settle().await;
    assert_eq!(q.len(), 0, "should not have added");

    advance(Duration::from_millis(60)).await;
    wait_for_len("second", || q.len(), 1).await;
    assert_eq!(within("get", q.get()).await, Some(second));

    q.add_after(third, Duration::from_secs(2)).unwrap();

    advance(Duration::from_secs(1)).await;
    wait_for_len("first", || q.len(), 1).await;
    assert_eq!(within("get", q.get()).await, Some(first));

    advance(Duration::from_secs(2)).await;
    wait_for_len("third", || q.len(), 1).await;
    assert_eq!(within("get", q.get()).await, Some(third));
}

#[tokio::test(start_paused = true)]
async fn test_copy_shifting() {
    let q = delaying_queue();
    let (first, second, third) = ("foo", "bar", "baz");

    q.add_after(first, Duration::from_secs(1)).unwrap();
    q.add_after(second, Duration::from_millis(500)).unwrap();
    q.add_after(third, Duration::from_millis(250)).unwrap();
    settle().await;
    assert_eq!(q.len(), 0, "should not have added");

    advance(Duration::from_secs(2)).await;
    wait_for_len("all three", || q.len(), 3).await;
    // In the order of their times, not of their adds.
    assert_eq!(within("get", q.get()).await, Some(third));
    assert_eq!(within("get", q.get()).await, Some(second));
    assert_eq!(within("get", q.get()).await, Some(first));
}

// ---------------------------------------------------------------------------------------------
// rate_limiting_queue_test.go
// ---------------------------------------------------------------------------------------------

/// Checks that `item`, just rate limited, reaches the queue exactly `delay` later: not a
/// microsecond before, and at that instant. (client-go reads the wait entry's `readyAt`
/// directly.) The item is then taken and done, leaving the queue empty.
async fn expect_ready_after(
    q: &RateLimitingQueue<&'static str>,
    item: &'static str,
    delay: Duration,
) {
    let tick = Duration::from_micros(1);
    assert_eq!(q.waiting_len(), 1, "{item} should be waiting");
    advance(delay - tick).await;
    settle().await;
    assert_eq!(q.len(), 0, "{item} was queued before {delay:?}");
    advance(tick).await;
    wait_for_len(item, || q.len(), 1).await;
    assert_eq!(within("get", q.get()).await, Some(item));
    q.done(&item);
}

#[tokio::test(start_paused = true)]
async fn test_rate_limiting_queue() {
    let limiter =
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1));
    let (queue, driver) =
        RateLimitingQueue::with_config(RateLimitingQueueConfig::default().rate_limiter(limiter));
    tokio::spawn(driver);

    // client-go rate limits "one" twice in a row and reads both wait entries. In kcache a
    // second request for an item that is still waiting merges into the earlier time, so each
    // wait is observed (and its item taken) before the next request.
    queue.add_rate_limited("one").unwrap();
    expect_ready_after(&queue, "one", Duration::from_millis(1)).await;
    queue.add_rate_limited("one").unwrap();
    expect_ready_after(&queue, "one", Duration::from_millis(2)).await;
    assert_eq!(queue.num_requeues(&"one"), 2);

    queue.add_rate_limited("two").unwrap();
    expect_ready_after(&queue, "two", Duration::from_millis(1)).await;
    queue.add_rate_limited("two").unwrap();
    expect_ready_after(&queue, "two", Duration::from_millis(2)).await;

    queue.forget(&"one");
    assert_eq!(queue.num_requeues(&"one"), 0);
    queue.add_rate_limited("one").unwrap();
    expect_ready_after(&queue, "one", Duration::from_millis(1)).await;
}

// ---------------------------------------------------------------------------------------------
// default_rate_limiters_test.go
// ---------------------------------------------------------------------------------------------

const MS: Duration = Duration::from_millis(1);

#[test]
fn test_item_exponential_failure_rate_limiter() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));

    assert_eq!(limiter.when(&"one"), MS);
    assert_eq!(limiter.when(&"one"), 2 * MS);
    assert_eq!(limiter.when(&"one"), 4 * MS);
    assert_eq!(limiter.when(&"one"), 8 * MS);
    assert_eq!(limiter.when(&"one"), 16 * MS);
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(limiter.when(&"two"), MS);
    assert_eq!(limiter.when(&"two"), 2 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), MS);
}

#[test]
fn test_item_exponential_failure_rate_limiter_over_flow() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000));
    for _ in 0..5 {
        limiter.when(&"one");
    }
    assert_eq!(limiter.when(&"one"), 32 * MS);

    for _ in 0..1000 {
        limiter.when(&"overflow1");
    }
    assert_eq!(limiter.when(&"overflow1"), Duration::from_secs(1000));

    let minute = Duration::from_secs(60);
    let hour = 60 * minute;
    let limiter = ItemExponentialFailureRateLimiter::new(minute, 1000 * hour);
    for _ in 0..2 {
        limiter.when(&"two");
    }
    assert_eq!(limiter.when(&"two"), 4 * minute);

    for _ in 0..1000 {
        limiter.when(&"overflow2");
    }
    assert_eq!(limiter.when(&"overflow2"), 1000 * hour);
}

#[test]
fn test_item_fast_slow_rate_limiter() {
    let slow = Duration::from_secs(10);
    let limiter = ItemFastSlowRateLimiter::new(5 * MS, slow, 3);

    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), slow);
    assert_eq!(limiter.when(&"one"), slow);
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), 5 * MS);
}

#[test]
fn test_max_of_rate_limiter() {
    let slow = Duration::from_secs(3);
    let limiter: MaxOfRateLimiter<&'static str> = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(5 * MS, slow, 3)),
        Box::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        )),
    ]);

    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), slow);
    assert_eq!(limiter.when(&"one"), slow);
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), 5 * MS);
}

/// A limiter that answers `base_delay` for its first `threshold` calls, whatever the item, and
/// `max_delay` after that. It tracks no items.
struct StepRateLimiter {
    count: Mutex<usize>,
    threshold: usize,
    base_delay: Duration,
    max_delay: Duration,
}

impl StepRateLimiter {
    fn new(base_delay: Duration, max_delay: Duration, threshold: usize) -> Self {
        Self {
            count: Mutex::new(0),
            threshold,
            base_delay,
            max_delay,
        }
    }
}

impl<T> RateLimiter<T> for StepRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        let mut count = self.count.lock();
        *count += 1;
        if *count <= self.threshold {
            self.base_delay
        } else {
            self.max_delay
        }
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}

#[test]
fn test_with_max_wait_rate_limiter() {
    let limiter = WithMaxWaitRateLimiter::new(
        StepRateLimiter::new(5 * MS, Duration::from_secs(1000), 100),
        Duration::from_secs(500),
    );
    for i in 0..100 {
        assert_eq!(limiter.when(&i), 5 * MS, "call for {i}");
    }
    for i in 100..200 {
        assert_eq!(limiter.when(&i), Duration::from_secs(500), "call for {i}");
    }
}

// ---------------------------------------------------------------------------------------------
// metrics_test.go
// ---------------------------------------------------------------------------------------------

/// How often kcache refreshes the unfinished-work gauges (documented; client-go's tests inject
/// 1 ms instead).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// One recorded metric, usable as a gauge, settable gauge, counter or histogram.
#[derive(Debug, Default)]
struct TestMetric {
    state: Mutex<TestMetricState>,
}

#[derive(Debug, Default)]
struct TestMetricState {
    inc: i64,
    dec: i64,
    set: f64,
    /// How many times `set` was called.
    sets: usize,
    observed_value: f64,
    observed_count: usize,
}

impl TestMetric {
    /// The last value set, if not zero; otherwise increments minus decrements.
    fn gauge_value(&self) -> f64 {
        let state = self.state.lock();
        if state.set != 0.0 {
            state.set
        } else {
            (state.inc - state.dec) as f64
        }
    }

    fn observation_value(&self) -> f64 {
        self.state.lock().observed_value
    }

    fn observation_count(&self) -> usize {
        self.state.lock().observed_count
    }

    fn set_count(&self) -> usize {
        self.state.lock().sets
    }
}

/// A handle on a shared [`TestMetric`], as the queue's provider hands it out.
struct Handle(Arc<TestMetric>);

impl GaugeMetric for Handle {
    fn inc(&self) {
        self.0.state.lock().inc += 1;
    }
    fn dec(&self) {
        self.0.state.lock().dec += 1;
    }
}

impl CounterMetric for Handle {
    fn inc(&self) {
        self.0.state.lock().inc += 1;
    }
}

impl SettableGaugeMetric for Handle {
    fn set(&self, value: f64) {
        let mut state = self.0.state.lock();
        state.set = value;
        state.sets += 1;
    }
}

impl HistogramMetric for Handle {
    fn observe(&self, value: f64) {
        let mut state = self.0.state.lock();
        state.observed_value = value;
        state.observed_count += 1;
    }
}

#[derive(Debug, Default)]
struct TestMetricsProvider {
    depth: Arc<TestMetric>,
    adds: Arc<TestMetric>,
    latency: Arc<TestMetric>,
    duration: Arc<TestMetric>,
    unfinished: Arc<TestMetric>,
    longest: Arc<TestMetric>,
    retries: Arc<TestMetric>,
}

impl MetricsProvider for TestMetricsProvider {
    fn new_depth_metric(&self, _name: &str) -> Box<dyn GaugeMetric> {
        Box::new(Handle(Arc::clone(&self.depth)))
    }
    fn new_adds_metric(&self, _name: &str) -> Box<dyn CounterMetric> {
        Box::new(Handle(Arc::clone(&self.adds)))
    }
    fn new_latency_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(Handle(Arc::clone(&self.latency)))
    }
    fn new_work_duration_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(Handle(Arc::clone(&self.duration)))
    }
    fn new_unfinished_work_seconds_metric(&self, _name: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(Handle(Arc::clone(&self.unfinished)))
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(Handle(Arc::clone(&self.longest)))
    }
    fn new_retries_metric(&self, _name: &str) -> Box<dyn CounterMetric> {
        Box::new(Handle(Arc::clone(&self.retries)))
    }
}

/// Yields until `metric` has been set more than `before` times.
async fn wait_for_set(what: &str, metric: &TestMetric, before: usize) {
    for _ in 0..10_000 {
        if metric.set_count() > before {
            return;
        }
        yield_now().await;
    }
    panic!("{what} was not updated");
}

#[tokio::test(start_paused = true)]
async fn test_metric_shutdown() {
    // client-go counts calls of an internal "update unfinished work" hook; kcache's public
    // counterpart is the unfinished-work gauge that each such update sets.
    let mp = Arc::new(TestMetricsProvider::default());
    let config = QueueConfig::default()
        .name("test")
        .metrics_provider(mp.clone());
    let (q, driver) = Queue::<&'static str>::with_config(config);
    let driver = tokio::spawn(driver);
    // Wait for the driver to start its ticker.
    settle().await;

    let before = mp.unfinished.set_count();
    advance(UNFINISHED_WORK_UPDATE_PERIOD).await;
    wait_for_set("the unfinished-work gauge", &mp.unfinished, before).await;
    q.shutdown();

    let updates = mp.unfinished.set_count();
    advance(Duration::from_secs(3600)).await;
    join("the driver to end at shutdown", driver).await;
    settle().await;
    assert_eq!(
        mp.unfinished.set_count(),
        updates,
        "unexpected update after shutdown was called"
    );
}

#[tokio::test(start_paused = true)]
async fn test_metrics() {
    let mp = Arc::new(TestMetricsProvider::default());
    let config = QueueConfig::default()
        .name("test")
        .metrics_provider(mp.clone());
    let (q, driver) = Queue::<&'static str>::with_config(config);
    tokio::spawn(driver);
    // Wait for the driver to start its ticker (its first, immediate, update happens now).
    settle().await;

    // client-go refreshes the unfinished-work gauges every 1 ms in this test and reads them
    // 1 ms after the second get. kcache's period is fixed at 500 ms, so the scenario is moved
    // to end 1 ms before the next refresh; every interval between its steps is client-go's.
    advance(UNFINISHED_WORK_UPDATE_PERIOD - MS - Duration::from_micros(75)).await;

    q.add("foo").unwrap();
    assert_eq!(mp.adds.gauge_value(), 1.0);
    assert_eq!(mp.depth.gauge_value(), 1.0);

    advance(Duration::from_micros(50)).await;

    // Start processing.
    let i = within("get", q.get()).await;
    assert_eq!(i, Some("foo"));
    let i = i.unwrap();
    assert_eq!(mp.latency.observation_value(), 5e-05);
    assert_eq!(mp.latency.observation_count(), 1);

    // Add it back while processing; the repeated adds collapse.
    for _ in 0..5 {
        q.add(i).unwrap();
    }
    assert_eq!(mp.adds.gauge_value(), 2.0);
    // One item waits in the queue.
    assert_eq!(mp.depth.gauge_value(), 1.0);

    advance(Duration::from_micros(25)).await;

    // Finish it.
    q.done(&i);
    assert_eq!(mp.duration.observation_value(), 2.5e-05);
    assert_eq!(mp.duration.observation_count(), 1);
    // One item waits in the queue.
    assert_eq!(mp.depth.gauge_value(), 1.0);

    // It is back on the queue.
    let i = within("get", q.get()).await;
    assert_eq!(i, Some("foo"));
    let i = i.unwrap();
    assert_eq!(mp.latency.observation_value(), 2.5e-05);
    assert_eq!(mp.latency.observation_count(), 2);

    // The next refresh, 1 ms after the get.
    let unfinished_before = mp.unfinished.set_count();
    let longest_before = mp.longest.set_count();
    advance(MS).await;
    wait_for_set(
        "the unfinished-work gauge",
        &mp.unfinished,
        unfinished_before,
    )
    .await;
    assert_eq!(mp.unfinished.gauge_value(), 0.001);
    wait_for_set("the longest-running gauge", &mp.longest, longest_before).await;
    assert_eq!(mp.longest.gauge_value(), 0.001);

    // Finish it.
    q.done(&i);
    assert_eq!(mp.duration.observation_value(), 0.001);
    assert_eq!(mp.duration.observation_count(), 2);

    q.shutdown();
}
