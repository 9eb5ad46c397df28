use std::time::Duration;

use tokio::time::{Instant, timeout};

use super::super::rate_limiters::ItemExponentialFailureRateLimiter;
use super::*;

const MS: Duration = Duration::from_millis(1);

fn spawned(config: RateLimitingQueueConfig<&'static str>) -> RateLimitingQueue<&'static str> {
    let (queue, driver) = RateLimitingQueue::with_config(config);
    tokio::spawn(driver);
    queue
}

#[tokio::test(start_paused = true)]
async fn add_rate_limited_waits_as_long_as_the_limiter_says() {
    let queue = spawned(RateLimitingQueueConfig::default().rate_limiter(
        ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1)),
    ));
    queue.add_rate_limited("one").unwrap();
    assert_eq!(queue.waiting_len(), 1);
    assert_eq!(queue.num_requeues(&"one"), 1);
    queue.add_rate_limited("one").unwrap(); // 2 ms: later than the waiting 1 ms, ignored
    assert_eq!(queue.num_requeues(&"one"), 2);
    let start = Instant::now();
    assert_eq!(queue.get().await, Some("one"));
    assert!(start.elapsed() <= MS + MS, "the earlier request wins");
    queue.done(&"one");

    // The third failure waits 4 ms.
    let start = Instant::now();
    queue.add_rate_limited("one").unwrap();
    assert!(timeout(3 * MS, queue.get()).await.is_err());
    assert_eq!(queue.get().await, Some("one"));
    assert!(start.elapsed() >= 4 * MS);
}

#[tokio::test(start_paused = true)]
async fn forget_resets_failures() {
    let queue = spawned(RateLimitingQueueConfig::default());
    queue.add_rate_limited("a").unwrap();
    queue.add_rate_limited("a").unwrap();
    assert_eq!(queue.num_requeues(&"a"), 2);
    queue.forget(&"a");
    assert_eq!(queue.num_requeues(&"a"), 0);
    // Forget only resets the limiter: the waiting retry still arrives.
    assert_eq!(queue.get().await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn default_queue_uses_the_controller_limiter() {
    let (queue, driver) = RateLimitingQueue::<u32>::new();
    tokio::spawn(driver);
    let start = Instant::now();
    for item in 0..101 {
        queue.add_rate_limited(item).unwrap();
    }
    // 100 burst tokens: each of those waits its own 5 ms; the 101st waits for the bucket.
    tokio::time::sleep(6 * MS).await;
    let mut got = 0;
    while timeout(Duration::ZERO, queue.get())
        .await
        .is_ok_and(|i| i.is_some())
    {
        got += 1;
    }
    assert_eq!(got, 100);
    assert_eq!(queue.get().await, Some(100));
    assert!(start.elapsed() >= 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn add_after_shutdown_returns_item() {
    let queue = spawned(RateLimitingQueueConfig::default());
    queue.shutdown();
    assert_eq!(queue.add_rate_limited("a").unwrap_err().0, "a");
    assert_eq!(queue.num_requeues(&"a"), 0, "the limiter is not consulted");
    assert_eq!(queue.add_after("b", MS).unwrap_err().0, "b");
    assert_eq!(queue.add("c").unwrap_err().0, "c");
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_waits_only_for_in_flight_items() {
    let queue = spawned(RateLimitingQueueConfig::default());
    queue.add("a").unwrap();
    queue.add("b").unwrap();
    queue.add_after("c", Duration::from_secs(1)).unwrap();
    let a = queue.get().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shutdown_with_drain().await }
    });
    tokio::task::yield_now().await;
    assert!(!drain.is_finished());
    assert!(queue.is_shutting_down());
    queue.done(&a);
    drain.await.unwrap();
    assert_eq!(
        queue.get().await,
        Some("b"),
        "queued but not in flight: not waited for"
    );
    assert_eq!(queue.get().await, None, "the delayed item was dropped");
    assert_eq!(queue.waiting_len(), 0);
}
