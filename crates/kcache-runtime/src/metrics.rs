//! The runtime's own metric families: writes, and the waits for the caches to show them
//! (read-your-own-writes). Every other family the manager serves comes from
//! `kcache-metrics`; the whole list is in the [crate documentation](crate#metrics).

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

type Labels = Vec<(&'static str, String)>;

/// Seconds a reconcile waited for the caches: 0.5 ms … 30 s, finer below 25 ms where a
/// cache on a near API server catches up.
pub(crate) const WAIT_BUCKETS: [f64; 18] = [
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

fn wait_histogram() -> Histogram {
    Histogram::new(WAIT_BUCKETS)
}

/// The families, registered once per manager.
#[derive(Clone, Debug)]
pub(crate) struct RuntimeMetrics {
    writes: Family<Labels, Counter>,
    waits: Family<Labels, Counter>,
    wait_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    timeouts: Family<Labels, Counter>,
    expired: Family<Labels, Counter>,
    pending: Family<Labels, Gauge>,
}

impl RuntimeMetrics {
    pub(crate) fn new(registry: &mut Registry) -> Self {
        let m = Self {
            writes: Family::default(),
            waits: Family::default(),
            wait_seconds: Family::new_with_constructor(wait_histogram),
            timeouts: Family::default(),
            expired: Family::default(),
            pending: Family::default(),
        };
        // prometheus-client appends `_total` to counters.
        registry.register(
            "kcache_controller_writes",
            "Writes a controller's reconciles made through the manager's client, by verb and resource",
            m.writes.clone(),
        );
        registry.register(
            "kcache_controller_cache_waits",
            "Reconciles that waited for the caches to show the controller's own earlier writes",
            m.waits.clone(),
        );
        registry.register(
            "kcache_controller_cache_wait_seconds",
            "Seconds a reconcile waited for the caches to show the controller's own earlier writes",
            m.wait_seconds.clone(),
        );
        registry.register(
            "kcache_controller_cache_wait_timeouts",
            "Reconciles not run because the caches did not show the controller's own writes in time (retried with backoff)",
            m.timeouts.clone(),
        );
        registry.register(
            "kcache_controller_expectations_expired",
            "Writes the caches never showed within the expectation TTL, no longer waited for",
            m.expired.clone(),
        );
        registry.register(
            "kcache_controller_pending_writes",
            "Writes made by a controller that its caches have not shown yet",
            m.pending.clone(),
        );
        m
    }

    /// The handles of one controller (its series exist from now on, at zero).
    pub(crate) fn controller(&self, name: &str) -> ControllerCacheMetrics {
        let l: Labels = vec![("controller", name.to_owned())];
        ControllerCacheMetrics {
            name: name.to_owned(),
            writes: self.writes.clone(),
            waits: self.waits.get_or_create(&l).clone(),
            wait_seconds: self.wait_seconds.get_or_create(&l).clone(),
            timeouts: self.timeouts.get_or_create(&l).clone(),
            expired: self.expired.get_or_create(&l).clone(),
            pending: self.pending.get_or_create(&l).clone(),
        }
    }
}

/// One controller's series.
#[derive(Clone, Debug)]
pub(crate) struct ControllerCacheMetrics {
    name: String,
    writes: Family<Labels, Counter>,
    pub(crate) waits: Counter,
    pub(crate) wait_seconds: Histogram,
    pub(crate) timeouts: Counter,
    pub(crate) expired: Counter,
    pub(crate) pending: Gauge,
}

impl ControllerCacheMetrics {
    /// Counts one write.
    pub(crate) fn wrote(&self, verb: &'static str, resource: &str) {
        let labels: Labels = vec![
            ("controller", self.name.clone()),
            ("verb", verb.to_owned()),
            ("resource", resource.to_owned()),
        ];
        self.writes.get_or_create(&labels).inc();
    }
}
