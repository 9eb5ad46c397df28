//! What a running reflector shares with its readers: resourceVersions, counters, health.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use parking_lot::Mutex;
use tokio::time::Instant;

/// Counters a reflector keeps; read them with [`ReflectorHandle::metrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Completed LISTs (each possibly several pages).
    pub lists: u64,
    /// Completed initial syncs after the first one (by LIST or streaming list).
    pub relists: u64,
    /// Completed streaming initial lists.
    pub watch_lists: u64,
    /// Watches opened.
    pub watches: u64,
    /// Watch events received (all types).
    pub watch_events: u64,
    /// Errors passed to the watch error handler.
    pub errors: u64,
    /// Panics caught inside the reflector (each also counted in `errors`).
    pub panics: u64,
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
    pub(crate) errors: AtomicU64,
    pub(crate) panics: AtomicU64,
}

#[derive(Default)]
pub(crate) struct RvState {
    pub(crate) last_sync: String,
    /// The last RV is unusable (410 Expired / too large): the next list is at `""`.
    pub(crate) unavailable: bool,
}

#[derive(Default)]
struct HealthState {
    health: Health,
    last_success: Option<Instant>,
}

/// State shared between the reflector task and its handles.
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) rv: Mutex<RvState>,
    pub(crate) paginated_result: AtomicBool,
    pub(crate) counters: Counters,
    health: Mutex<HealthState>,
}

impl Shared {
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
            errors: c.errors.load(Ordering::Relaxed),
            panics: c.panics.load(Ordering::Relaxed),
        }
    }

    /// The reflector's health: last error and consecutive failures.
    pub fn health(&self) -> Health {
        self.shared.health.lock().health.clone()
    }

    /// How long ago the last success (sync or watch event) was, if any.
    pub fn since_last_success(&self) -> Option<std::time::Duration> {
        self.shared
            .health
            .lock()
            .last_success
            .map(|t| Instant::now().saturating_duration_since(t))
    }
}
