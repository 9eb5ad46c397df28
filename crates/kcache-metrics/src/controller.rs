//! Controller and leader-election metrics under controller-runtime's names.

use std::sync::Arc;

use kcache::controller::Metrics as Counters;
use parking_lot::Mutex;
use prometheus_client::{
    collector::Collector,
    encoding::DescriptorEncoder,
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};

use crate::encode::{ConstHistogram, family};

type IsLeader = Arc<dyn Fn() -> bool + Send + Sync>;

/// A counter family: name, help, how to read it from a controller's counters.
type CounterRow = (&'static str, &'static str, fn(&Counters) -> u64);

#[derive(Default)]
struct Registered {
    controllers: Vec<(String, usize, Counters)>,
    leaders: Vec<(String, IsLeader)>,
}

/// Controllers' reconcile counters and leader-election status, read at scrape time, under the
/// names controller-runtime's dashboards use:
///
/// - `controller_runtime_reconcile_total{controller, result="success"|"error"}`,
/// - `controller_runtime_reconcile_errors_total{controller}`,
/// - `controller_runtime_terminal_reconcile_errors_total{controller}`,
/// - `controller_runtime_reconcile_panics_total{controller}`,
/// - `controller_runtime_max_concurrent_reconciles{controller}`,
/// - `controller_runtime_active_workers{controller}` (workers inside a reconcile now),
/// - `controller_runtime_reconcile_time_seconds{controller}` (a histogram of every
///   reconcile's duration, whatever its outcome, in controller-runtime's buckets: 5 ms … 60 s,
///   from [`controller::Metrics::reconcile_time`](kcache::controller::Metrics::reconcile_time)),
/// - `leader_election_master_status{name}` (1 while leading),
///
/// and kcache's own `kcache_controller_retries_total`, `kcache_controller_gave_up_total`,
/// `kcache_controller_timeouts_total` (label `controller`).
#[derive(Clone, Default)]
pub struct ControllerMetrics {
    inner: Arc<Mutex<Registered>>,
}

impl std::fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.inner.lock();
        f.debug_struct("ControllerMetrics")
            .field("controllers", &r.controllers.len())
            .field("leaders", &r.leaders.len())
            .finish()
    }
}

impl ControllerMetrics {
    /// Registers the collector in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register_collector(Box::new(m.clone()));
        m
    }

    /// Exports a controller's counters (`Controller::metrics()`), with its name and worker
    /// count.
    pub fn register_controller(
        &self,
        name: impl Into<String>,
        workers: usize,
        counters: &Counters,
    ) {
        self.inner
            .lock()
            .controllers
            .push((name.into(), workers, counters.clone()));
    }

    /// Exports a leader election's status (e.g. `move || elector.is_leader()`).
    pub fn register_leader(
        &self,
        name: impl Into<String>,
        is_leader: impl Fn() -> bool + Send + Sync + 'static,
    ) {
        self.inner
            .lock()
            .leaders
            .push((name.into(), Arc::new(is_leader)));
    }
}

impl Collector for ControllerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let r = self.inner.lock();
        let by = |name: &str| vec![("controller", name.to_owned())];
        let mut totals = Vec::new();
        for (name, _, c) in &r.controllers {
            for (result, v) in [("success", c.succeeded()), ("error", c.failed())] {
                totals.push((
                    vec![("controller", name.clone()), ("result", result.to_owned())],
                    ConstCounter::new(v),
                ));
            }
        }
        family(
            &mut encoder,
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            MetricType::Counter,
            totals,
        )?;
        let counters: [CounterRow; 6] = [
            (
                "controller_runtime_reconcile_errors",
                "Total number of reconciliation errors per controller",
                Counters::failed,
            ),
            (
                "controller_runtime_terminal_reconcile_errors",
                "Total number of terminal reconciliation errors per controller",
                Counters::terminal,
            ),
            (
                "controller_runtime_reconcile_panics",
                "Total number of reconciliation panics per controller",
                Counters::panicked,
            ),
            (
                "kcache_controller_retries",
                "Failed keys queued again",
                Counters::retried,
            ),
            (
                "kcache_controller_gave_up",
                "Keys given up after failures",
                Counters::gave_up,
            ),
            (
                "kcache_controller_timeouts",
                "Reconciles cancelled by the reconcile timeout",
                Counters::timed_out,
            ),
        ];
        for (name, help, get) in counters {
            let rows = r
                .controllers
                .iter()
                .map(|(n, _, c)| (by(n), ConstCounter::new(get(c))))
                .collect();
            family(&mut encoder, name, help, MetricType::Counter, rows)?;
        }
        let workers = r
            .controllers
            .iter()
            .map(|(n, w, _)| {
                (
                    by(n),
                    ConstGauge::new(i64::try_from(*w).unwrap_or(i64::MAX)),
                )
            })
            .collect();
        family(
            &mut encoder,
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            MetricType::Gauge,
            workers,
        )?;
        let active = r
            .controllers
            .iter()
            .map(|(n, _, c)| {
                let v = i64::try_from(c.active_workers()).unwrap_or(i64::MAX);
                (by(n), ConstGauge::new(v))
            })
            .collect();
        family(
            &mut encoder,
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            MetricType::Gauge,
            active,
        )?;
        let times = r
            .controllers
            .iter()
            .map(|(n, _, c)| (by(n), ConstHistogram(c.reconcile_time())))
            .collect();
        family(
            &mut encoder,
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            MetricType::Histogram,
            times,
        )?;
        let leaders = r
            .leaders
            .iter()
            .map(|(n, f)| (vec![("name", n.clone())], ConstGauge::new(i64::from(f()))))
            .collect();
        family(
            &mut encoder,
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
            MetricType::Gauge,
            leaders,
        )
    }
}
