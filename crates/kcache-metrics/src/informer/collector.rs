//! [`InformerMetrics`] as a prometheus-client collector: every family is read from the
//! informers' atomics at scrape time.

use std::sync::Arc;

use kcache::reflector::{Health, Metrics};
use prometheus_client::{
    collector::Collector,
    encoding::DescriptorEncoder,
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
};

use super::{InformerMetrics, InformerView};
use crate::encode::{ConstHistogram, Labels, family};

/// A counter family: name (without `_total`), help, how to read it from the reflector's
/// counters.
type CounterRow = (&'static str, &'static str, fn(&Metrics) -> u64);

/// One running informer at scrape time.
struct Row {
    labels: Labels,
    metrics: Metrics,
    health: Health,
    informer: Arc<dyn InformerView>,
}

impl Row {
    fn labels(&self) -> Labels {
        self.labels.clone()
    }

    fn with(&self, key: &'static str, value: &str) -> Labels {
        let mut labels = self.labels.clone();
        labels.push((key, value.to_owned()));
        labels
    }
}

fn as_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

const COUNTERS: [CounterRow; 6] = [
    (
        "kcache_reflector_lists",
        "Completed LISTs (each possibly several pages)",
        |m| m.lists,
    ),
    (
        "kcache_reflector_watch_lists",
        "Completed streaming initial lists",
        |m| m.watch_lists,
    ),
    ("kcache_reflector_watches", "Watches opened", |m| m.watches),
    (
        "kcache_reflector_bookmarks",
        "BOOKMARK events received",
        |m| m.watch_events_by_type.bookmark,
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

impl Collector for InformerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let rows: Vec<Row> = self
            .informers()
            .into_iter()
            .filter_map(|informer| {
                Some(Row {
                    labels: informer.labels().to_labels(),
                    metrics: informer.reflector_metrics()?,
                    health: informer.health().unwrap_or_default(),
                    informer,
                })
            })
            .collect();
        let e = &mut encoder;
        for (name, help, get) in COUNTERS {
            let values = rows
                .iter()
                .map(|r| (r.labels(), ConstCounter::new(get(&r.metrics))))
                .collect();
            family(e, name, help, MetricType::Counter, values)?;
        }
        relists_and_events(e, &rows)?;
        reflector_gauges_and_histograms(e, &rows)?;
        informer_gauges(e, &rows)?;
        handler_gauges(e, &rows)
    }
}

fn relists_and_events(e: &mut DescriptorEncoder<'_>, rows: &[Row]) -> Result<(), std::fmt::Error> {
    let mut relists = Vec::new();
    let mut events = Vec::new();
    for r in rows {
        let c = r.metrics.relists_by_cause;
        for (cause, n) in [
            ("expired", c.expired),
            ("too_large", c.too_large),
            ("selection_changed", c.selection_changed),
            ("error", c.error),
        ] {
            relists.push((r.with("cause", cause), ConstCounter::new(n)));
        }
        let t = r.metrics.watch_events_by_type;
        for (kind, n) in [
            ("ADDED", t.added),
            ("MODIFIED", t.modified),
            ("DELETED", t.deleted),
            ("BOOKMARK", t.bookmark),
            ("ERROR", t.error),
        ] {
            events.push((r.with("type", kind), ConstCounter::new(n)));
        }
    }
    family(
        e,
        "kcache_reflector_relists",
        "Initial syncs after the first one (relists), by cause",
        MetricType::Counter,
        relists,
    )?;
    family(
        e,
        "kcache_reflector_watch_events",
        "Watch events received, by type",
        MetricType::Counter,
        events,
    )
}

fn reflector_gauges_and_histograms(
    e: &mut DescriptorEncoder<'_>,
    rows: &[Row],
) -> Result<(), std::fmt::Error> {
    let failures = rows
        .iter()
        .map(|r| {
            (
                r.labels(),
                ConstGauge::new(i64::from(r.health.consecutive_failures)),
            )
        })
        .collect();
    family(
        e,
        "kcache_reflector_consecutive_failures",
        "Failures since the reflector's last success",
        MetricType::Gauge,
        failures,
    )?;
    let handles: Vec<_> = rows
        .iter()
        .filter_map(|r| Some((r.labels(), r.informer.reflector()?)))
        .collect();
    let age = handles
        .iter()
        .filter_map(|(l, h)| {
            let age = h.since_last_resource_version()?;
            Some((l.clone(), ConstGauge::new(age.as_secs_f64())))
        })
        .collect();
    family(
        e,
        "kcache_reflector_last_resource_version_age_seconds",
        "Seconds since the reflector last advanced its resourceVersion (event, bookmark or list)",
        MetricType::Gauge,
        age,
    )?;
    let items = handles
        .iter()
        .map(|(l, h)| (l.clone(), ConstHistogram(h.list_items())))
        .collect();
    family(
        e,
        "kcache_reflector_list_items",
        "Objects per completed initial sync (LIST or streaming list)",
        MetricType::Histogram,
        items,
    )?;
    let durations = handles
        .iter()
        .map(|(l, h)| (l.clone(), ConstHistogram(h.list_duration())))
        .collect();
    family(
        e,
        "kcache_reflector_list_duration_seconds",
        "Seconds per completed initial sync (LIST with all its pages, or streaming list)",
        MetricType::Histogram,
        durations,
    )
}

fn informer_gauges(e: &mut DescriptorEncoder<'_>, rows: &[Row]) -> Result<(), std::fmt::Error> {
    type GaugeRow = (&'static str, &'static str, fn(&dyn InformerView) -> i64);
    let gauges: [GaugeRow; 3] = [
        (
            "kcache_informer_synced",
            "1 once the initial list is applied",
            |i| i64::from(i.has_synced()),
        ),
        (
            "kcache_informer_objects",
            "Objects in the informer's cache",
            |i| as_i64(i.objects()),
        ),
        (
            "kcache_informer_queue_length",
            "Entries waiting in the informer's queue",
            |i| as_i64(i.queue_len()),
        ),
    ];
    for (name, help, get) in gauges {
        let values = rows
            .iter()
            .map(|r| (r.labels(), ConstGauge::new(get(&*r.informer))))
            .collect();
        family(e, name, help, MetricType::Gauge, values)?;
    }
    let accounted: Vec<_> = rows
        .iter()
        .filter_map(|r| Some((r, r.informer.memory()?)))
        .collect();
    let bytes = accounted
        .iter()
        .map(|(r, m)| (r.labels(), ConstGauge::new(as_i64(m.bytes))))
        .collect();
    family(
        e,
        "kcache_informer_cache_bytes",
        "Bytes the informer's cache holds (estimated, kept up to date incrementally)",
        MetricType::Gauge,
        bytes,
    )?;
    let budgets = accounted
        .iter()
        .filter_map(|(r, _)| {
            Some((
                r.labels(),
                ConstGauge::new(as_i64(r.informer.memory_budget()?)),
            ))
        })
        .collect();
    family(
        e,
        "kcache_informer_cache_budget_bytes",
        "The informer cache's memory budget in bytes",
        MetricType::Gauge,
        budgets,
    )
}

fn handler_gauges(e: &mut DescriptorEncoder<'_>, rows: &[Row]) -> Result<(), std::fmt::Error> {
    let mut depth = Vec::new();
    let mut max = Vec::new();
    for r in rows {
        for h in r.informer.handlers() {
            let labels = r.with("handler", h.name());
            depth.push((labels.clone(), ConstGauge::new(as_i64(h.pending()))));
            max.push((labels, ConstGauge::new(as_i64(h.max_pending()))));
        }
    }
    family(
        e,
        "kcache_informer_handler_buffer_depth",
        "Notifications waiting in a handler's buffer",
        MetricType::Gauge,
        depth,
    )?;
    family(
        e,
        "kcache_informer_handler_buffer_max_depth",
        "The largest depth a handler's buffer has reached",
        MetricType::Gauge,
        max,
    )
}
