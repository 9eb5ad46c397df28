//! One acquire-or-renew attempt, the release, and the bookkeeping of what was observed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::{Instant, timeout_at};
use tracing::{debug, info, warn};

use super::{
    elector::LeaderElector,
    lock::{Holder, LeaseLock, LeaseRecord},
};

/// The wall clock for the record's timestamps, truncated to the microseconds a Lease's
/// `MicroTime` keeps, so that a record read back equals the record written.
fn wall_now() -> SystemTime {
    let now = SystemTime::now();
    now.duration_since(UNIX_EPOCH).map_or(now, |d| {
        UNIX_EPOCH + Duration::new(d.as_secs(), d.subsec_micros() * 1000)
    })
}

impl<L: LeaseLock> LeaderElector<L> {
    /// One attempt: renew optimistically at the last version if leading, otherwise (or on
    /// failure) read the lease, create it if missing, or take it if free or expired.
    pub(super) async fn try_acquire_or_renew(&self) -> bool {
        let now = Instant::now();
        let wall = wall_now();
        let identity = &self.config.identity;
        let lock = &self.describe;
        let mut desired = LeaseRecord {
            holder_identity: identity.clone(),
            lease_duration_seconds: self.config.lease_duration_seconds(),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            leader_transitions: 0,
        };

        // Fast path: the leader renews at the version it wrote last.
        let fast = {
            let o = self.observed.lock();
            (o.holder() == identity && o.valid_at(now))
                .then(|| o.record.clone().zip(o.resource_version.clone()))
                .flatten()
        };
        if let Some((old, rv)) = fast {
            desired.acquire_time = old.acquire_time;
            desired.leader_transitions = old.leader_transitions;
            match self.lock.update(&desired, &rv).await {
                Ok(rv) => {
                    self.set_observed(desired, rv);
                    return true;
                }
                Err(error) => debug!(%lock, %error, "optimistic renewal failed; re-reading"),
            }
        }

        let current = match self.lock.get().await {
            Ok(current) => current,
            Err(e) if e.is_not_found() => {
                return match self.lock.create(&desired).await {
                    Ok(rv) => {
                        self.set_observed(desired, rv);
                        true
                    }
                    Err(error) => {
                        warn!(%lock, %error, "cannot create the leader lease");
                        false
                    }
                };
            }
            Err(error) => {
                warn!(%lock, %error, "cannot read the leader lease");
                return false;
            }
        };

        let (ours, valid) = {
            let mut o = self.observed.lock();
            if o.record.as_ref() != Some(&current.record) {
                o.record = Some(current.record.clone());
                o.time = Some(Instant::now());
            }
            o.resource_version = Some(current.resource_version.clone());
            (o.holder() == identity, o.valid_at(now))
        };
        let holder = &current.record.holder_identity;
        if !holder.is_empty() && valid && !ours {
            debug!(%lock, holder = %Holder(holder), "the leader lease is held and not expired");
            return false;
        }
        if ours {
            desired.acquire_time = current.record.acquire_time;
            desired.leader_transitions = current.record.leader_transitions;
        } else {
            desired.leader_transitions = current.record.leader_transitions.saturating_add(1);
        }
        match self.lock.update(&desired, &current.resource_version).await {
            Ok(rv) => {
                self.set_observed(desired, rv);
                true
            }
            Err(error) => {
                warn!(%lock, %error, "cannot update the leader lease");
                false
            }
        }
    }

    /// Gives the lease up if this candidate holds it: empty holder, 1 s duration, within
    /// `renew_deadline`. Returns whether the lease is not ours any more.
    pub(super) async fn release(&self) -> bool {
        let lock = &self.describe;
        let deadline = Instant::now() + self.config.renew_deadline;
        let current = match timeout_at(deadline, self.lock.get()).await {
            Ok(Ok(current)) => current,
            Ok(Err(error)) => {
                warn!(%lock, %error, "cannot read the leader lease to release it");
                return false;
            }
            Err(_) => {
                warn!(%lock, "timed out reading the leader lease to release it");
                return false;
            }
        };
        let identity = &self.config.identity;
        if self.observed.lock().holder() != identity || current.record.holder_identity != *identity
        {
            return true;
        }
        let wall = wall_now();
        let released = LeaseRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(wall),
            renew_time: Some(wall),
            leader_transitions: current.record.leader_transitions,
        };
        match timeout_at(
            deadline,
            self.lock.update(&released, &current.resource_version),
        )
        .await
        {
            Ok(Ok(rv)) => {
                self.set_observed(released, rv);
                info!(%lock, "released the leader lease");
                true
            }
            Ok(Err(error)) => {
                warn!(%lock, %error, "cannot release the leader lease");
                false
            }
            Err(_) => {
                warn!(%lock, "timed out releasing the leader lease");
                false
            }
        }
    }

    fn set_observed(&self, record: LeaseRecord, resource_version: String) {
        let mut o = self.observed.lock();
        o.record = Some(record);
        o.resource_version = Some(resource_version);
        o.time = Some(Instant::now());
    }

    /// Reports a change of the observed holder: `on_new_leader`, and the standby state.
    pub(super) fn maybe_report_transition(&self) {
        let holder = {
            let mut o = self.observed.lock();
            let holder = o.holder().to_owned();
            if holder == o.reported_leader {
                return;
            }
            o.reported_leader.clone_from(&holder);
            holder
        };
        let standby = self.standby_state();
        self.state.send_if_modified(|s| {
            let changed = !s.is_leading() && *s != standby;
            if changed {
                *s = standby;
            }
            changed
        });
        if holder.is_empty() {
            return;
        }
        info!(lock = %self.describe, leader = %holder, "new leader observed");
        if let Some(f) = &self.callbacks.new_leader {
            f(&holder);
        }
    }
}
