use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;

use super::*;
use crate::workqueue::metrics::{CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider};
use crate::workqueue::{ItemExponentialFailureRateLimiter, NoopMetricsProvider};

/// `get` without waiting: `Some(Some(item))`, `Some(None)` (shut down and empty), or `None`.
fn try_get<T>(queue: &PriorityQueue<T>) -> Option<Option<T>>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    queue.get().now_or_never()
}

fn queue() -> PriorityQueue<&'static str> {
    let (queue, driver) = PriorityQueue::new();
    tokio::spawn(driver);
    queue
}

async fn drain_all(queue: &PriorityQueue<&'static str>) -> Vec<(&'static str, i32)> {
    let mut got = Vec::new();
    while let Some(Some(item)) = queue.get_with_priority().now_or_never() {
        queue.done(&item.0);
        got.push(item);
    }
    got
}

#[tokio::test]
async fn highest_priority_is_handed_out_first() {
    let queue = queue();
    queue.add_with_priority("low", LOW).unwrap();
    queue.add_with_priority("high", 10).unwrap();
    queue.add("normal").unwrap();
    assert_eq!(
        drain_all(&queue).await,
        [("high", 10), ("normal", NORMAL), ("low", LOW)]
    );
}

#[tokio::test]
async fn items_of_one_priority_are_handed_out_in_the_order_they_were_added() {
    let queue = queue();
    for item in ["c", "a", "d", "b"] {
        queue.add_with_priority(item, LOW).unwrap();
    }
    queue.add("x").unwrap();
    let order: Vec<_> = drain_all(&queue)
        .await
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    assert_eq!(order, ["x", "c", "a", "d", "b"]);
}

#[tokio::test]
async fn adding_a_queued_item_keeps_one_entry_with_the_higher_priority() {
    let queue = queue();
    queue.add_with_priority("a", LOW).unwrap();
    queue.add_with_priority("b", LOW).unwrap();
    queue.add_with_priority("c", NORMAL).unwrap();
    queue.add_with_priority("b", 5).unwrap(); // raised
    queue.add_with_priority("c", LOW).unwrap(); // not lowered
    assert_eq!(queue.len(), 3, "one entry per item");
    assert_eq!(
        drain_all(&queue).await,
        [("b", 5), ("c", NORMAL), ("a", LOW)]
    );
}

#[tokio::test]
async fn a_raised_item_keeps_its_place_among_its_new_priority() {
    let queue = queue();
    queue.add_with_priority("early-low", LOW).unwrap();
    queue.add("n1").unwrap();
    queue.add("n2").unwrap();
    queue.add("early-low").unwrap(); // raised to NORMAL: it was added before n1 and n2
    let order: Vec<_> = drain_all(&queue)
        .await
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    assert_eq!(order, ["early-low", "n1", "n2"]);
}

#[tokio::test(start_paused = true)]
async fn adding_a_waiting_item_keeps_the_earlier_ready_time() {
    let queue = queue();
    queue.add_after("a", Duration::from_secs(10)).unwrap();
    queue.add_after("a", Duration::from_secs(2)).unwrap();
    queue.add_after("a", Duration::from_secs(5)).unwrap();
    assert_eq!(queue.waiting_len(), 1, "one entry");
    tokio::time::sleep(Duration::from_millis(1999)).await;
    assert_eq!(try_get(&queue), None);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(queue.get().await, Some("a"));
    queue.done(&"a");
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(
        try_get(&queue),
        None,
        "the later deadlines were merged away"
    );
}

#[tokio::test(start_paused = true)]
async fn a_plain_add_of_a_waiting_item_makes_it_ready_now_with_the_higher_priority() {
    let queue = queue();
    queue
        .add_with_config(
            "a",
            AddConfig::default()
                .priority(7)
                .after(Duration::from_secs(60)),
        )
        .unwrap();
    queue.add_with_priority("a", LOW).unwrap();
    assert_eq!(queue.waiting_len(), 0);
    assert_eq!(queue.get_with_priority().await, Some(("a", 7)));
}

#[tokio::test(start_paused = true)]
async fn a_delayed_item_is_handed_out_by_priority_once_its_time_comes() {
    let queue = queue();
    queue.add_with_priority("low", LOW).unwrap();
    queue
        .add_with_config(
            "urgent",
            AddConfig::default()
                .priority(3)
                .after(Duration::from_millis(50)),
        )
        .unwrap();
    // A worker waits on an empty-of-urgent queue: the driver wakes it when the time comes.
    assert_eq!(queue.get().await, Some("low"));
    let got = tokio::time::timeout(Duration::from_secs(1), queue.get_with_priority()).await;
    assert_eq!(got, Ok(Some(("urgent", 3))));
}

#[tokio::test]
async fn an_item_being_processed_is_not_handed_out_twice() {
    let queue = queue();
    queue.add("a").unwrap();
    assert_eq!(queue.get().await, Some("a"));
    queue.add_with_priority("a", 100).unwrap();
    assert_eq!(
        queue.len(),
        0,
        "a re-added item waits while it is processed"
    );
    assert_eq!(try_get(&queue), None, "a second worker must not get it");
}

#[tokio::test]
async fn an_item_re_added_while_processing_is_handed_out_after_done_at_its_new_priority() {
    let queue = queue();
    queue.add("a").unwrap();
    queue.add_with_priority("b", LOW).unwrap();
    assert_eq!(queue.get().await, Some("a"));
    queue.add_with_priority("a", 9).unwrap();
    queue.add_with_priority("a", 1).unwrap();
    queue.done(&"a");
    assert_eq!(queue.get_with_priority().await, Some(("a", 9)));
    queue.done(&"a");
    assert_eq!(queue.get().await, Some("b"));
    queue.done(&"b");
    assert_eq!(try_get(&queue), None, "processed again once, then gone");
}

#[tokio::test]
async fn done_without_re_add_does_not_requeue_and_unknown_done_is_ignored() {
    let queue = queue();
    queue.done(&"never-added");
    queue.add("a").unwrap();
    assert_eq!(queue.get().await, Some("a"));
    queue.done(&"a");
    queue.done(&"a");
    assert_eq!(try_get(&queue), None);
}

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_wait_for_the_limiter_and_keep_their_priority() {
    let config = Config::default().rate_limiter(ItemExponentialFailureRateLimiter::new(
        Duration::from_millis(100),
        Duration::from_secs(10),
    ));
    let (queue, driver) = PriorityQueue::with_config(config);
    tokio::spawn(driver);
    queue.add_rate_limited_with_priority("a", 4).unwrap();
    assert_eq!(queue.num_requeues(&"a"), 1);
    assert_eq!(queue.waiting_len(), 1);
    tokio::time::sleep(Duration::from_millis(99)).await;
    assert_eq!(try_get(&queue), None);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(queue.get_with_priority().await, Some(("a", 4)));
    queue.done(&"a");
    // The second failure waits twice as long; `after` and the limiter: the longer wins.
    queue
        .add_with_config(
            "a",
            AddConfig::default()
                .rate_limited()
                .after(Duration::from_millis(150)),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_millis(199)).await;
    assert_eq!(try_get(&queue), None);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(queue.get().await, Some("a"));
    queue.forget(&"a");
    assert_eq!(queue.num_requeues(&"a"), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_refuses_new_items_drops_waiting_ones_and_drains_the_ready_ones() {
    let queue = queue();
    queue.add_with_priority("low", LOW).unwrap();
    queue.add("normal").unwrap();
    queue.add_after("later", Duration::from_secs(1)).unwrap();
    queue.shutdown();
    assert!(queue.is_shutting_down());
    assert_eq!(queue.add("new").map_err(|e| e.0), Err("new"));
    assert_eq!(queue.add_rate_limited("new").map_err(|e| e.0), Err("new"));
    assert_eq!(
        queue.num_requeues(&"new"),
        0,
        "the limiter is not consulted"
    );
    assert_eq!(queue.waiting_len(), 0);
    assert_eq!(queue.get().await, Some("normal"));
    assert_eq!(queue.get().await, Some("low"));
    assert_eq!(queue.get().await, None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(queue.get().await, None, "the waiting item was dropped");
}

#[tokio::test]
async fn shutdown_wakes_waiting_workers() {
    let queue = queue();
    let worker = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    tokio::task::yield_now().await;
    queue.shutdown();
    assert_eq!(worker.await.unwrap(), None);
}

#[tokio::test]
async fn shutdown_with_drain_waits_for_the_items_in_flight() {
    let queue = queue();
    queue.add("a").unwrap();
    assert_eq!(queue.get().await, Some("a"));
    let mut drain = Box::pin(queue.shutdown_with_drain());
    assert!(
        drain.as_mut().now_or_never().is_none(),
        "a is still processed"
    );
    queue.done(&"a");
    assert!(drain.now_or_never().is_some());
}

#[tokio::test]
async fn get_is_cancel_safe() {
    let queue = queue();
    {
        let get = queue.get();
        assert!(get.now_or_never().is_none());
    }
    queue.add("a").unwrap();
    assert_eq!(queue.get().await, Some("a"));
}

#[tokio::test]
async fn dropping_the_last_handle_stops_the_driver() {
    let (queue, driver) = PriorityQueue::<u32>::new();
    let driver = tokio::spawn(driver);
    drop(queue);
    tokio::time::timeout(Duration::from_secs(5), driver)
        .await
        .expect("the driver ends")
        .unwrap();
}

/// Records what the queue reports.
#[derive(Default)]
struct Recorded {
    depth: AtomicI64,
    adds: AtomicU64,
    latency: AtomicU64,
    work: AtomicU64,
    retries: AtomicU64,
}

struct Handle(Arc<Recorded>, &'static str);

impl GaugeMetric for Handle {
    fn inc(&self) {
        self.0.depth.fetch_add(1, Ordering::SeqCst);
    }
    fn dec(&self) {
        self.0.depth.fetch_sub(1, Ordering::SeqCst);
    }
}
impl CounterMetric for Handle {
    fn inc(&self) {
        match self.1 {
            "adds" => &self.0.adds,
            _ => &self.0.retries,
        }
        .fetch_add(1, Ordering::SeqCst);
    }
}
impl HistogramMetric for Handle {
    fn observe(&self, _value: f64) {
        match self.1 {
            "latency" => &self.0.latency,
            _ => &self.0.work,
        }
        .fetch_add(1, Ordering::SeqCst);
    }
}

struct Provider(Arc<Recorded>);

impl MetricsProvider for Provider {
    fn new_depth_metric(&self, _name: &str) -> Box<dyn GaugeMetric> {
        Box::new(Handle(Arc::clone(&self.0), "depth"))
    }
    fn new_adds_metric(&self, _name: &str) -> Box<dyn CounterMetric> {
        Box::new(Handle(Arc::clone(&self.0), "adds"))
    }
    fn new_latency_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(Handle(Arc::clone(&self.0), "latency"))
    }
    fn new_work_duration_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(Handle(Arc::clone(&self.0), "work"))
    }
    fn new_retries_metric(&self, _name: &str) -> Box<dyn CounterMetric> {
        Box::new(Handle(Arc::clone(&self.0), "retries"))
    }
}

#[tokio::test(start_paused = true)]
async fn metrics_count_depth_adds_latency_work_and_retries() {
    let recorded = Arc::new(Recorded::default());
    let config = Config::default()
        .name("prio")
        .metrics_provider(Arc::new(Provider(Arc::clone(&recorded))));
    let (queue, driver) = PriorityQueue::with_config(config);
    tokio::spawn(driver);
    queue.add_with_priority("a", LOW).unwrap();
    queue.add("a").unwrap(); // merged: no second add
    queue.add("b").unwrap();
    queue.add_after("c", Duration::from_secs(1)).unwrap();
    assert_eq!(recorded.adds.load(Ordering::SeqCst), 2);
    assert_eq!(
        recorded.depth.load(Ordering::SeqCst),
        2,
        "c is not ready yet"
    );
    assert_eq!(recorded.retries.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    for _ in 0..3 {
        let item = queue.get().await.unwrap();
        queue.done(&item);
    }
    assert_eq!(recorded.adds.load(Ordering::SeqCst), 3);
    assert_eq!(recorded.depth.load(Ordering::SeqCst), 0);
    assert_eq!(recorded.latency.load(Ordering::SeqCst), 3);
    assert_eq!(recorded.work.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn an_unnamed_queue_records_no_metrics() {
    let recorded = Arc::new(Recorded::default());
    let config = Config::default().metrics_provider(Arc::new(Provider(Arc::clone(&recorded))));
    let (queue, _driver) = PriorityQueue::with_config(config);
    queue.add("a").unwrap();
    assert_eq!(recorded.adds.load(Ordering::SeqCst), 0);
    let _ = Config::<u8>::default().metrics_provider(Arc::new(NoopMetricsProvider));
}
