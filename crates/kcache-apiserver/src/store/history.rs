//! The per-type event history: what a watch replays and fans out, the window it is kept in
//! ([`HistoryConfig`]) and its expiry (compaction).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Store, StoreError, Table};
use crate::object::StoredObject;
use crate::resource::ResourceId;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventType {
    /// The watch event type string.
    #[must_use]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change in the history of a resource type.
#[derive(Debug, Clone)]
pub(crate) struct StoreEvent {
    /// resourceVersion of the change.
    pub(crate) rv: u64,
    /// What happened.
    pub(crate) kind: EventType,
    /// Storage key (`ns/name` or `name`).
    pub(crate) key: String,
    /// The new state; for `Deleted`, the last state stamped with the deletion RV.
    pub(crate) object: Arc<StoredObject>,
    /// The state before the change (`None` for `Added`).
    pub(crate) prev: Option<Arc<StoredObject>>,
    /// When it happened (for the age limit of the window).
    pub(super) at: Instant,
    /// The JSON watch line, rendered once and shared by every watcher.
    pub(super) line: std::sync::OnceLock<bytes::Bytes>,
}

impl StoreEvent {
    /// The event's JSON watch line (`{"type":..,"object":..}\n`), rendered on first use.
    pub(crate) fn json_line(&self, render: impl FnOnce() -> bytes::Bytes) -> bytes::Bytes {
        self.line.get_or_init(render).clone()
    }
}

/// How much history to keep per resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryConfig {
    /// Keep at most this many events per resource type.
    pub max_events: usize,
    /// Drop events older than this (checked on writes and by the server's maintenance tick).
    pub max_age: Option<Duration>,
}

impl Default for HistoryConfig {
    /// 10,000 events per resource type, no age limit.
    fn default() -> Self {
        Self {
            max_events: 10_000,
            max_age: None,
        }
    }
}

impl Table {
    /// Drops the events beyond the window; the newest dropped RV becomes the compaction point.
    pub(super) fn trim(&mut self, cfg: &HistoryConfig, now: Instant) {
        while self.log.len() > cfg.max_events
            || cfg.max_age.is_some_and(|age| {
                self.log
                    .front()
                    .is_some_and(|e| now.saturating_duration_since(e.at) > age)
            })
        {
            if let Some(e) = self.log.pop_front() {
                self.compacted = self.compacted.max(e.rv);
            }
        }
    }
}

impl Store {
    /// Up to `max` events of `id` with an RV greater than `after`.
    ///
    /// # Errors
    /// [`StoreError::TooOld`] when events after `after` were already dropped.
    pub(crate) fn events_since(
        &self,
        id: &ResourceId,
        after: u64,
        max: usize,
    ) -> Result<Vec<Arc<StoreEvent>>, StoreError> {
        let inner = self.inner.read();
        let Some(table) = inner.tables.get(id) else {
            if after < inner.floor {
                return Err(StoreError::TooOld {
                    requested: after,
                    oldest: inner.floor,
                });
            }
            return Ok(Vec::new());
        };
        if after < table.compacted {
            return Err(StoreError::TooOld {
                requested: after,
                oldest: table.compacted,
            });
        }
        let start = table.log.partition_point(|e| e.rv <= after);
        Ok(table.log.range(start..).take(max).cloned().collect())
    }

    /// Drops all history: every RV before the current one becomes expired.
    pub(crate) fn compact_now(&self) {
        let mut inner = self.inner.write();
        let rv = inner.rv;
        inner.floor = rv;
        for t in inner.tables.values_mut() {
            t.log.clear();
            t.compacted = rv;
        }
    }

    /// Applies the age limit of the history window (called periodically by the server).
    pub(crate) fn maintain(&self) {
        if self.history.max_age.is_none() {
            return;
        }
        let now = Instant::now();
        let mut inner = self.inner.write();
        for t in inner.tables.values_mut() {
            t.trim(&self.history, now);
        }
    }
}
