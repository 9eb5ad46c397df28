//! [`ShardGate`]: which shards this replica may reconcile now, and the reconciles in flight
//! per shard, so that a shard is handed over only once nothing here works on it.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
};

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use super::layout::Layout;

/// The shards a replica may reconcile, with a count of the reconciles in flight in each.
///
/// Workers call [`enter`](Self::enter) before a reconcile and hold the guard until it ends;
/// [`deactivate`](Self::deactivate) closes a shard to new reconciles and waits until the
/// ones in flight have finished. A [`ShardManager`](super::ShardManager) deactivates a shard
/// before it releases the shard's Lease, so a key is never reconciled by two replicas at once
/// (as long as reconciles end within the renew deadline; bound them with a reconcile
/// timeout).
///
/// ```
/// use kcache::sharding::{Field, Layout, ShardGate};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let gate = ShardGate::new(Layout::new(4, Field::Uid));
/// assert!(gate.enter(2).is_none());
/// gate.activate(2);
/// let guard = gate.enter(2).expect("shard 2 is active");
/// drop(guard);
/// gate.deactivate(2).await; // returns once no reconcile of shard 2 is in flight
/// assert!(gate.enter(2).is_none());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ShardGate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    layout: Layout,
    state: Mutex<State>,
    drained: Notify,
    active_tx: watch::Sender<BTreeSet<u32>>,
}

#[derive(Debug, Default)]
struct State {
    active: BTreeSet<u32>,
    in_flight: HashMap<u32, usize>,
}

/// Held while one reconcile of a shard runs (see [`ShardGate::enter`]).
#[derive(Debug)]
#[must_use = "the reconcile counts as in flight only while the guard lives"]
pub struct GateGuard {
    inner: Arc<Inner>,
    shard: u32,
}

impl ShardGate {
    /// A gate over `layout`'s shards, all closed.
    pub fn new(layout: Layout) -> Self {
        Self {
            inner: Arc::new(Inner {
                layout,
                state: Mutex::default(),
                drained: Notify::new(),
                active_tx: watch::channel(BTreeSet::new()).0,
            }),
        }
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.inner.layout
    }

    /// The open shards.
    pub fn active(&self) -> BTreeSet<u32> {
        self.inner.state.lock().active.clone()
    }

    /// A receiver of the open shards, updated on every change.
    pub fn watch_active(&self) -> watch::Receiver<BTreeSet<u32>> {
        self.inner.active_tx.subscribe()
    }

    /// Whether `shard` is open.
    pub fn is_active(&self, shard: u32) -> bool {
        self.inner.state.lock().active.contains(&shard)
    }

    /// Opens `shard` to reconciles.
    pub fn activate(&self, shard: u32) {
        let changed = self.inner.state.lock().active.insert(shard);
        if changed {
            self.publish();
        }
    }

    /// A guard for one reconcile of `shard`, or `None` when the shard is not open here.
    pub fn enter(&self, shard: u32) -> Option<GateGuard> {
        let mut st = self.inner.state.lock();
        if !st.active.contains(&shard) {
            return None;
        }
        *st.in_flight.entry(shard).or_default() += 1;
        Some(GateGuard {
            inner: Arc::clone(&self.inner),
            shard,
        })
    }

    /// Closes `shard` to new reconciles, without waiting for those in flight.
    pub fn close(&self, shard: u32) {
        let changed = self.inner.state.lock().active.remove(&shard);
        if changed {
            self.publish();
        }
    }

    /// How many reconciles of `shard` are in flight.
    pub fn in_flight(&self, shard: u32) -> usize {
        self.inner
            .state
            .lock()
            .in_flight
            .get(&shard)
            .copied()
            .unwrap_or(0)
    }

    /// Closes `shard` to new reconciles and waits until none of it is in flight.
    pub async fn deactivate(&self, shard: u32) {
        self.close(shard);
        loop {
            let notified = self.inner.drained.notified();
            if self
                .inner
                .state
                .lock()
                .in_flight
                .get(&shard)
                .is_none_or(|n| *n == 0)
            {
                return;
            }
            notified.await;
        }
    }

    fn publish(&self) {
        let active = self.active();
        self.inner.active_tx.send_replace(active);
    }
}

impl Drop for GateGuard {
    fn drop(&mut self) {
        let mut st = self.inner.state.lock();
        if let Some(n) = st.in_flight.get_mut(&self.shard) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.in_flight.remove(&self.shard);
            }
        }
        drop(st);
        self.inner.drained.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::Field;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn deactivate_waits_for_the_reconciles_in_flight() {
        let gate = ShardGate::new(Layout::new(2, Field::Uid));
        gate.activate(1);
        let guard = gate.enter(1).unwrap();
        let closing = tokio::spawn({
            let gate = gate.clone();
            async move { gate.deactivate(1).await }
        });
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        assert!(
            !closing.is_finished(),
            "deactivate returned with a reconcile in flight"
        );
        assert!(
            gate.enter(1).is_none(),
            "a closing shard admitted a new reconcile"
        );
        drop(guard);
        closing.await.unwrap();
        assert!(gate.active().is_empty());
    }
}
