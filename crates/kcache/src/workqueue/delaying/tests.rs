use std::time::Duration;

use tokio::time::{Instant, timeout};

use super::*;

const MS: Duration = Duration::from_millis(1);

/// A delaying queue whose driver runs on the test's runtime.
fn spawned<T>() -> DelayingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    let (queue, driver) = DelayingQueue::new();
    tokio::spawn(driver);
    queue
}

/// Asserts that nothing is handed out within `window` (paused time: no real waiting).
async fn nothing_within<T>(queue: &DelayingQueue<T>, window: Duration)
where
    T: Clone + Eq + Hash + Send + Sync + std::fmt::Debug + 'static,
{
    let got = timeout(window, queue.get()).await;
    assert!(
        got.is_err(),
        "expected nothing within {window:?}, got {got:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn add_after_adds_the_item_once_its_delay_has_passed() {
    let queue = spawned();
    let start = Instant::now();
    queue.add_after("a", 50 * MS).unwrap();
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.waiting_len(), 1);
    nothing_within(&queue, 49 * MS).await;
    assert_eq!(queue.get().await, Some("a"));
    assert!(start.elapsed() >= 50 * MS);
    assert_eq!(queue.waiting_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn add_after_keeps_earliest_time() {
    let queue = spawned();
    let start = Instant::now();
    queue.add_after("a", 100 * MS).unwrap();
    queue.add_after("a", 20 * MS).unwrap();
    queue.add_after("a", 50 * MS).unwrap(); // later than the waiting one: ignored
    assert_eq!(queue.waiting_len(), 1);
    nothing_within(&queue, 19 * MS).await;
    assert_eq!(queue.get().await, Some("a"));
    let at = start.elapsed();
    assert!(at >= 20 * MS && at < 50 * MS, "handed out at {at:?}");
    queue.done(&"a");
    // Neither the 50 ms nor the 100 ms request may bring it back.
    nothing_within(&queue, 200 * MS).await;
}

#[tokio::test(start_paused = true)]
async fn an_earlier_deadline_wakes_the_driver() {
    let queue = spawned();
    let start = Instant::now();
    queue.add_after("late", Duration::from_secs(3600)).unwrap();
    tokio::task::yield_now().await; // let the driver go to sleep on the one-hour timer
    queue.add_after("early", 10 * MS).unwrap();
    assert_eq!(queue.get().await, Some("early"));
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(queue.waiting_len(), 1);
}

#[tokio::test(start_paused = true)]
async fn delayed_items_are_queued_in_deadline_order() {
    let queue = spawned();
    queue.add_after("a", 30 * MS).unwrap();
    queue.add_after("b", 10 * MS).unwrap();
    queue.add_after("c", 20 * MS).unwrap();
    tokio::time::sleep(40 * MS).await;
    assert_eq!(queue.len(), 3);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(queue.get().await.unwrap());
    }
    assert_eq!(got, ["b", "c", "a"]);
}

#[tokio::test]
async fn add_after_zero_adds_at_once() {
    // No driver at all: a zero delay must not depend on it.
    let (queue, _driver) = DelayingQueue::new();
    queue.add_after("now", Duration::ZERO).unwrap();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.waiting_len(), 0);
    assert_eq!(queue.get().await, Some("now"));
}

#[tokio::test(start_paused = true)]
async fn waiting_item_added_directly_is_added_again_when_due() {
    let queue = spawned();
    queue.add_after("a", 10 * MS).unwrap();
    queue.add("a").unwrap();
    assert_eq!(queue.get().await, Some("a"));
    queue.done(&"a");
    // client-go semantics: the timer still fires and adds the item once more.
    assert_eq!(queue.get().await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn delayed_add_of_an_item_in_flight_waits_for_done() {
    let queue = spawned();
    queue.add("a").unwrap();
    let a = queue.get().await.unwrap();
    queue.add_after("a", 5 * MS).unwrap();
    tokio::time::sleep(10 * MS).await;
    assert_eq!(queue.len(), 0, "dirty, but held by a worker");
    queue.done(&a);
    assert_eq!(queue.get().await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn add_after_shutdown_returns_item() {
    let queue = spawned();
    queue.shutdown();
    assert_eq!(queue.add_after("a", 5 * MS).unwrap_err().0, "a");
    assert_eq!(queue.add_after("b", Duration::ZERO).unwrap_err().0, "b");
    assert_eq!(queue.add("c").unwrap_err().0, "c");
    assert_eq!(queue.waiting_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_drops_waiting_items_and_stops_the_driver() {
    let (queue, driver) = DelayingQueue::new();
    let driver = tokio::spawn(driver);
    queue.add_after("a", 10 * MS).unwrap();
    tokio::task::yield_now().await;
    queue.shutdown();
    driver.await.unwrap();
    assert_eq!(queue.waiting_len(), 0);
    tokio::time::sleep(20 * MS).await;
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_stops_the_driver() {
    let (queue, driver) = DelayingQueue::<u32>::new();
    let driver = tokio::spawn(driver);
    let clone = queue.clone();
    queue.add_after(1, Duration::from_secs(60)).unwrap();
    drop(queue);
    tokio::task::yield_now().await;
    assert!(!driver.is_finished(), "a clone is still alive");
    drop(clone);
    driver.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn huge_delays_do_not_panic() {
    let queue = spawned();
    queue.add_after("never", Duration::MAX).unwrap();
    assert_eq!(queue.waiting_len(), 1);
    nothing_within(&queue, Duration::from_secs(365 * 24 * 3600)).await;
}

#[tokio::test(start_paused = true)]
async fn moving_deadlines_earlier_many_times_keeps_memory_bounded() {
    let queue = spawned();
    for i in (1..10_000u32).rev() {
        queue.add_after("a", i * MS).unwrap();
    }
    assert_eq!(queue.waiting_len(), 1);
    let heap_len = queue.waiting.timers.lock().heap.len();
    // One live timer: compaction keeps the heap at most `2 * live + 64` (+ the new entry).
    let bound = 2 * queue.waiting_len() + 64 + 1;
    assert!(
        heap_len <= bound,
        "stale timers were not compacted: {heap_len}"
    );
    assert_eq!(queue.get().await, Some("a"));
    queue.done(&"a");
    nothing_within(&queue, Duration::from_secs(20)).await;
}
