//! `delaying_queue_test.go`: items added after a delay, deduplicated and fired in order.

use super::*;

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
