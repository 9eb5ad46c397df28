//! Health and readiness checks.

use std::{sync::Arc, time::Duration};

use kcache::leaderelection::LeaderElector;

use crate::{InformerMetrics, InformerView};

/// A named check: `Ok(())` when healthy, else why not.
pub type Check = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What `/readyz` and `/healthz` ask.
///
/// Readiness: every informer of the attached [`InformerMetrics`] has synced, its reflector
/// has failed fewer than [`Checks::failure_threshold`] times in a row (default 5) and its cache
/// is within its memory budget (when it has one: `informer::Config::memory_budget_bytes` with
/// memory accounted; ready again once back under it), and every readiness check passes. Liveness (`/healthz`): the runtime answers, and every liveness
/// check passes — for a leader elector, [`leader_election_check`], which fails when it
/// believes it leads but has not renewed within its lease plus a tolerance (client-go's
/// `HealthzAdaptor`).
#[derive(Clone, Default)]
pub struct Checks {
    informers: Option<InformerMetrics>,
    threshold: Option<u32>,
    ready: Vec<(String, Check)>,
    live: Vec<(String, Check)>,
}

impl std::fmt::Debug for Checks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: &[(String, Check)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        f.debug_struct("Checks")
            .field("informers", &self.informers)
            .field("ready", &names(&self.ready))
            .field("live", &names(&self.live))
            .finish()
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) name: String,
    pub(crate) error: Option<String>,
}

impl Checks {
    /// No checks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Readiness includes every informer registered with `informers`.
    #[must_use]
    pub fn with_informers(mut self, informers: InformerMetrics) -> Self {
        self.informers = Some(informers);
        self
    }

    /// Consecutive reflector failures from which an informer is not ready (default 5).
    #[must_use]
    pub fn failure_threshold(mut self, n: u32) -> Self {
        self.threshold = Some(n.max(1));
        self
    }

    /// Adds a readiness check.
    #[must_use]
    pub fn ready(mut self, name: impl Into<String>, check: Check) -> Self {
        self.ready.push((name.into(), check));
        self
    }

    /// Adds a liveness check.
    #[must_use]
    pub fn live(mut self, name: impl Into<String>, check: Check) -> Self {
        self.live.push((name.into(), check));
        self
    }

    pub(crate) fn readiness(&self) -> Vec<Outcome> {
        let threshold = self.threshold.unwrap_or(5);
        let mut out = Vec::new();
        for informer in self.informers.iter().flat_map(InformerMetrics::informers) {
            let name = format!("informer {}", informer.resource());
            let error = if !informer.has_synced() {
                Some("not synced".to_owned())
            } else {
                informer
                    .health()
                    .filter(|h| h.consecutive_failures >= threshold)
                    .map(|h| {
                        format!(
                            "{} failures in a row, last: {}",
                            h.consecutive_failures,
                            h.last_error.unwrap_or_default()
                        )
                    })
                    .or_else(|| over_budget(&*informer))
            };
            out.push(Outcome { name, error });
        }
        out.extend(run(&self.ready));
        out
    }

    pub(crate) fn liveness(&self) -> Vec<Outcome> {
        run(&self.live)
    }
}

/// Why an informer whose cache holds more than its memory budget is not ready.
fn over_budget(informer: &dyn InformerView) -> Option<String> {
    let (usage, budget) = (informer.memory()?, informer.memory_budget()?);
    (usage.bytes > budget).then(|| {
        format!(
            "the {} cache holds {} bytes ({} objects), over its memory budget of {budget} bytes",
            informer.resource(),
            usage.bytes,
            usage.objects
        )
    })
}

fn run(checks: &[(String, Check)]) -> Vec<Outcome> {
    checks
        .iter()
        .map(|(name, check)| Outcome {
            name: name.clone(),
            error: check().err(),
        })
        .collect()
}

/// client-go's leader-election `HealthzAdaptor` as a [`Check`]: it fails while `elector`
/// believes it leads but has not renewed the lease for longer than the lease duration plus
/// `tolerance` ([`LeaderElector::check`]) — a leader that should have stepped down and did
/// not. Add it as a liveness check, so that such a process is restarted; a standby always
/// passes.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use kcache::leaderelection::{Config, FakeLock, LeaderElector};
/// use kcache_metrics::{Checks, leader_election_check};
///
/// let elector = Arc::new(LeaderElector::new(Config::new("replica-0"), FakeLock::new())?);
/// let check = leader_election_check(Arc::clone(&elector), Duration::from_secs(20));
/// assert_eq!(check(), Ok(()), "not leading: healthy");
/// let checks = Checks::new().live("leaderElection", check);
/// # drop(checks);
/// # Ok::<(), kcache::leaderelection::Error>(())
/// ```
pub fn leader_election_check<L>(elector: Arc<LeaderElector<L>>, tolerance: Duration) -> Check
where
    L: Send + Sync + 'static,
{
    Arc::new(move || elector.check(tolerance).map_err(|e| e.to_string()))
}
