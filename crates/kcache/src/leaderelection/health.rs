//! client-go's `LeaderElector.Check`: the health check behind its `HealthzAdaptor`.

use std::time::Duration;

use tokio::time::Instant;

use super::elector::LeaderElector;

/// Why [`LeaderElector::check`] failed: this replica believes it leads but has not renewed
/// the lease for longer than the lease duration plus the tolerance — it should have stepped
/// down (or exited) by now, and something (a stuck task, a lost connection) keeps it from it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "failed election to renew leadership on lease {lock}: {identity} last renewed {since:?} \
     ago, more than the lease duration ({lease_duration:?}) plus {tolerance:?}"
)]
pub struct HealthError {
    /// The lock's description (`namespace/name`).
    pub lock: String,
    /// This candidate's identity.
    pub identity: String,
    /// Time since the lease record was last written or seen changed by this replica.
    pub since: Duration,
    /// The configured lease duration.
    pub lease_duration: Duration,
    /// The tolerance passed to [`LeaderElector::check`].
    pub tolerance: Duration,
}

impl<L> LeaderElector<L> {
    /// client-go's `Check(maxTolerableExpiredLease)`: healthy unless this replica believes it
    /// leads — it is [leading](Self::is_leader), or the record it last observed names it (as
    /// client-go's `IsLeader` says, also after a step-down the process survived) — and more
    /// than `lease_duration + tolerance` has passed since it last renewed (on its own clock).
    /// A standby is always healthy.
    ///
    /// Use it as a liveness check, so that a leader that cannot step down is restarted;
    /// `kcache_metrics::leader_election_check` wraps it for `/healthz`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache::leaderelection::{Config, FakeLock, LeaderElector};
    ///
    /// let elector = LeaderElector::new(Config::new("replica-0"), FakeLock::new())?;
    /// assert!(elector.check(Duration::from_secs(20)).is_ok(), "never led: healthy");
    /// # Ok::<(), kcache::leaderelection::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`HealthError`] as above.
    pub fn check(&self, tolerance: Duration) -> Result<(), HealthError> {
        let identity = &self.config.identity;
        let leading = self.is_leader();
        let since = {
            let o = self.observed.lock();
            if !leading && o.holder() != identity {
                return Ok(());
            }
            match o.time {
                Some(t) => Instant::now().saturating_duration_since(t),
                None => return Ok(()),
            }
        };
        let lease_duration = self.config.lease_duration;
        if since > lease_duration.saturating_add(tolerance) {
            return Err(HealthError {
                lock: self.describe.clone(),
                identity: identity.clone(),
                since,
                lease_duration,
                tolerance,
            });
        }
        Ok(())
    }
}
