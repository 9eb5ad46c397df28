//! [`ShardManager`]: shard assignment across replicas with one Lease per shard.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    time::{Duration, SystemTime},
};

use rand::Rng;
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, warn};

use super::{
    config::{Config, Error},
    gate::ShardGate,
    layout::Layout,
    leases::{NamedRecord, ShardLeases},
    selection::Selection,
    selector::fnv1a64,
};
use crate::leaderelection::{LeaseRecord, LockError};

/// Shares `N` shards among the live replicas of a group, on Kubernetes Leases only.
///
/// Every `retry_period` each replica lists the group's Leases, renews its membership Lease
/// and the shard Leases it holds, and then:
///
/// - counts the live replicas (membership Leases renewed within their duration, judged on its
///   own clock from when it saw them change, as client-go's leader election does) and its
///   fair share, ⌈N / live⌉;
/// - releases shards above its fair share (when a replica joins): it first closes them in its
///   [`ShardGate`] and waits for their reconciles in flight, then clears the Lease's holder;
/// - acquires free shards (no holder, or a Lease that expired: a replica died) up to its fair
///   share, preferring the shards it ranks highest (rendezvous hashing of identity and shard,
///   so replicas rarely race for the same one);
/// - stops reconciling a shard whose Lease it could not renew within `renew_deadline`, at
///   the moment that deadline passes, counted from when its last successful renewal was
///   sent (a round of requests is cut off after half of it or at that moment, so neither a
///   hanging request nor the phase of the rounds can delay this).
///
/// Reconciles still in flight when a shard is closed that way keep running: bound them with
/// a reconcile timeout below `lease_duration − renew_deadline`, or two replicas may briefly
/// work on the same key (as with client-go's leader election, this is not fencing).
///
/// The [`Selection`] follows the open shards, so informers built on it hold only this
/// replica's objects. On cancel, every shard is closed (draining), its Lease released, and
/// the membership Lease cleared, so the others take over at once.
///
/// ```
/// use kcache::sharding::{Config, FakeLeases, ShardManager};
/// use tokio_util::sync::CancellationToken;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), kcache::sharding::Error> {
/// let manager = ShardManager::new(Config::new("demo", "replica-0").shards(4), FakeLeases::new())?;
/// let cancel = CancellationToken::new();
/// let mut shards = manager.watch();
/// let run = tokio::spawn({ let c = cancel.clone(); async move { manager.run(c).await } });
/// shards.wait_for(|s| s.len() == 4).await.unwrap(); // alone: all four shards
/// cancel.cancel();
/// run.await.unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ShardManager<L> {
    config: Config,
    leases: L,
    layout: Layout,
    gate: ShardGate,
    selection: Selection,
}

#[derive(Debug)]
struct Observed {
    resource_version: String,
    at: Instant,
}

#[derive(Debug)]
struct Held {
    resource_version: String,
    renewed: Instant,
    record: LeaseRecord,
    /// Closed here and to be released once its reconciles in flight have finished (renewed
    /// meanwhile).
    releasing: bool,
}

#[derive(Debug, Default)]
struct State {
    observed: HashMap<String, Observed>,
    held: BTreeMap<u32, Held>,
    listing_failed: bool,
    /// Rounds whose list succeeded.
    rounds: u64,
}

impl<L: ShardLeases> ShardManager<L> {
    /// A manager holding no shards yet.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (see [`Config::validate`]).
    pub fn new(config: Config, leases: L) -> Result<Self, Error> {
        config.validate()?;
        let layout = Layout::new(config.shards, config.field);
        Ok(Self {
            gate: ShardGate::new(layout),
            selection: Selection::new(Some(layout.selector(&BTreeSet::new()))),
            config,
            leases,
            layout,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The shard layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The gate the reconcile workers check.
    pub fn gate(&self) -> &ShardGate {
        &self.gate
    }

    /// The selection to build this replica's informers on (it starts selecting nothing).
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The shards open here, updated on every change.
    pub fn watch(&self) -> watch::Receiver<BTreeSet<u32>> {
        self.gate.watch_active()
    }

    /// Takes part in the group until `cancel` fires, then hands every shard back.
    pub async fn run(&self, cancel: CancellationToken) {
        let span = tracing::info_span!("shards", group = %self.config.group, identity = %self.config.identity);
        async {
            let mut st = State::default();
            while !cancel.is_cancelled() {
                // A request that hangs must not keep shards open past the renew deadline
                // (the others take them over once their Leases expire): bound the round,
                // and end it at the first renew deadline.
                let bound = self.config.renew_deadline / 2;
                let end = self.first_deadline(&st).map_or(Instant::now() + bound, |d| {
                    d.min(Instant::now() + bound)
                });
                if tokio::time::timeout_at(end, self.round(&mut st))
                    .await
                    .is_err()
                {
                    warn!(?bound, "a round of Lease requests did not finish in time");
                }
                self.drop_overdue(&mut st);
                let jitter = rand::rng().random_range(0.0..0.2);
                let mut wake = Instant::now() + self.config.retry_period.mul_f64(1.0 + jitter);
                // Close a shard at its deadline, not at the next round.
                if let Some(d) = self.first_deadline(&st) {
                    wake = wake.min(d);
                }
                tokio::select! {
                    () = cancel.cancelled() => {}
                    () = tokio::time::sleep_until(wake) => {}
                }
                self.drop_overdue(&mut st);
            }
            self.leave(&mut st).await;
        }
        .instrument(span)
        .await;
    }

    async fn round(&self, st: &mut State) {
        let now = Instant::now();
        let list = match self.leases.list().await {
            Ok(list) => {
                if st.listing_failed {
                    info!("shard Leases readable again");
                    st.listing_failed = false;
                }
                list
            }
            Err(e) => {
                if !st.listing_failed {
                    warn!(error = %e, leases = %self.leases.describe(), "cannot list the shard Leases; keeping the shards renewed within the deadline");
                    st.listing_failed = true;
                }
                self.drop_overdue(st);
                return;
            }
        };
        st.rounds += 1;
        let by_name: HashMap<&str, &NamedRecord> =
            list.iter().map(|n| (n.name.as_str(), n)).collect();
        st.observed
            .retain(|name, _| by_name.contains_key(name.as_str()));
        for n in &list {
            let seen = st.observed.get(&n.name);
            if seen.is_none_or(|o| o.resource_version != n.record.resource_version) {
                st.observed.insert(
                    n.name.clone(),
                    Observed {
                        resource_version: n.record.resource_version.clone(),
                        at: now,
                    },
                );
            }
        }
        self.renew_membership(by_name.get(self.config.member_lease().as_str()).copied())
            .await;
        let live = 1 + list
            .iter()
            .filter(|n| {
                n.name.starts_with(&self.config.member_prefix())
                    && n.name != self.config.member_lease()
                    && !n.record.record.holder_identity.is_empty()
                    && !self.expired(st, n, now)
            })
            .count();
        let fair = self
            .config
            .shards
            .div_ceil(u32::try_from(live).unwrap_or(u32::MAX));
        self.renew_held(st, &by_name, now).await;
        self.finish_releases(st).await;
        let keeping: Vec<u32> = st
            .held
            .iter()
            .filter(|(_, h)| !h.releasing)
            .map(|(s, _)| *s)
            .collect();
        let kept = u32::try_from(keeping.len()).unwrap_or(u32::MAX);
        if kept > fair {
            let surplus = (kept - fair) as usize;
            let mut mine = keeping;
            mine.sort_by_key(|s| self.rank(*s));
            for shard in mine.into_iter().take(surplus) {
                info!(shard, live, fair, "handing a shard over to a new replica");
                self.start_release(st, shard);
            }
            self.finish_releases(st).await;
        } else if kept < fair && st.rounds > 1 {
            // Not in the first round: replicas started together must first see each other's
            // membership Leases, or the first one takes every shard, syncs every object and
            // hands most of them back a round later.
            self.acquire(st, &by_name, fair, now).await;
        }
        self.publish(st);
    }

    /// Higher ranks are preferred by this replica.
    fn rank(&self, shard: u32) -> u64 {
        fnv1a64(format!("{}/{shard}", self.config.identity).as_bytes())
    }

    fn expired(&self, st: &State, n: &NamedRecord, now: Instant) -> bool {
        let duration = Duration::from_secs(
            u64::try_from(n.record.record.lease_duration_seconds.max(1)).unwrap_or(1),
        );
        st.observed
            .get(&n.name)
            .is_none_or(|o| now.duration_since(o.at) > duration)
    }

    fn record(&self, previous: Option<&LeaseRecord>) -> LeaseRecord {
        let now = SystemTime::now();
        let duration = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        match previous {
            Some(p) if p.holder_identity == self.config.identity => LeaseRecord {
                renew_time: Some(now),
                lease_duration_seconds: duration,
                ..p.clone()
            },
            p => LeaseRecord {
                holder_identity: self.config.identity.clone(),
                lease_duration_seconds: duration,
                acquire_time: Some(now),
                renew_time: Some(now),
                leader_transitions: p.map_or(0, |p| p.leader_transitions.saturating_add(1)),
            },
        }
    }

    async fn renew_membership(&self, current: Option<&NamedRecord>) {
        let name = self.config.member_lease();
        let res = match current {
            Some(n) => {
                let record = self.record(Some(&n.record.record));
                self.leases
                    .update(&name, &record, &n.record.resource_version)
                    .await
            }
            None => self.leases.create(&name, &self.record(None)).await,
        };
        if let Err(e) = res {
            debug!(error = %e, lease = %name, "membership Lease not renewed this round");
        }
    }

    async fn renew_held(
        &self,
        st: &mut State,
        by_name: &HashMap<&str, &NamedRecord>,
        now: Instant,
    ) {
        let shards: Vec<u32> = st.held.keys().copied().collect();
        for shard in shards {
            let name = self.config.shard_lease(shard);
            let Some(held) = st.held.get(&shard) else {
                continue;
            };
            let taken = match by_name.get(name.as_str()) {
                None => true,
                Some(n) => {
                    n.record.resource_version != held.resource_version
                        && n.record.record.holder_identity != self.config.identity
                }
            };
            if taken {
                warn!(
                    shard,
                    "shard Lease taken over or deleted; closing the shard here"
                );
                self.lose(st, shard);
                continue;
            }
            let rv = by_name.get(name.as_str()).map_or_else(
                || held.resource_version.clone(),
                |n| n.record.resource_version.clone(),
            );
            let record = self.record(Some(&held.record));
            match self.leases.update(&name, &record, &rv).await {
                Ok(rv) => {
                    if let Some(h) = st.held.get_mut(&shard) {
                        h.resource_version = rv;
                        h.renewed = now;
                        h.record = record;
                    }
                }
                Err(e) if e.is_conflict() || e.is_not_found() => {
                    warn!(shard, error = %e, "lost a shard Lease; closing the shard here");
                    self.lose(st, shard);
                }
                Err(e) => debug!(shard, error = %e, "shard Lease not renewed this round"),
            }
        }
        self.drop_overdue(st);
    }

    /// When the first held shard's renew deadline passes (the time its last renewal was
    /// sent, plus `renew_deadline`).
    fn first_deadline(&self, st: &State) -> Option<Instant> {
        st.held
            .values()
            .map(|h| h.renewed + self.config.renew_deadline)
            .min()
    }

    /// Closes the shards not renewed within the renew deadline, as of now.
    fn drop_overdue(&self, st: &mut State) {
        let now = Instant::now();
        let overdue: Vec<u32> = st
            .held
            .iter()
            .filter(|(_, h)| now.duration_since(h.renewed) >= self.config.renew_deadline)
            .map(|(s, _)| *s)
            .collect();
        for shard in overdue {
            warn!(
                shard,
                "shard Lease not renewed within the renew deadline; closing the shard here"
            );
            self.lose(st, shard);
        }
    }

    /// Stops working on `shard` without touching its Lease (it is lost already).
    fn lose(&self, st: &mut State, shard: u32) {
        self.gate.close(shard);
        st.held.remove(&shard);
        self.publish(st);
    }

    /// Closes `shard` here; its Lease is released by [`Self::finish_releases`] once its
    /// reconciles in flight have finished, and renewed until then.
    fn start_release(&self, st: &mut State, shard: u32) {
        self.gate.close(shard);
        if let Some(h) = st.held.get_mut(&shard) {
            h.releasing = true;
        }
        self.publish(st);
    }

    /// Releases the closed shards that nothing here works on any more.
    async fn finish_releases(&self, st: &mut State) {
        let ready: Vec<u32> = st
            .held
            .iter()
            .filter(|(s, h)| h.releasing && self.gate.in_flight(**s) == 0)
            .map(|(s, _)| *s)
            .collect();
        for shard in ready {
            let Some(held) = st.held.remove(&shard) else {
                continue;
            };
            let record = LeaseRecord {
                holder_identity: String::new(),
                renew_time: Some(SystemTime::now()),
                ..held.record
            };
            let name = self.config.shard_lease(shard);
            match self
                .leases
                .update(&name, &record, &held.resource_version)
                .await
            {
                Ok(_) => info!(shard, "released a shard"),
                Err(e) => {
                    debug!(shard, error = %e, "could not clear the shard Lease; it will expire")
                }
            }
        }
    }

    async fn acquire(
        &self,
        st: &mut State,
        by_name: &HashMap<&str, &NamedRecord>,
        fair: u32,
        now: Instant,
    ) {
        let mut free: Vec<u32> = (0..self.config.shards)
            .filter(|s| !st.held.contains_key(s))
            .filter(
                |s| match by_name.get(self.config.shard_lease(*s).as_str()) {
                    None => true,
                    Some(n) => {
                        n.record.record.holder_identity.is_empty() || self.expired(st, n, now)
                    }
                },
            )
            .collect();
        free.sort_by_key(|s| std::cmp::Reverse(self.rank(*s)));
        for shard in free {
            if st.held.values().filter(|h| !h.releasing).count() >= fair as usize {
                break;
            }
            let name = self.config.shard_lease(shard);
            let current = by_name.get(name.as_str());
            let record = self.record(current.map(|n| &n.record.record).filter(|r| {
                // A new holder starts a new term, even after ourselves.
                r.holder_identity != self.config.identity
            }));
            let record = match current {
                Some(n) if n.record.record.holder_identity == self.config.identity => LeaseRecord {
                    leader_transitions: n.record.record.leader_transitions,
                    ..record
                },
                _ => record,
            };
            let res: Result<String, LockError> = match current {
                Some(n) => {
                    self.leases
                        .update(&name, &record, &n.record.resource_version)
                        .await
                }
                None => self.leases.create(&name, &record).await,
            };
            match res {
                Ok(rv) => {
                    info!(shard, "acquired a shard");
                    st.held.insert(
                        shard,
                        Held {
                            resource_version: rv,
                            renewed: now,
                            record,
                            releasing: false,
                        },
                    );
                    self.gate.activate(shard);
                }
                Err(e) => debug!(shard, error = %e, "shard taken by another replica first"),
            }
        }
    }

    fn publish(&self, st: &State) {
        let open: BTreeSet<u32> = st
            .held
            .keys()
            .copied()
            .filter(|s| self.gate.is_active(*s))
            .collect();
        self.selection.set(Some(self.layout.selector(&open)));
    }

    async fn leave(&self, st: &mut State) {
        let shards: Vec<u32> = st.held.keys().copied().collect();
        for shard in shards {
            self.start_release(st, shard);
            // The controller drains its workers before it cancels the manager; bound the
            // wait anyway (a Lease not cleared expires).
            let drained = self.gate.deactivate(shard);
            if tokio::time::timeout(self.config.renew_deadline, drained)
                .await
                .is_err()
            {
                warn!(
                    shard,
                    "reconciles still in flight at shutdown; leaving the Lease to expire"
                );
                st.held.remove(&shard);
            }
        }
        self.finish_releases(st).await;
        let name = self.config.member_lease();
        if let Ok(list) = self.leases.list().await
            && let Some(n) = list.iter().find(|n| n.name == name)
        {
            let record = LeaseRecord {
                holder_identity: String::new(),
                ..n.record.record.clone()
            };
            if let Err(e) = self
                .leases
                .update(&name, &record, &n.record.resource_version)
                .await
            {
                debug!(error = %e, "could not clear the membership Lease; it will expire");
            }
        }
        info!("left the shard group");
    }
}
