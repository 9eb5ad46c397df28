//! `metrics_test.go`: the queue's metrics.

use super::*;

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
