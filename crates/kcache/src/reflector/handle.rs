//! What a running reflector shares with its readers: resourceVersions, counters, health.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::histogram::{
    AtomicHistogram, HistogramSnapshot, LIST_ITEMS_BUCKETS, REQUEST_DURATION_BUCKETS,
};

/// Counters a reflector keeps; read them with [`ReflectorHandle::metrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Completed LISTs (each possibly several pages), counted before the store is handed the
    /// list: a reader that sees the cache synced sees its list counted.
    pub lists: u64,
    /// Completed initial syncs after the first one (by LIST or streaming list).
    pub relists: u64,
    /// Completed streaming initial lists, counted as [`lists`](Self::lists) are.
    pub watch_lists: u64,
    /// Watches opened.
    pub watches: u64,
    /// Watch events received (all types; the sum of [`Metrics::watch_events_by_type`]).
    pub watch_events: u64,
    /// Watch events received, by type.
    pub watch_events_by_type: WatchEventCounts,
    /// Relists by what caused them (the sum of its fields is [`Metrics::relists`]).
    pub relists_by_cause: RelistCauses,
    /// Errors passed to the watch error handler.
    pub errors: u64,
    /// Panics caught inside the reflector (each also counted in `errors`).
    pub panics: u64,
}

/// Watch events a reflector received, by type. A bookmark is counted here whether it ends a
/// streaming initial list or only advances the resourceVersion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchEventCounts {
    /// `ADDED` events (those of a streaming initial list included).
    pub added: u64,
    /// `MODIFIED` events.
    pub modified: u64,
    /// `DELETED` events.
    pub deleted: u64,
    /// `BOOKMARK` events.
    pub bookmark: u64,
    /// `ERROR` events (a `Status` in the stream).
    pub error: u64,
}

/// Relists (initial syncs after the first) by the failure that made the reflector list again.
/// When several failures come between two syncs, the first specific one (expired, too large,
/// selection changed) names the cause, else `error`: a watch dropped too early followed by a
/// list at a resourceVersion the server has not reached counts as `too_large`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelistCauses {
    /// The last resourceVersion was too old: 410 Gone / `Expired`.
    pub expired: u64,
    /// The server had not reached the resourceVersion yet: 504 with the
    /// `ResourceVersionTooLarge` cause.
    pub too_large: u64,
    /// The lister-watcher's selection changed (a sharded informer's shards moved).
    pub selection_changed: u64,
    /// Any other failure (a watch that could not be opened, an `ERROR` event, a very short
    /// watch, a protocol error, a panic, …).
    pub error: u64,
}

/// What made a reflector relist; see [`RelistCauses`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelistCause {
    Expired,
    TooLarge,
    SelectionChanged,
    Error,
}

/// A reflector's health, for readiness checks: the last error and how many failures in a row
/// followed it. A successful list, streaming list or watch event resets `consecutive_failures`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// Failures (list, watch, protocol, panic) since the last success.
    pub consecutive_failures: u32,
    /// The text of the most recent failure, kept after recovery for diagnosis.
    pub last_error: Option<String>,
    /// Whether the reflector has completed at least one initial sync.
    pub synced_once: bool,
}

impl Health {
    /// Healthy: synced at least once and fewer than `threshold` failures in a row.
    pub fn is_healthy(&self, threshold: u32) -> bool {
        self.synced_once && self.consecutive_failures < threshold
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) lists: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) watch_lists: AtomicU64,
    pub(crate) watches: AtomicU64,
    pub(crate) watch_events: AtomicU64,
    pub(crate) added: AtomicU64,
    pub(crate) modified: AtomicU64,
    pub(crate) deleted: AtomicU64,
    pub(crate) bookmarks: AtomicU64,
    pub(crate) error_events: AtomicU64,
    pub(crate) relists_expired: AtomicU64,
    pub(crate) relists_too_large: AtomicU64,
    pub(crate) relists_selection_changed: AtomicU64,
    pub(crate) relists_error: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) panics: AtomicU64,
}

impl Counters {
    pub(crate) fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn relists(&self, cause: RelistCause) -> &AtomicU64 {
        match cause {
            RelistCause::Expired => &self.relists_expired,
            RelistCause::TooLarge => &self.relists_too_large,
            RelistCause::SelectionChanged => &self.relists_selection_changed,
            RelistCause::Error => &self.relists_error,
        }
    }
}

#[derive(Default)]
pub(crate) struct RvState {
    pub(crate) last_sync: String,
    /// The last RV is unusable (410 Expired / too large): the next list is at `""`.
    pub(crate) unavailable: bool,
    /// When the RV last advanced (an event, a bookmark or a sync).
    pub(crate) advanced_at: Option<Instant>,
    /// Why the next sync is a relist (see [`Shared::relist_caused_by`]); taken by the sync.
    pub(crate) relist_cause: Option<RelistCause>,
}

#[derive(Default)]
struct HealthState {
    health: Health,
    last_success: Option<Instant>,
}

/// State shared between the reflector task and its handles.
pub(crate) struct Shared {
    pub(crate) rv: Mutex<RvState>,
    pub(crate) paginated_result: AtomicBool,
    pub(crate) counters: Counters,
    /// Objects per completed initial sync (LIST or streaming list).
    pub(crate) list_items: AtomicHistogram,
    /// Seconds per completed initial sync, first request to store replaced.
    pub(crate) list_duration: AtomicHistogram,
    health: Mutex<HealthState>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            rv: Mutex::default(),
            paginated_result: AtomicBool::default(),
            counters: Counters::default(),
            list_items: AtomicHistogram::new(LIST_ITEMS_BUCKETS),
            list_duration: AtomicHistogram::new(REQUEST_DURATION_BUCKETS),
            health: Mutex::default(),
        }
    }
}

impl Shared {
    /// Sets the last synced RV (after a watch event or bookmark).
    pub(crate) fn advance(&self, resource_version: String) {
        let mut rv = self.rv.lock();
        rv.last_sync = resource_version;
        rv.advanced_at = Some(Instant::now());
    }

    /// Remembers why the reflector is about to relist: the first specific cause since the last
    /// sync wins, and any specific cause replaces a pending generic [`RelistCause::Error`].
    pub(crate) fn relist_caused_by(&self, cause: RelistCause) {
        let mut rv = self.rv.lock();
        if matches!(rv.relist_cause, None | Some(RelistCause::Error)) {
            rv.relist_cause = Some(cause);
        }
    }

    /// A sync completed at `resource_version` with `items` objects after `took`: counts it
    /// (and, if it is a relist, its cause) and observes the list histograms.
    pub(crate) fn sync_completed(&self, resource_version: String, items: usize, took: Duration) {
        let cause = {
            let mut rv = self.rv.lock();
            rv.last_sync = resource_version;
            rv.unavailable = false;
            rv.advanced_at = Some(Instant::now());
            rv.relist_cause.take()
        };
        let previous = self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        if previous > 0 {
            Counters::inc(self.counters.relists(cause.unwrap_or(RelistCause::Error)));
        }
        self.list_items.observe(items as f64);
        self.list_duration.observe(took.as_secs_f64());
        self.synced();
    }

    pub(crate) fn success(&self) {
        let mut h = self.health.lock();
        h.health.consecutive_failures = 0;
        h.last_success = Some(Instant::now());
    }

    pub(crate) fn synced(&self) {
        self.health.lock().health.synced_once = true;
        self.success();
    }

    pub(crate) fn failure(&self, error: String) {
        let mut h = self.health.lock();
        h.health.consecutive_failures = h.health.consecutive_failures.saturating_add(1);
        h.health.last_error = Some(error);
    }
}

/// A cheap handle on a running reflector's state.
#[derive(Clone)]
pub struct ReflectorHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) name: Arc<str>,
}

impl std::fmt::Debug for ReflectorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReflectorHandle")
            .field("name", &self.name)
            .field(
                "last_sync_resource_version",
                &self.last_sync_resource_version(),
            )
            .finish_non_exhaustive()
    }
}

impl ReflectorHandle {
    /// The resourceVersion of the last list or watch event applied (client-go
    /// `LastSyncResourceVersion`); empty before the first sync.
    pub fn last_sync_resource_version(&self) -> String {
        self.shared.rv.lock().last_sync.clone()
    }

    /// The name the reflector uses in spans, logs and errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The reflector's counters.
    pub fn metrics(&self) -> Metrics {
        let c = &self.shared.counters;
        let syncs = c.syncs.load(Ordering::Relaxed);
        Metrics {
            lists: c.lists.load(Ordering::Relaxed),
            relists: syncs.saturating_sub(1),
            watch_lists: c.watch_lists.load(Ordering::Relaxed),
            watches: c.watches.load(Ordering::Relaxed),
            watch_events: c.watch_events.load(Ordering::Relaxed),
            watch_events_by_type: WatchEventCounts {
                added: c.added.load(Ordering::Relaxed),
                modified: c.modified.load(Ordering::Relaxed),
                deleted: c.deleted.load(Ordering::Relaxed),
                bookmark: c.bookmarks.load(Ordering::Relaxed),
                error: c.error_events.load(Ordering::Relaxed),
            },
            relists_by_cause: RelistCauses {
                expired: c.relists_expired.load(Ordering::Relaxed),
                too_large: c.relists_too_large.load(Ordering::Relaxed),
                selection_changed: c.relists_selection_changed.load(Ordering::Relaxed),
                error: c.relists_error.load(Ordering::Relaxed),
            },
            errors: c.errors.load(Ordering::Relaxed),
            panics: c.panics.load(Ordering::Relaxed),
        }
    }

    /// The reflector's health: last error and consecutive failures.
    pub fn health(&self) -> Health {
        self.shared.health.lock().health.clone()
    }

    /// Objects per completed initial sync (LIST or streaming list), in buckets from 0 to
    /// 100 000 objects (the snapshot's `bounds`).
    pub fn list_items(&self) -> HistogramSnapshot {
        self.shared.list_items.snapshot()
    }

    /// Seconds per completed initial sync (LIST with all its pages, or streaming list up to
    /// its end bookmark), until the store was replaced, in client-go's request-latency
    /// buckets (`rest_client_request_duration_seconds`: 5 ms … 60 s).
    /// Failed lists are not observed.
    pub fn list_duration(&self) -> HistogramSnapshot {
        self.shared.list_duration.snapshot()
    }

    /// How long ago the reflector last advanced its resourceVersion (by a watch event, a
    /// bookmark or a sync); `None` before the first sync. A value that keeps growing on a busy
    /// resource means the watch is stuck.
    pub fn since_last_resource_version(&self) -> Option<Duration> {
        self.shared
            .rv
            .lock()
            .advanced_at
            .map(|t| Instant::now().saturating_duration_since(t))
    }

    /// How long ago the last success (sync or watch event) was, if any.
    pub fn since_last_success(&self) -> Option<Duration> {
        self.shared
            .health
            .lock()
            .last_success
            .map(|t| Instant::now().saturating_duration_since(t))
    }
}
