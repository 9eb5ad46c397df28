//! Churn (creates, updates, deletes of pods) and injected faults, written to the embedded
//! server through its Rust handle while the informer watches it over HTTP.

use std::time::Duration;

use kcache_apiserver::{FaultHandle, InjectedFailure, ServerHandle};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::Serialize;
use serde_json::json;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::pods;

/// The faults the demo injects, in rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    /// Every open watch ends (a server restart): the reflector re-watches from its RV.
    DropWatches,
    /// History compacted, then watches dropped: the re-watch gets 410 Expired → relist.
    CompactAndDrop,
    /// The next 3 requests fail with 500: backoff, then re-watch.
    Fail500,
    /// The next 2 requests fail with 429 + Retry-After: 1.
    Fail429,
    /// The next watch event is cut mid-object and the connection aborted.
    TruncateStream,
}

impl Fault {
    const ALL: [Fault; 5] = [
        Fault::DropWatches,
        Fault::CompactAndDrop,
        Fault::Fail500,
        Fault::Fail429,
        Fault::TruncateStream,
    ];

    /// A short name for reports.
    pub(super) fn name(self) -> &'static str {
        match self {
            Fault::DropWatches => "watch_dropped",
            Fault::CompactAndDrop => "compaction_410",
            Fault::Fail500 => "http_500",
            Fault::Fail429 => "http_429",
            Fault::TruncateStream => "stream_truncated",
        }
    }

    fn inject(self, faults: &FaultHandle) {
        match self {
            Fault::DropWatches => faults.drop_watches(),
            Fault::CompactAndDrop => {
                faults.compact();
                faults.drop_watches();
            }
            Fault::Fail500 => {
                faults.fail_next(3, InjectedFailure::Internal);
                faults.drop_watches();
            }
            Fault::Fail429 => {
                faults.fail_next(2, InjectedFailure::TooManyRequests { retry_after: 1 });
                faults.drop_watches();
            }
            Fault::TruncateStream => faults.truncate_next_watch_events(1),
        }
    }
}

/// What the churn phase did.
#[derive(Debug, Default, Clone, Serialize)]
pub(super) struct ChurnReport {
    /// Pods created.
    pub creates: u64,
    /// Pods updated.
    pub updates: u64,
    /// Pods deleted.
    pub deletes: u64,
    /// Writes the server refused (should stay 0).
    pub write_errors: u64,
    /// Faults injected, per kind, in injection order of kinds.
    pub faults: Vec<(&'static str, u64)>,
}

impl ChurnReport {
    /// Total writes.
    pub(super) fn writes(&self) -> u64 {
        self.creates + self.updates + self.deletes
    }

    /// Total faults injected.
    pub(super) fn faults_injected(&self) -> u64 {
        self.faults.iter().map(|(_, n)| n).sum()
    }

    fn count_fault(&mut self, fault: Fault) {
        match self.faults.iter_mut().find(|(n, _)| *n == fault.name()) {
            Some((_, n)) => *n += 1,
            None => self.faults.push((fault.name(), 1)),
        }
    }
}

/// Churn settings.
#[derive(Debug, Clone)]
pub(super) struct ChurnConfig {
    /// Writes per second.
    pub ops_per_sec: u32,
    /// How long to churn.
    pub duration: Duration,
    /// Inject faults.
    pub faults: bool,
    /// Pods that exist at the start: `seed-000000`.. in their demo namespaces.
    pub seeded: usize,
}

impl ChurnConfig {
    /// Time between two faults: about five faults per run, at most one a second, at least one
    /// every three seconds.
    fn fault_interval(&self) -> Duration {
        (self.duration / 5).clamp(Duration::from_secs(1), Duration::from_secs(3))
    }
}

/// Runs churn (60 % updates, 20 % creates, 20 % deletes) and, when asked, rotates through the
/// faults; returns when `duration` has passed or `cancel` fires. Leaves no fault pending.
pub(super) async fn run(
    server: ServerHandle,
    faults: FaultHandle,
    config: ChurnConfig,
    mut progress: impl FnMut(&ChurnReport),
    cancel: CancellationToken,
) -> ChurnReport {
    let mut rng = StdRng::seed_from_u64(0x6b63_6163_6865);
    let mut live: Vec<(String, String)> = (0..config.seeded)
        .map(|i| (pods::namespace(i), format!("seed-{i:06}")))
        .collect();
    let mut report = ChurnReport::default();
    let tick = Duration::from_millis(10);
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let start = Instant::now();
    let end = start + config.duration;
    let mut next_fault = start + config.fault_interval() / 2;
    let mut fault_idx = 0;
    let mut created = 0usize;
    let mut budget = 0.0f64;
    let per_tick = f64::from(config.ops_per_sec) * tick.as_secs_f64();
    while Instant::now() < end {
        tokio::select! {
            _ = ticker.tick() => {}
            () = cancel.cancelled() => break,
        }
        budget += per_tick;
        while budget >= 1.0 {
            budget -= 1.0;
            one_write(&server, &mut rng, &mut live, &mut created, &mut report);
        }
        if config.faults && Instant::now() >= next_fault {
            let fault = Fault::ALL[fault_idx % Fault::ALL.len()];
            fault.inject(&faults);
            report.count_fault(fault);
            fault_idx += 1;
            next_fault += config.fault_interval();
        }
        progress(&report);
    }
    clear_faults(&faults);
    report
}

/// Removes any fault still pending (a failure no request consumed yet, a pending truncation).
pub(super) fn clear_faults(faults: &FaultHandle) {
    faults.fail_next(0, InjectedFailure::Internal);
    faults.truncate_next_watch_events(0);
    faults.stall_watches(false);
    faults.set_latency(Duration::ZERO);
}

fn one_write(
    server: &ServerHandle,
    rng: &mut StdRng,
    live: &mut Vec<(String, String)>,
    created: &mut usize,
    report: &mut ChurnReport,
) {
    let roll = rng.random_range(0..100u32);
    let result = if roll < 20 || live.is_empty() {
        let i = *created;
        *created += 1;
        let pod = pods::pod("churn", i);
        let ns = pods::namespace(i);
        let r = server.create(&pods::collection(&ns), pod).map(|_| ());
        if r.is_ok() {
            live.push((ns, format!("churn-{i:06}")));
            report.creates += 1;
        }
        r
    } else if roll < 40 {
        let (ns, name) = live.swap_remove(rng.random_range(0..live.len()));
        let r = server.delete(&format!("{}/{name}", pods::collection(&ns)));
        if r.is_ok() {
            report.deletes += 1;
        }
        r
    } else {
        let (ns, name) = &live[rng.random_range(0..live.len())];
        let path = format!("{}/{name}", pods::collection(ns));
        let r = server.get(&path).and_then(|mut pod| {
            let n = report.updates + 1;
            pod["metadata"]["annotations"]["kcache.dev/churn"] = json!(n.to_string());
            server.update(&path, pod).map(|_| ())
        });
        if r.is_ok() {
            report.updates += 1;
        }
        r
    };
    if let Err(e) = result {
        report.write_errors += 1;
        warn!(error = %e, "churn write refused");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_interval_gives_about_five_faults_per_run_within_bounds() {
        let cfg = |secs| ChurnConfig {
            ops_per_sec: 1,
            duration: Duration::from_secs(secs),
            faults: true,
            seeded: 0,
        };
        assert_eq!(cfg(5).fault_interval(), Duration::from_secs(1));
        assert_eq!(cfg(10).fault_interval(), Duration::from_secs(2));
        assert_eq!(cfg(30).fault_interval(), Duration::from_secs(3));
    }
}
