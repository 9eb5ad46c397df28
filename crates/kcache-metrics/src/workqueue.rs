//! client-go's work queue metrics on prometheus-client.

use std::sync::atomic::AtomicU64;

use kcache::workqueue::{
    MetricsProvider,
    metrics::{CounterMetric, GaugeMetric, HistogramMetric, SettableGaugeMetric, names},
};
use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

type Labels = Vec<(String, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn histogram() -> Histogram {
    Histogram::new(names::DURATION_BUCKETS)
}

/// A [`MetricsProvider`] registering client-go's work queue metrics in a [`Registry`]: the same
/// names, the label `name` (the queue's name), and the same duration buckets (10 ns … 10 s,
/// ×10).
///
/// Give it to a queue with `RateLimitingQueueConfig::metrics_provider` (to a controller's
/// with `controller::Config::metrics_provider`); a queue without a name records nothing, as
/// in client-go.
#[derive(Debug, Clone)]
pub struct WorkqueueMetrics {
    /// Also label each series `controller` (controller-runtime's provider).
    controller_label: bool,
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, fn() -> Histogram>,
    work_duration: Family<Labels, Histogram, fn() -> Histogram>,
    unfinished: Family<Labels, FloatGauge>,
    longest: Family<Labels, FloatGauge>,
    retries: Family<Labels, Counter>,
}

impl WorkqueueMetrics {
    /// Registers the families in `registry`, labelled `name` (client-go's
    /// `k8s.io/component-base` provider).
    pub fn new(registry: &mut Registry) -> Self {
        Self::register(registry, false)
    }

    /// Registers the families in `registry`, labelled `name` and `controller`, both the
    /// queue's name, as controller-runtime's provider labels its controllers' queues
    /// (`workqueue_depth{name="websites",controller="websites"}`), so that
    /// controller-runtime's dashboards work unchanged.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache::workqueue::{RateLimitingQueue, RateLimitingQueueConfig};
    /// use kcache_metrics::WorkqueueMetrics;
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    ///
    /// let mut registry = Registry::default();
    /// let queues = Arc::new(WorkqueueMetrics::with_controller_label(&mut registry));
    /// let (_queue, _driver) = RateLimitingQueue::<String>::with_config(
    ///     RateLimitingQueueConfig::default().name("websites").metrics_provider(queues),
    /// );
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains(r#"workqueue_depth{name="websites",controller="websites"} 0"#));
    /// ```
    pub fn with_controller_label(registry: &mut Registry) -> Self {
        Self::register(registry, true)
    }

    fn labels(&self, name: &str) -> Labels {
        let mut labels = vec![("name".to_owned(), name.to_owned())];
        if self.controller_label {
            labels.push(("controller".to_owned(), name.to_owned()));
        }
        labels
    }

    fn register(registry: &mut Registry, controller_label: bool) -> Self {
        let m = Self {
            controller_label,
            depth: Family::default(),
            adds: Family::default(),
            latency: Family::new_with_constructor(histogram),
            work_duration: Family::new_with_constructor(histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            retries: Family::default(),
        };
        // prometheus-client adds `_total` to counters itself.
        let strip = |n: &'static str| n.strip_suffix("_total").unwrap_or(n);
        registry.register(names::DEPTH, "Current depth of workqueue", m.depth.clone());
        registry.register(
            strip(names::ADDS),
            "Total number of adds handled by workqueue",
            m.adds.clone(),
        );
        registry.register(
            names::QUEUE_LATENCY,
            "How long in seconds an item stays in workqueue before being requested",
            m.latency.clone(),
        );
        registry.register(
            names::WORK_DURATION,
            "How long in seconds processing an item from workqueue takes",
            m.work_duration.clone(),
        );
        registry.register(
            names::UNFINISHED_WORK_SECONDS,
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            m.unfinished.clone(),
        );
        registry.register(
            names::LONGEST_RUNNING_PROCESSOR_SECONDS,
            "How many seconds has the longest running processor for workqueue been running",
            m.longest.clone(),
        );
        registry.register(
            strip(names::RETRIES),
            "Total number of retries handled by workqueue",
            m.retries.clone(),
        );
        m
    }
}

struct G(Gauge);
impl GaugeMetric for G {
    fn inc(&self) {
        self.0.inc();
    }
    fn dec(&self) {
        self.0.dec();
    }
}

struct C(Counter);
impl CounterMetric for C {
    fn inc(&self) {
        self.0.inc();
    }
}

struct H(Histogram);
impl HistogramMetric for H {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}

struct S(FloatGauge);
impl SettableGaugeMetric for S {
    fn set(&self, value: f64) {
        self.0.set(value);
    }
}

impl MetricsProvider for WorkqueueMetrics {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        Box::new(G(self.depth.get_or_create(&self.labels(name)).clone()))
    }
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(C(self.adds.get_or_create(&self.labels(name)).clone()))
    }
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        Box::new(H(self.latency.get_or_create(&self.labels(name)).clone()))
    }
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        Box::new(H(self
            .work_duration
            .get_or_create(&self.labels(name))
            .clone()))
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(S(self.unfinished.get_or_create(&self.labels(name)).clone()))
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(S(self.longest.get_or_create(&self.labels(name)).clone()))
    }
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(C(self.retries.get_or_create(&self.labels(name)).clone()))
    }
}
