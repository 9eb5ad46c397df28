use std::pin::pin;
use std::task::Poll;

use futures::FutureExt;

use super::*;

/// `get` without waiting: `Some(Some(item))`, `Some(None)` (shut down and empty), or `None`
/// (it would wait).
fn try_get<T>(queue: &Queue<T>) -> Option<Option<T>>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    queue.get().now_or_never()
}

#[tokio::test]
async fn items_are_handed_out_in_the_order_they_were_added() {
    let queue = Queue::new();
    for item in ["c", "a", "b", "d"] {
        queue.add(item).unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(queue.get().await.unwrap());
    }
    assert_eq!(got, ["c", "a", "b", "d"]);
}

#[tokio::test]
async fn item_added_many_times_before_processing_is_processed_once() {
    let queue = Queue::new();
    queue.add("a").unwrap();
    queue.add("b").unwrap();
    queue.add("a").unwrap();
    queue.add("a").unwrap();
    assert_eq!(queue.len(), 2);
    assert_eq!(queue.get().await, Some("a"));
    assert_eq!(queue.get().await, Some("b"));
    queue.done(&"a");
    queue.done(&"b");
    assert_eq!(try_get(&queue), None, "nothing left to hand out");
}

#[tokio::test]
async fn item_is_never_handed_to_two_workers_at_once() {
    let queue = Queue::new();
    queue.add("a").unwrap();
    let first = queue.get().await;
    assert_eq!(first, Some("a"));
    queue.add("a").unwrap();
    assert_eq!(
        queue.len(),
        0,
        "a re-added item waits while it is processed"
    );
    assert_eq!(try_get(&queue), None, "a second worker must not get it");
}

#[tokio::test]
async fn item_added_while_processing_is_requeued_after_done() {
    let queue = Queue::new();
    queue.add("a").unwrap();
    queue.add("b").unwrap();
    assert_eq!(queue.get().await, Some("a"));
    queue.add("a").unwrap();
    queue.add("a").unwrap();
    assert_eq!(queue.get().await, Some("b"));
    assert_eq!(try_get(&queue), None);
    queue.done(&"a");
    assert_eq!(queue.len(), 1, "queued again exactly once");
    assert_eq!(queue.get().await, Some("a"));
    queue.done(&"a");
    queue.done(&"b");
    assert_eq!(try_get(&queue), None, "processed again once, then gone");
}

#[tokio::test]
async fn done_without_readd_does_not_requeue() {
    let queue = Queue::new();
    queue.add(1).unwrap();
    assert_eq!(queue.get().await, Some(1));
    queue.done(&1);
    assert!(queue.is_empty());
    // The item can be added again afterwards like a new one.
    queue.add(1).unwrap();
    assert_eq!(queue.get().await, Some(1));
}

#[tokio::test]
async fn done_for_an_item_not_being_processed_changes_nothing() {
    let queue = Queue::new();
    queue.add("a").unwrap();
    queue.done(&"a"); // queued, not processing
    queue.done(&"zzz"); // unknown
    assert_eq!(queue.len(), 1, "not queued a second time");
    assert_eq!(queue.get().await, Some("a"));
    queue.done(&"a");
    assert_eq!(try_get(&queue), None);
}

#[tokio::test]
async fn len_counts_waiting_items_only() {
    let queue = Queue::new();
    assert!(queue.is_empty());
    queue.add("a").unwrap();
    queue.add("b").unwrap();
    assert_eq!(queue.len(), 2);
    let a = queue.get().await.unwrap();
    assert_eq!(queue.len(), 1);
    queue.add(a).unwrap();
    assert_eq!(queue.len(), 1, "dirty while processing is not waiting");
    queue.done(&a);
    assert_eq!(queue.len(), 2);
}

#[tokio::test]
async fn get_waits_until_an_item_is_added() {
    let queue = Queue::new();
    let mut get = pin!(queue.get());
    assert_eq!(futures::poll!(get.as_mut()), Poll::Pending);
    queue.add(7).unwrap();
    assert_eq!(get.await, Some(7));
}

#[tokio::test]
async fn dropping_a_woken_get_passes_the_wakeup_on() {
    let queue = Queue::new();
    let mut first = Box::pin(queue.get());
    let mut second = pin!(queue.get());
    assert_eq!(futures::poll!(first.as_mut()), Poll::Pending);
    assert_eq!(futures::poll!(second.as_mut()), Poll::Pending);
    queue.add("a").unwrap(); // wakes `first`, the oldest waiter
    drop(first);
    // The wake-up must reach `second`, or the item would sit in the queue unseen.
    assert_eq!(second.await, Some("a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_workers_each_get_one_item() {
    let queue = Queue::new();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get().await })
        })
        .collect();
    for i in 0..4 {
        queue.add(i).unwrap();
    }
    let mut got = Vec::new();
    for worker in workers {
        got.push(worker.await.unwrap().unwrap());
    }
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2, 3]);
}

#[tokio::test]
async fn get_returns_none_after_shutdown_once_drained() {
    let queue = Queue::new();
    queue.add("a").unwrap();
    queue.add("b").unwrap();
    queue.shutdown();
    assert!(queue.is_shutting_down());
    assert_eq!(
        queue.get().await,
        Some("a"),
        "queued items are still handed out"
    );
    assert_eq!(queue.get().await, Some("b"));
    assert_eq!(queue.get().await, None);
    assert_eq!(queue.get().await, None, "and stays shut down");
}

#[tokio::test]
async fn shutdown_wakes_waiting_workers() {
    let queue = Queue::<u32>::new();
    let mut one = pin!(queue.get());
    let mut two = pin!(queue.get());
    assert_eq!(futures::poll!(one.as_mut()), Poll::Pending);
    assert_eq!(futures::poll!(two.as_mut()), Poll::Pending);
    queue.shutdown();
    assert_eq!(one.await, None);
    assert_eq!(two.await, None);
}

#[tokio::test]
async fn add_after_shutdown_returns_item() {
    let queue = Queue::new();
    queue.shutdown();
    let err = queue.add(String::from("late")).unwrap_err();
    assert_eq!(err.0, "late");
    assert!(queue.is_empty());
    assert_eq!(queue.get().await, None);
}

#[tokio::test]
async fn shutdown_does_not_wait_for_in_flight_items() {
    let queue = Queue::new();
    queue.add("a").unwrap();
    let a = queue.get().await.unwrap();
    queue.shutdown(); // returns although `a` is in flight
    assert_eq!(queue.get().await, None);
    queue.done(&a);
}

#[tokio::test]
async fn shutdown_with_drain_waits_only_for_in_flight_items() {
    let queue = Queue::new();
    for item in ["a", "b", "c"] {
        queue.add(item).unwrap();
    }
    let a = queue.get().await.unwrap();
    let b = queue.get().await.unwrap();
    let mut drain = pin!(queue.shutdown_with_drain());
    assert_eq!(futures::poll!(drain.as_mut()), Poll::Pending);
    assert!(queue.add("d").is_err(), "no new items while draining");
    queue.done(&a);
    assert_eq!(
        futures::poll!(drain.as_mut()),
        Poll::Pending,
        "b is in flight"
    );
    queue.done(&b);
    // "c" is still queued, but nobody holds it: the drain is over.
    assert_eq!(futures::poll!(drain.as_mut()), Poll::Ready(()));
    assert_eq!(queue.len(), 1);
    assert_eq!(
        queue.get().await,
        Some("c"),
        "queued items are still handed out"
    );
    assert_eq!(queue.get().await, None);
}

#[tokio::test]
async fn shutdown_with_drain_returns_at_once_when_nothing_is_in_flight() {
    let queue = Queue::new();
    queue.add(1).unwrap();
    queue.shutdown_with_drain().await;
    assert_eq!(queue.get().await, Some(1));
}

#[tokio::test]
async fn shutdown_cuts_a_pending_drain_short() {
    let queue = Queue::new();
    queue.add("a").unwrap();
    let _a = queue.get().await.unwrap();
    let mut drain = pin!(queue.shutdown_with_drain());
    assert_eq!(futures::poll!(drain.as_mut()), Poll::Pending);
    queue.shutdown();
    assert_eq!(futures::poll!(drain.as_mut()), Poll::Ready(()));
}

#[tokio::test]
async fn drain_hands_out_an_item_readded_while_in_flight_after_done() {
    let queue = Queue::new();
    queue.add("a").unwrap();
    let a = queue.get().await.unwrap();
    queue.add("a").unwrap();
    let mut drain = pin!(queue.shutdown_with_drain());
    assert_eq!(futures::poll!(drain.as_mut()), Poll::Pending);
    assert_eq!(queue.get().await, None, "nothing queued yet");
    queue.done(&a);
    // The re-add made "a" dirty: it comes back once more although the queue is shut down.
    assert_eq!(queue.get().await, Some("a"));
    assert_eq!(futures::poll!(drain.as_mut()), Poll::Pending);
    queue.done(&"a");
    assert_eq!(futures::poll!(drain.as_mut()), Poll::Ready(()));
    assert_eq!(queue.get().await, None);
}

#[tokio::test]
async fn driver_without_metrics_finishes_at_once() {
    let (_queue, driver) = Queue::<u8>::with_config(QueueConfig::default().name("no-provider"));
    assert_eq!(driver.now_or_never(), Some(()));
}
