//! `rate_limiting_queue_test.go` and `default_rate_limiters_test.go`: the rate-limited queue and
//! its limiters.

use super::*;

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
