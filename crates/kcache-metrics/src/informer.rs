//! Reflector and cache metrics of registered informers, read at scrape time.

use std::sync::Arc;

use kcache::{SharedIndexInformer, reflector::Health};
use kube_core::Resource;
use parking_lot::Mutex;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};

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
}

/// The informers whose reflector and cache are exported, as a collector registered in a
/// [`Registry`]. Cheap to clone; clones share the list.
///
/// Families (label `resource`, the reflector's name): `kcache_reflector_lists_total`,
/// `kcache_reflector_relists_total`, `kcache_reflector_watch_lists_total`,
/// `kcache_reflector_watches_total`, `kcache_reflector_watch_events_total`,
/// `kcache_reflector_errors_total`, `kcache_reflector_panics_total`,
/// `kcache_reflector_consecutive_failures`, `kcache_informer_synced` (0/1),
/// `kcache_informer_objects`, `kcache_informer_queue_length`.
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

type Labels = [(&'static str, String); 1];

/// A counter family: name, help, how to read it from the reflector's counters.
type CounterRow = (
    &'static str,
    &'static str,
    fn(&kcache::reflector::Metrics) -> u64,
);

fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: &[(Labels, u64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        ConstCounter::new(*v).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: &[(Labels, i64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        ConstGauge::new(*v).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

impl Collector for InformerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let informers = self.informers();
        let rows: Vec<_> = informers
            .iter()
            .filter_map(|i| {
                let m = i.reflector_metrics()?;
                let h = i.health().unwrap_or_default();
                Some(([("resource", i.resource())], m, h, i))
            })
            .collect();
        let counters: [CounterRow; 7] = [
            (
                "kcache_reflector_lists",
                "Completed LISTs (each possibly several pages)",
                |m| m.lists,
            ),
            (
                "kcache_reflector_relists",
                "Initial syncs after the first one (relists)",
                |m| m.relists,
            ),
            (
                "kcache_reflector_watch_lists",
                "Completed streaming initial lists",
                |m| m.watch_lists,
            ),
            ("kcache_reflector_watches", "Watches opened", |m| m.watches),
            (
                "kcache_reflector_watch_events",
                "Watch events received",
                |m| m.watch_events,
            ),
            (
                "kcache_reflector_errors",
                "Errors the reflector recovered from",
                |m| m.errors,
            ),
            (
                "kcache_reflector_panics",
                "Panics caught inside the reflector",
                |m| m.panics,
            ),
        ];
        for (name, help, get) in counters {
            let values: Vec<_> = rows
                .iter()
                .map(|(l, m, _, _)| (l.clone(), get(m)))
                .collect();
            counter(&mut encoder, name, help, &values)?;
        }
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let failures: Vec<_> = rows
            .iter()
            .map(|(l, _, h, _)| (l.clone(), i64::from(h.consecutive_failures)))
            .collect();
        gauge(
            &mut encoder,
            "kcache_reflector_consecutive_failures",
            "Failures since the reflector's last success",
            &failures,
        )?;
        let synced: Vec<_> = rows
            .iter()
            .map(|(l, _, _, i)| (l.clone(), i64::from(i.has_synced())))
            .collect();
        gauge(
            &mut encoder,
            "kcache_informer_synced",
            "1 once the initial list is applied",
            &synced,
        )?;
        let objects: Vec<_> = rows
            .iter()
            .map(|(l, _, _, i)| (l.clone(), as_i64(i.objects())))
            .collect();
        gauge(
            &mut encoder,
            "kcache_informer_objects",
            "Objects in the informer's cache",
            &objects,
        )?;
        let queued: Vec<_> = rows
            .iter()
            .map(|(l, _, _, i)| (l.clone(), as_i64(i.queue_len())))
            .collect();
        gauge(
            &mut encoder,
            "kcache_informer_queue_length",
            "Entries waiting in the informer's queue",
            &queued,
        )
    }
}
