//! Reflector and cache metrics of registered informers, read at scrape time.

mod collector;
mod labels;

pub use labels::ResourceLabels;

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
    /// The labels of its series (default: [`ResourceLabels::parse`] of
    /// [`resource`](Self::resource)).
    fn labels(&self) -> ResourceLabels {
        ResourceLabels::parse(&self.resource())
    }
}

/// An informer exported with labels given explicitly.
struct Labelled {
    inner: Arc<dyn InformerView>,
    labels: ResourceLabels,
}

impl InformerView for Labelled {
    fn resource(&self) -> String {
        self.inner.resource()
    }
    fn has_synced(&self) -> bool {
        self.inner.has_synced()
    }
    fn health(&self) -> Option<Health> {
        self.inner.health()
    }
    fn reflector_metrics(&self) -> Option<kcache::reflector::Metrics> {
        self.inner.reflector_metrics()
    }
    fn objects(&self) -> usize {
        self.inner.objects()
    }
    fn queue_len(&self) -> usize {
        self.inner.queue_len()
    }
    fn reflector(&self) -> Option<ReflectorHandle> {
        self.inner.reflector()
    }
    fn handlers(&self) -> Vec<HandlerRegistration> {
        self.inner.handlers()
    }
    fn memory(&self) -> Option<MemoryUsage> {
        self.inner.memory()
    }
    fn memory_budget(&self) -> Option<usize> {
        self.inner.memory_budget()
    }
    fn labels(&self) -> ResourceLabels {
        self.labels.clone()
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
/// Every family has the labels of [`ResourceLabels`], each present when not empty:
///
/// | label | value |
/// |---|---|
/// | `resource` | the plural resource name (`pods`, `deployments`, `websites`) |
/// | `group` | the API group (`apps`, `demo.kcache.dev`); absent for the core group |
/// | `namespace` | the namespace watched; absent for all namespaces |
/// | `selector` | the label selector; absent for none |
/// | `field_selector` | the field selector; absent for none |
///
/// plus, where the table below says so, `cause`, `type` or `handler`.
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

    /// Exports `informer` (a clone of the handle is kept), labelled from its reflector's
    /// name ([`ResourceLabels::parse`]).
    pub fn register(&self, informer: &(impl InformerView + Clone)) {
        self.informers.lock().push(Arc::new(informer.clone()));
    }

    /// Exports `informer` with `labels` (e.g. [`ResourceLabels::of`]), whatever its
    /// reflector is named.
    ///
    /// ```
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kcache::{SharedIndexInformer, informer, testing::FakeSource};
    /// use kcache_metrics::{InformerMetrics, ResourceLabels};
    /// use prometheus_client::registry::Registry;
    ///
    /// let mut registry = Registry::default();
    /// let informers = InformerMetrics::new(&mut registry);
    /// let deployments = SharedIndexInformer::new(FakeSource::<Deployment>::new(), informer::Config::default());
    /// informers.register_with_labels(&deployments, ResourceLabels::of::<Deployment>(Some("mon"), None));
    /// assert_eq!(informers.informers()[0].labels().group, "apps");
    /// ```
    pub fn register_with_labels(
        &self,
        informer: &(impl InformerView + Clone),
        labels: ResourceLabels,
    ) {
        let inner: Arc<dyn InformerView> = Arc::new(informer.clone());
        self.informers
            .lock()
            .push(Arc::new(Labelled { inner, labels }));
    }

    /// The registered informers.
    pub fn informers(&self) -> Vec<Arc<dyn InformerView>> {
        self.informers.lock().clone()
    }
}
