//! Metrics hooks of the work queues, with client-go's metric vocabulary.
//!
//! A queue asks a [`MetricsProvider`] for one handle per metric when it is built (only when the
//! queue has a name, as in client-go), then updates the handles as items move:
//!
//! | metric (Prometheus name in [`names`]) | kind | meaning |
//! |---|---|---|
//! | depth | gauge | items waiting in the queue (not being processed) |
//! | adds | counter | items accepted by `add` (re-adds of a waiting item are not counted) |
//! | queue latency | histogram | seconds an item waited between `add` and `get` |
//! | work duration | histogram | seconds between `get` and `done` |
//! | unfinished work seconds | settable gauge | sum of the ages of all in-flight items |
//! | longest running processor seconds | settable gauge | age of the oldest in-flight item |
//! | retries | counter | calls to `add_after` / `add_rate_limited` |
//!
//! The two "unfinished" gauges are refreshed every 500 ms by the queue's
//! [`Driver`](super::Driver). The handles are called *after* the queue's lock is released.
//!
//! Every method of [`MetricsProvider`] has a no-op default, so an implementation only writes the
//! metrics it exports.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use tokio::time::Instant;

/// The names client-go's Prometheus provider (`k8s.io/component-base`) exports, each with a
/// `name` label carrying the queue's name. A provider is free to use others.
pub mod names {
    /// The subsystem prefix of every work queue metric.
    pub const SUBSYSTEM: &str = "workqueue";
    /// Gauge: current depth of the queue.
    pub const DEPTH: &str = "workqueue_depth";
    /// Counter: total number of adds handled by the queue.
    pub const ADDS: &str = "workqueue_adds_total";
    /// Histogram: seconds an item stays in the queue before being requested.
    pub const QUEUE_LATENCY: &str = "workqueue_queue_duration_seconds";
    /// Histogram: seconds processing an item takes.
    pub const WORK_DURATION: &str = "workqueue_work_duration_seconds";
    /// Gauge: seconds of work in progress that has not been observed by work duration.
    pub const UNFINISHED_WORK_SECONDS: &str = "workqueue_unfinished_work_seconds";
    /// Gauge: seconds the longest running processor has been running.
    pub const LONGEST_RUNNING_PROCESSOR_SECONDS: &str =
        "workqueue_longest_running_processor_seconds";
    /// Counter: total number of retries handled by the queue.
    pub const RETRIES: &str = "workqueue_retries_total";
    /// client-go's histogram buckets for latency and work duration: 10 exponential buckets from
    /// 1e-8 s by a factor of 10.
    pub const DURATION_BUCKETS: [f64; 10] =
        [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];
}

/// A value that goes up and down by one.
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A value that is set outright.
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A value that only goes up.
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A distribution of observations (seconds, for the queue's durations).
pub trait HistogramMetric: Send + Sync {
    /// Records one observation.
    fn observe(&self, value: f64);
}

/// A metric that ignores every update.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopMetric;

impl GaugeMetric for NoopMetric {
    fn inc(&self) {}
    fn dec(&self) {}
}
impl SettableGaugeMetric for NoopMetric {
    fn set(&self, _value: f64) {}
}
impl CounterMetric for NoopMetric {
    fn inc(&self) {}
}
impl HistogramMetric for NoopMetric {
    fn observe(&self, _value: f64) {}
}

/// Makes the metric handles of a named queue (client-go's `MetricsProvider`).
///
/// Each method is called once per queue, with the queue's name. The defaults return
/// [`NoopMetric`], so implement only what you export.
pub trait MetricsProvider: Send + Sync {
    /// The `depth` gauge.
    fn new_depth_metric(&self, _name: &str) -> Box<dyn GaugeMetric> {
        Box::new(NoopMetric)
    }
    /// The `adds` counter.
    fn new_adds_metric(&self, _name: &str) -> Box<dyn CounterMetric> {
        Box::new(NoopMetric)
    }
    /// The queue latency histogram (seconds from `add` to `get`).
    fn new_latency_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(NoopMetric)
    }
    /// The work duration histogram (seconds from `get` to `done`).
    fn new_work_duration_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(NoopMetric)
    }
    /// The unfinished work gauge (sum of in-flight ages, seconds).
    fn new_unfinished_work_seconds_metric(&self, _name: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(NoopMetric)
    }
    /// The longest running processor gauge (oldest in-flight age, seconds).
    fn new_longest_running_processor_seconds_metric(
        &self,
        _name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(NoopMetric)
    }
    /// The retries counter.
    fn new_retries_metric(&self, _name: &str) -> Box<dyn CounterMetric> {
        Box::new(NoopMetric)
    }
}

/// The provider used when none is configured: every metric is a [`NoopMetric`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopMetricsProvider;

impl MetricsProvider for NoopMetricsProvider {}

/// The handles of one named queue. Immutable; lives outside the queue's lock.
pub(crate) struct QueueMetrics {
    depth: Box<dyn GaugeMetric>,
    adds: Box<dyn CounterMetric>,
    latency: Box<dyn HistogramMetric>,
    work_duration: Box<dyn HistogramMetric>,
    unfinished_work_seconds: Box<dyn SettableGaugeMetric>,
    longest_running_processor: Box<dyn SettableGaugeMetric>,
    retries: Box<dyn CounterMetric>,
}

impl QueueMetrics {
    /// Metrics for a queue, or `None` (no bookkeeping at all) when it has no name or no provider.
    pub(crate) fn new(name: &str, provider: Option<&Arc<dyn MetricsProvider>>) -> Option<Self> {
        let provider = provider?;
        if name.is_empty() {
            return None;
        }
        Some(Self {
            depth: provider.new_depth_metric(name),
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished_work_seconds: provider.new_unfinished_work_seconds_metric(name),
            longest_running_processor: provider.new_longest_running_processor_seconds_metric(name),
            retries: provider.new_retries_metric(name),
        })
    }

    pub(crate) fn added(&self) {
        self.adds.inc();
        self.depth.inc();
    }

    pub(crate) fn got(&self, waited: Option<f64>) {
        self.depth.dec();
        if let Some(seconds) = waited {
            self.latency.observe(seconds);
        }
    }

    pub(crate) fn done(&self, worked: f64) {
        self.work_duration.observe(worked);
    }

    pub(crate) fn unfinished(&self, work: UnfinishedWork) {
        self.unfinished_work_seconds.set(work.total_seconds);
        self.longest_running_processor.set(work.oldest_seconds);
    }

    pub(crate) fn retry(&self) {
        self.retries.inc();
    }
}

/// The unfinished work figures computed under the lock, published after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct UnfinishedWork {
    pub(crate) total_seconds: f64,
    pub(crate) oldest_seconds: f64,
}

/// The timestamps behind latency and work duration; kept inside the queue's lock, and only when
/// the queue has metrics.
pub(crate) struct Timestamps<T> {
    added_at: HashMap<T, Instant>,
    processing_since: HashMap<T, Instant>,
}

impl<T: Clone + Eq + Hash> Timestamps<T> {
    pub(crate) fn new() -> Self {
        Self {
            added_at: HashMap::new(),
            processing_since: HashMap::new(),
        }
    }

    pub(crate) fn added(&mut self, item: &T, now: Instant) {
        if !self.added_at.contains_key(item) {
            self.added_at.insert(item.clone(), now);
        }
    }

    /// Returns the seconds the item waited, when its add was seen.
    pub(crate) fn got(&mut self, item: &T, now: Instant) -> Option<f64> {
        self.processing_since.insert(item.clone(), now);
        self.added_at
            .remove(item)
            .map(|at| now.saturating_duration_since(at).as_secs_f64())
    }

    /// Returns the seconds the item was processed, when its get was seen.
    pub(crate) fn done(&mut self, item: &T, now: Instant) -> Option<f64> {
        self.processing_since
            .remove(item)
            .map(|at| now.saturating_duration_since(at).as_secs_f64())
    }

    pub(crate) fn unfinished(&self, now: Instant) -> UnfinishedWork {
        let mut work = UnfinishedWork {
            total_seconds: 0.0,
            oldest_seconds: 0.0,
        };
        for at in self.processing_since.values() {
            let age = now.saturating_duration_since(*at).as_secs_f64();
            work.total_seconds += age;
            work.oldest_seconds = work.oldest_seconds.max(age);
        }
        work
    }
}

#[cfg(test)]
mod tests;
