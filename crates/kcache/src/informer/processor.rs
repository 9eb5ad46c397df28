//! The shared processor: fans notifications out to every listener.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;

use super::listener::{Listener, Notification, determine_resync_period};

pub(crate) struct Processor<K> {
    listeners: RwLock<Vec<Arc<Listener<K>>>>,
    /// Listeners whose resync was due at the last `should_resync` (client-go's
    /// `syncingListeners`): resync notifications go only to them.
    syncing: Mutex<Vec<Arc<Listener<K>>>>,
    next_id: AtomicU64,
}

impl<K: Send + Sync + 'static> Processor<K> {
    pub(crate) fn new() -> Self {
        Self {
            listeners: RwLock::new(Vec::new()),
            syncing: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn add(&self, listener: Arc<Listener<K>>) {
        self.listeners.write().push(listener);
    }

    pub(crate) fn listeners(&self) -> Vec<Arc<Listener<K>>> {
        self.listeners.read().clone()
    }

    /// Removes a listener; `false` if it was not there.
    pub(crate) fn remove(&self, id: u64) -> bool {
        let mut listeners = self.listeners.write();
        let before = listeners.len();
        listeners.retain(|l| l.id != id);
        self.syncing.lock().retain(|l| l.id != id);
        before != listeners.len()
    }

    /// Queues `n` for every listener, or for a resync notification only for those whose
    /// resync is due. Nothing is delivered until [`flush`](Self::flush).
    ///
    /// A relist's unchanged objects are resync notifications too, so a handler without a
    /// resync period never receives them. client-go delivers them to every listener of an
    /// informer without a resync period (its listeners start "syncing" and only a resync
    /// period ever clears that); kcache does not, on purpose — see
    /// `crates/kcache/tests/relist_delivery.rs` for the reasons and the test.
    pub(crate) fn distribute(&self, n: Notification<K>, is_sync: bool) {
        if is_sync {
            let syncing = self.syncing.lock();
            send_all(&syncing, n);
        } else {
            let listeners = self.listeners.read();
            send_all(&listeners, n);
        }
    }

    /// Delivers what was queued since the last flush (on the caller's task for idle, quick
    /// handlers; the others' tasks are woken). Must not be called under `block_deltas`: a
    /// handler may register another handler.
    pub(crate) fn flush(&self) {
        let listeners = self.listeners.read().clone();
        for l in &listeners {
            l.flush();
        }
    }

    /// Works out which listeners are due a resync now (and schedules their next one);
    /// `true` if any is.
    pub(crate) fn should_resync(&self) -> bool {
        let now = Instant::now();
        let due: Vec<_> = self
            .listeners
            .read()
            .iter()
            .filter(|l| l.resync_due(now))
            .inspect(|l| l.schedule_next_resync(now))
            .cloned()
            .collect();
        let any = !due.is_empty();
        *self.syncing.lock() = due;
        any
    }

    /// The informer's check period went down: recompute every listener's period.
    pub(crate) fn resync_check_period_changed(&self, check: Duration) {
        for l in self.listeners.read().iter() {
            l.set_resync_period(determine_resync_period(l.requested_resync, check));
        }
    }

    pub(crate) fn close_all(&self) {
        for l in self.listeners.read().iter() {
            l.close();
        }
    }
}

fn send_all<K: Send + Sync + 'static>(listeners: &[Arc<Listener<K>>], n: Notification<K>) {
    if let Some((last, rest)) = listeners.split_last() {
        for l in rest {
            l.push(n.clone());
        }
        last.push(n);
    }
}
