use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::workqueue::{DelayingQueue, Queue, QueueConfig};

#[derive(Debug, Default)]
struct Recorded {
    names: Vec<String>,
    depth: i64,
    adds: u64,
    latency: Vec<f64>,
    work_duration: Vec<f64>,
    unfinished_work_seconds: f64,
    longest_running_processor_seconds: f64,
    retries: u64,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Recorded>>);

struct Handle(Arc<Mutex<Recorded>>, fn(&mut Recorded, f64));

impl GaugeMetric for Handle {
    fn inc(&self) {
        (self.1)(&mut self.0.lock(), 1.0);
    }
    fn dec(&self) {
        (self.1)(&mut self.0.lock(), -1.0);
    }
}
impl CounterMetric for Handle {
    fn inc(&self) {
        (self.1)(&mut self.0.lock(), 1.0);
    }
}
impl HistogramMetric for Handle {
    fn observe(&self, value: f64) {
        (self.1)(&mut self.0.lock(), value);
    }
}
impl SettableGaugeMetric for Handle {
    fn set(&self, value: f64) {
        (self.1)(&mut self.0.lock(), value);
    }
}

impl Recorder {
    fn handle(&self, name: &str, update: fn(&mut Recorded, f64)) -> Box<Handle> {
        self.0.lock().names.push(name.to_owned());
        Box::new(Handle(Arc::clone(&self.0), update))
    }
}

impl MetricsProvider for Recorder {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        self.handle(name, |r, v| r.depth += v as i64)
    }
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        self.handle(name, |r, _| r.adds += 1)
    }
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        self.handle(name, |r, v| r.latency.push(v))
    }
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        self.handle(name, |r, v| r.work_duration.push(v))
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        self.handle(name, |r, v| r.unfinished_work_seconds = v)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        self.handle(name, |r, v| r.longest_running_processor_seconds = v)
    }
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        self.handle(name, |r, _| r.retries += 1)
    }
}

fn adds_and_depth(recorder: &Recorder) -> (u64, i64) {
    let recorded = recorder.0.lock();
    (recorded.adds, recorded.depth)
}

fn config(recorder: &Recorder, name: &str) -> QueueConfig {
    QueueConfig::default()
        .name(name)
        .metrics_provider(Arc::new(recorder.clone()))
}

#[tokio::test(start_paused = true)]
async fn metrics_record_depth_adds_latency_and_work_duration() {
    let recorder = Recorder::default();
    let (queue, _driver) = Queue::with_config(config(&recorder, "pods"));
    assert_eq!(recorder.0.lock().names.len(), 7);
    assert!(recorder.0.lock().names.iter().all(|n| n == "pods"));

    queue.add("a").unwrap();
    queue.add("b").unwrap();
    queue.add("a").unwrap(); // collapsed: not an add
    assert_eq!(adds_and_depth(&recorder), (2, 2));

    tokio::time::advance(Duration::from_secs(2)).await;
    let a = queue.get().await.unwrap();
    assert_eq!(recorder.0.lock().depth, 1);
    assert_eq!(recorder.0.lock().latency, [2.0]);

    queue.add(a).unwrap(); // dirty while processing: counted as an add, and as depth
    assert_eq!(adds_and_depth(&recorder), (3, 2));

    tokio::time::advance(Duration::from_secs(3)).await;
    queue.done(&a);
    assert_eq!(recorder.0.lock().work_duration, [3.0]);

    let b = queue.get().await.unwrap();
    assert_eq!(b, "b");
    let a = queue.get().await.unwrap();
    let recorded = recorder.0.lock();
    assert_eq!(recorded.depth, 0);
    assert_eq!(
        recorded.latency,
        [2.0, 5.0, 3.0],
        "a waited 3 s since its re-add"
    );
    drop(recorded);
    queue.done(&a);
    queue.done(&b);
    assert_eq!(recorder.0.lock().work_duration, [3.0, 0.0, 0.0]);
}

#[tokio::test(start_paused = true)]
async fn unfinished_work_gauges_are_refreshed_by_the_driver() {
    let recorder = Recorder::default();
    let (queue, driver) = Queue::with_config(config(&recorder, "q"));
    let driver = tokio::spawn(driver);
    queue.add(1).unwrap();
    queue.add(2).unwrap();
    let one = queue.get().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let two = queue.get().await.unwrap();
    // Let the 500 ms ticker run a few times past the 3 s mark.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    {
        let recorded = recorder.0.lock();
        assert_eq!(recorded.longest_running_processor_seconds, 3.0);
        assert_eq!(recorded.unfinished_work_seconds, 3.0 + 2.0);
    }
    queue.done(&one);
    queue.done(&two);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(recorder.0.lock().unfinished_work_seconds, 0.0);
    queue.shutdown();
    driver.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn add_after_counts_retries() {
    let recorder = Recorder::default();
    let (queue, driver) = DelayingQueue::with_config(config(&recorder, "retries"));
    tokio::spawn(driver);
    queue.add_after("a", Duration::from_millis(10)).unwrap();
    queue.add_after("a", Duration::ZERO).unwrap();
    queue.add("b").unwrap();
    assert_eq!(recorder.0.lock().retries, 2);
    queue.shutdown();
    assert!(queue.add_after("c", Duration::ZERO).is_err());
    assert_eq!(recorder.0.lock().retries, 2, "refused adds are not retries");
}

#[tokio::test]
async fn unnamed_queue_records_no_metrics() {
    let recorder = Recorder::default();
    let (queue, _driver) = Queue::with_config(config(&recorder, ""));
    queue.add(1).unwrap();
    let one = queue.get().await.unwrap();
    queue.done(&one);
    let recorded = recorder.0.lock();
    assert!(recorded.names.is_empty());
    assert_eq!(recorded.adds, 0);
}

#[test]
fn noop_provider_needs_no_methods() {
    let provider = NoopMetricsProvider;
    provider.new_depth_metric("x").inc();
    provider.new_retries_metric("x").inc();
    provider.new_latency_metric("x").observe(1.0);
    provider.new_unfinished_work_seconds_metric("x").set(1.0);
}
