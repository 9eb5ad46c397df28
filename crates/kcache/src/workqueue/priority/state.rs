//! The queue's state under its lock: one entry per item (priority, order, ready time), the
//! ready, waiting and processing sets, and the transitions between them (add, promotion of
//! due items, hand-out, done, shutdown), with what each asks for once the lock is released.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::workqueue::metrics::{QueueMetrics, Timestamps};
use crate::workqueue::rate_limiters::RateLimiter;

pub(super) struct Shared<T> {
    pub(super) state: Mutex<State<T>>,
    /// Signalled once per item that can be handed out, and on shutdown (`notify_waiters`).
    pub(super) item_ready: Notify,
    /// Signalled when the processing set becomes empty or a drain is cut short.
    pub(super) drained: Notify,
    /// Signalled when an add makes the earliest deadline earlier.
    pub(super) earlier: Notify,
    pub(super) metrics: Option<QueueMetrics>,
    pub(super) rate_limiter: Arc<dyn RateLimiter<T>>,
    /// Cancelled at shutdown, or when the last public handle is dropped: stops the driver.
    pub(super) stopped: CancellationToken,
}

/// One item that needs processing (queued, waiting for its delay, or re-added while held).
pub(super) struct Entry {
    priority: i32,
    /// Order among ready items of one priority: given when the item became ready.
    seq: u64,
    /// `None`: ready. `Some(t)`: waiting until `t`.
    due: Option<Instant>,
}

pub(super) struct State<T> {
    pub(super) entries: HashMap<T, Entry>,
    /// The ready entries no worker holds, highest priority (then lowest seq) first.
    pub(super) ready: BTreeMap<(Reverse<i32>, u64), T>,
    /// The entries waiting for their time, earliest first.
    pub(super) waiting: BTreeMap<(Instant, u64), T>,
    /// Items a worker holds right now.
    pub(super) processing: HashSet<T>,
    pub(super) next_seq: u64,
    pub(super) shutting_down: bool,
    pub(super) drain: bool,
    /// Present only when the queue records metrics.
    pub(super) timestamps: Option<Timestamps<T>>,
}

/// What a change under the lock asks for once the lock is released.
#[derive(Default)]
#[must_use]
pub(super) struct Changes {
    /// Items that became ready (counted as adds, raise the depth).
    pub(super) became_ready: usize,
    /// Items that became ready and can be handed out (each wakes one worker).
    pub(super) wake: usize,
    /// Whether the earliest deadline moved earlier (wakes the driver).
    pub(super) earlier: bool,
}

impl<T: Clone + Eq + Hash> State<T> {
    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Makes the entry of `item` (already in `entries`, not in `waiting`) ready now.
    fn make_ready(&mut self, item: T, now: Instant, changes: &mut Changes) {
        let seq = self.take_seq();
        let Some(entry) = self.entries.get_mut(&item) else {
            return;
        };
        entry.due = None;
        entry.seq = seq;
        let priority = entry.priority;
        if let Some(timestamps) = self.timestamps.as_mut() {
            timestamps.added(&item, now);
        }
        changes.became_ready += 1;
        if !self.processing.contains(&item) {
            self.ready.insert((Reverse(priority), seq), item);
            changes.wake += 1;
        }
    }

    /// Moves the entries whose time has come to the ready ones, earliest first.
    pub(super) fn promote(&mut self, now: Instant, changes: &mut Changes) {
        while let Some(entry) = self.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let item = entry.remove();
            self.make_ready(item, now, changes);
        }
    }

    pub(super) fn add(
        &mut self,
        item: T,
        priority: i32,
        due: Option<Instant>,
        now: Instant,
    ) -> Changes {
        let mut changes = Changes::default();
        self.promote(now, &mut changes);
        let Some(entry) = self.entries.get_mut(&item) else {
            let seq = self.take_seq();
            self.entries
                .insert(item.clone(), Entry { priority, seq, due });
            match due {
                Some(at) => {
                    changes.earlier = self.waiting.first_key_value().is_none_or(|(k, _)| at < k.0);
                    self.waiting.insert((at, seq), item);
                }
                None => self.make_ready(item, now, &mut changes),
            }
            return changes;
        };
        let old_priority = entry.priority;
        entry.priority = entry.priority.max(priority);
        match entry.due {
            // Ready already: only the priority can change.
            None => {
                if entry.priority != old_priority
                    && self
                        .ready
                        .remove(&(Reverse(old_priority), entry.seq))
                        .is_some()
                {
                    self.ready
                        .insert((Reverse(entry.priority), entry.seq), item);
                }
            }
            Some(old_due) => match due {
                None => {
                    self.waiting.remove(&(old_due, entry.seq));
                    self.make_ready(item, now, &mut changes);
                }
                Some(at) if at < old_due => {
                    let seq = entry.seq;
                    entry.due = Some(at);
                    self.waiting.remove(&(old_due, seq));
                    changes.earlier = self.waiting.first_key_value().is_none_or(|(k, _)| at < k.0);
                    self.waiting.insert((at, seq), item);
                }
                Some(_) => {}
            },
        }
        changes
    }
}

pub(super) enum TryGet<T> {
    Item(T, i32),
    Empty,
    ShutDown,
}
impl<T> Shared<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// Publishes what a change under the lock asks for; call it after releasing the lock.
    pub(super) fn publish(&self, changes: Changes) {
        if let Some(metrics) = &self.metrics {
            for _ in 0..changes.became_ready {
                metrics.added();
            }
        }
        for _ in 0..changes.wake {
            self.item_ready.notify_one();
        }
        if changes.earlier {
            self.earlier.notify_one();
        }
    }

    pub(super) fn try_get(&self) -> TryGet<T> {
        let now = Instant::now();
        let mut changes = Changes::default();
        let got = {
            let mut state = self.state.lock();
            state.promote(now, &mut changes);
            match state.ready.pop_first() {
                None => Err(state.shutting_down),
                Some(((Reverse(priority), _), item)) => {
                    let state = &mut *state;
                    state.entries.remove(&item);
                    state.processing.insert(item.clone());
                    let waited = state
                        .timestamps
                        .as_mut()
                        .and_then(|timestamps| timestamps.got(&item, now));
                    Ok((item, priority, waited))
                }
            }
        };
        self.publish(changes);
        match got {
            Ok((item, priority, waited)) => {
                if let Some(metrics) = &self.metrics {
                    metrics.got(waited);
                }
                TryGet::Item(item, priority)
            }
            Err(true) => TryGet::ShutDown,
            Err(false) => TryGet::Empty,
        }
    }

    pub(super) fn done(&self, item: &T) {
        let now = Instant::now();
        let mut changes = Changes::default();
        let (idle, worked) = {
            let mut state = self.state.lock();
            if !state.processing.remove(item) {
                return;
            }
            let state = &mut *state;
            let worked = state
                .timestamps
                .as_mut()
                .and_then(|timestamps| timestamps.done(item, now));
            state.promote(now, &mut changes);
            if let Some(entry) = state.entries.get(item)
                && entry.due.is_none()
            {
                state
                    .ready
                    .insert((Reverse(entry.priority), entry.seq), item.clone());
                changes.wake += 1;
            }
            (state.processing.is_empty(), worked)
        };
        self.publish(changes);
        if idle {
            self.drained.notify_waiters();
        }
        if let (Some(metrics), Some(worked)) = (&self.metrics, worked) {
            metrics.done(worked);
        }
    }

    pub(super) fn shutdown(&self, drain: bool) {
        let mut changes = Changes::default();
        {
            let mut state = self.state.lock();
            // Items whose time has already come stay, as if the driver had moved them.
            state.promote(Instant::now(), &mut changes);
            state.shutting_down = true;
            state.drain = drain;
            let state = &mut *state;
            for item in std::mem::take(&mut state.waiting).into_values() {
                state.entries.remove(&item);
            }
        }
        self.publish(changes);
        self.stopped.cancel();
        self.item_ready.notify_waiters();
        if !drain {
            self.drained.notify_waiters();
        }
    }

    pub(super) fn update_unfinished_work(&self) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let work = {
            let state = self.state.lock();
            if state.shutting_down {
                return;
            }
            match &state.timestamps {
                Some(timestamps) => timestamps.unfinished(Instant::now()),
                None => return,
            }
        };
        metrics.unfinished(work);
    }
}
