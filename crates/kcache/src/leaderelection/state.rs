//! The elector's published state, callbacks and view of the lease.

use std::{fmt, sync::Arc};

use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use super::lock::LeaseRecord;

/// What a [`LeaderElector`](super::LeaderElector) currently is, as published on [`LeaderElector::watch`](super::LeaderElector::watch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderState {
    /// Not leading (also before the first run and after a run ends).
    Standby {
        /// The other candidate last observed holding the lease, if any.
        leader: Option<String>,
    },
    /// This candidate holds the lease and is renewing it.
    Leading,
}

impl LeaderState {
    /// Whether this is [`LeaderState::Leading`].
    pub fn is_leading(&self) -> bool {
        matches!(self, Self::Leading)
    }
}

pub(super) type StartedFn = Arc<dyn Fn(CancellationToken) + Send + Sync>;
pub(super) type StoppedFn = Arc<dyn Fn() + Send + Sync>;
pub(super) type NewLeaderFn = Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
pub(super) struct Callbacks {
    pub(super) started: Option<StartedFn>,
    pub(super) stopped: Option<StoppedFn>,
    pub(super) new_leader: Option<NewLeaderFn>,
}

impl fmt::Debug for Callbacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callbacks")
            .field("on_started_leading", &self.started.is_some())
            .field("on_stopped_leading", &self.stopped.is_some())
            .field("on_new_leader", &self.new_leader.is_some())
            .finish()
    }
}

/// What this replica last saw of the lease, and when (on its own clock).
#[derive(Debug, Default)]
pub(super) struct Observed {
    pub(super) record: Option<LeaseRecord>,
    pub(super) resource_version: Option<String>,
    pub(super) time: Option<Instant>,
    pub(super) reported_leader: String,
}

impl Observed {
    pub(super) fn holder(&self) -> &str {
        self.record
            .as_ref()
            .map_or("", |r| r.holder_identity.as_str())
    }

    /// Valid while less than the record's lease duration has passed since the last change
    /// this replica observed; the record's own timestamps are never used.
    pub(super) fn valid_at(&self, now: Instant) -> bool {
        match (&self.record, self.time) {
            (Some(r), Some(t)) => {
                let secs = u64::try_from(r.lease_duration_seconds).unwrap_or(0);
                t + Duration::from_secs(secs) > now
            }
            _ => false,
        }
    }
}
