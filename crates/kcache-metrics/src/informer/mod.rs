//! Reflector and cache metrics of registered informers, read at scrape time.

mod collector;

use std::sync::Arc;

use kcache::{
    HandlerRegistration, SharedIndexInformer,
    memory::MemoryUsage,
    reflector::{Health, ReflectorHandle},
};
use kube_core::Resource;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;

/// What [`InformerMetrics`] and [`Checks`](crate::Checks) read of an informer; implemented for
/// every [`SharedIndexInformer`].
pub trait InformerView: Send + Sync + 'static {
    /// The reflector's name (`pods`, `deployments.apps in namespace ns`, …); empty before the
    /// informer runs.
    fn resource(&self) -> String;
    /// Whether the initial list has been applied.
    fn has_synced(&self) -> bool;
    /// The reflector's health; `None` before the informer runs.
    fn health(&self) -> Option<Health>;
    /// The reflector's counters; `None` before the informer runs.
    fn reflector_metrics(&self) -> Option<kcache::reflector::Metrics>;
    /// Objects in the cache.
    fn objects(&self) -> usize;
    /// Entries waiting in the informer's queue.
    fn queue_len(&self) -> usize;
    /// The running reflector, for its histograms and resourceVersion age; `None` before the
    /// informer runs (the default for other implementations: those families are then left
    /// out).
    fn reflector(&self) -> Option<ReflectorHandle> {
        None
    }
    /// The handlers registered now, for their buffer depths (default: none).
    fn handlers(&self) -> Vec<HandlerRegistration> {
        Vec::new()
    }
    /// What the cache holds when its memory is accounted (default: not accounted).
    fn memory(&self) -> Option<MemoryUsage> {
        None
    }
    /// The cache's memory budget in bytes (default: none).
    fn memory_budget(&self) -> Option<usize> {
        None
    }
}

impl<K> InformerView for SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    fn resource(&self) -> String {
        self.reflector()
            .map(|r| r.name().to_owned())
            .unwrap_or_default()
    }
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
    fn health(&self) -> Option<Health> {
        SharedIndexInformer::health(self)
    }
    fn reflector_metrics(&self) -> Option<kcache::reflector::Metrics> {
        SharedIndexInformer::reflector_metrics(self)
    }
    fn objects(&self) -> usize {
        self.indexer().len()
    }
    fn queue_len(&self) -> usize {
        SharedIndexInformer::queue_len(self)
    }
    fn reflector(&self) -> Option<ReflectorHandle> {
        SharedIndexInformer::reflector(self)
    }
    fn handlers(&self) -> Vec<HandlerRegistration> {
        SharedIndexInformer::handlers(self)
    }
    fn memory(&self) -> Option<MemoryUsage> {
        SharedIndexInformer::memory(self)
    }
    fn memory_budget(&self) -> Option<usize> {
        SharedIndexInformer::memory_budget(self)
    }
}

/// The informers whose reflector, cache and handlers are exported, as a collector registered
/// in a [`Registry`]. Cheap to clone; clones share the list.
///
/// Every family has the label `resource` (the reflector's name, e.g. `pods`):
///
/// | family | type | what |
/// |---|---|---|
/// | `kcache_reflector_lists_total` | counter | completed LISTs (each possibly several pages) |
/// | `kcache_reflector_relists_total{cause}` | counter | initial syncs after the first, by cause: `expired` (410), `too_large` (504 too-large resourceVersion), `selection_changed` (sharding), `error` (anything else) |
/// | `kcache_reflector_watch_lists_total` | counter | completed streaming initial lists |
/// | `kcache_reflector_watches_total` | counter | watches opened |
/// | `kcache_reflector_watch_events_total{type}` | counter | watch events by type: `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR` |
/// | `kcache_reflector_bookmarks_total` | counter | `BOOKMARK` events (the same count as `watch_events_total{type="BOOKMARK"}`) |
/// | `kcache_reflector_errors_total` | counter | errors the reflector recovered from |
/// | `kcache_reflector_panics_total` | counter | panics caught inside the reflector |
/// | `kcache_reflector_consecutive_failures` | gauge | failures since the last success |
/// | `kcache_reflector_last_resource_version_age_seconds` | gauge | seconds since the reflector last advanced its resourceVersion (event, bookmark or list); absent before the first sync |
/// | `kcache_reflector_list_items` | histogram | objects per completed initial sync (LIST or streaming list) |
/// | `kcache_reflector_list_duration_seconds` | histogram | seconds per completed initial sync, in client-go's request-latency buckets (5 ms … 60 s) |
/// | `kcache_informer_synced` | gauge | 1 once the initial list is applied |
/// | `kcache_informer_objects` | gauge | objects in the cache |
/// | `kcache_informer_queue_length` | gauge | entries waiting in the informer's queue |
/// | `kcache_informer_cache_bytes` | gauge | bytes the cache holds, for an informer whose memory is accounted (`SharedIndexInformer::account_memory`; see `kcache::memory` for what is counted) |
/// | `kcache_informer_cache_budget_bytes` | gauge | the cache's memory budget, for an accounted informer that has one |
/// | `kcache_informer_handler_buffer_depth{handler}` | gauge | notifications waiting in a handler's buffer ([`HandlerRegistration::pending`]; the batch the handler is working through is not counted) |
/// | `kcache_informer_handler_buffer_max_depth{handler}` | gauge | the deepest that handler's buffer has been ([`HandlerRegistration::max_pending`]) |
///
/// `handler` is the registration's name ([`HandlerRegistration::name`]: set with
/// `informer::HandlerConfig::name`, else `handler-N`; a controller's is `controller NAME`).
///
/// The `cause` and `type` labels were added to the existing `relists_total` and
/// `watch_events_total` families rather than to new families: nothing has been released yet,
/// every series of a family is always present (zero included), and summing over the new
/// label (`sum without (cause) (…)`) gives the former series.
#[derive(Clone, Default)]
pub struct InformerMetrics {
    informers: Arc<Mutex<Vec<Arc<dyn InformerView>>>>,
}

impl std::fmt::Debug for InformerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerMetrics")
            .field("informers", &self.informers.lock().len())
            .finish()
    }
}

impl InformerMetrics {
    /// Registers the collector in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register_collector(Box::new(m.clone()));
        m
    }

    /// Exports `informer` (a clone of the handle is kept).
    pub fn register(&self, informer: &(impl InformerView + Clone)) {
        self.informers.lock().push(Arc::new(informer.clone()));
    }

    /// The registered informers.
    pub fn informers(&self) -> Vec<Arc<dyn InformerView>> {
        self.informers.lock().clone()
    }
}
