//! # kcache-metrics
//!
//! Prometheus metrics, health and readiness for kcache, on `prometheus-client` (no
//! hand-written exposition format):
//!
//! - [`WorkqueueMetrics`]: a [`MetricsProvider`](kcache::workqueue::MetricsProvider) for
//!   kcache's work queues under client-go's names and buckets (`workqueue_depth`,
//!   `workqueue_adds_total`, `workqueue_queue_duration_seconds`, …, label `name`), so that
//!   dashboards written for client-go work unchanged
//!   ([`WorkqueueMetrics::with_controller_label`] adds controller-runtime's `controller`
//!   label, for a controller's queue);
//! - [`InformerMetrics`]: the reflector, cache and handlers of each registered informer as
//!   real counters, gauges and histograms labelled by what the informer caches, each part a
//!   label of its own ([`ResourceLabels`]: `resource`, `group`, `namespace`, `selector`,
//!   `field_selector`; e.g.
//!   `kcache_reflector_lists_total{resource="deployments",group="apps",namespace="mon"}`),
//!   relists by cause, watch events by type,
//!   bookmarks, list items and duration, the age of the last resourceVersion, each handler's
//!   buffer depth and maximum, and the bytes an accounted cache holds,
//!   `kcache_informer_cache_bytes`; the full table is on [`InformerMetrics`]);
//! - [`ControllerMetrics`]: controllers' reconcile counters, active workers, reconcile time and
//!   leader-election status under controller-runtime's names
//!   (`controller_runtime_reconcile_total{controller,result}`,
//!   `controller_runtime_active_workers{controller}`,
//!   `controller_runtime_reconcile_time_seconds{controller}`,
//!   `leader_election_master_status{name}`, …);
//! - [`Checks`] and [`serve`]: `/metrics`, `/healthz` and `/readyz` on one small axum server;
//!   readiness is "every registered informer synced, healthy and within its memory budget"
//!   plus any named check the
//!   application adds (a downstream dependency); [`leader_election_check`] is client-go's
//!   leader-election `HealthzAdaptor` for `/healthz`.
//!
//! Counters and histograms live in kcache as atomics (no metrics library there) and are read
//! at scrape time; histograms are kept in fixed buckets (read as [`kcache::HistogramSnapshot`]) and exposed as
//! Prometheus histograms.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Pod;
//! use kcache::{SharedIndexInformer, informer, testing::FakeSource};
//! use kcache::workqueue::{RateLimitingQueue, RateLimitingQueueConfig};
//! use kcache_metrics::{Checks, InformerMetrics, WorkqueueMetrics};
//! use prometheus_client::registry::Registry;
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let mut registry = Registry::default();
//! let queues = Arc::new(WorkqueueMetrics::new(&mut registry));
//! let informers = InformerMetrics::new(&mut registry);
//! let pods = SharedIndexInformer::new(FakeSource::<Pod>::new(), informer::Config::default());
//! informers.register(&pods);
//! let (queue, driver) = RateLimitingQueue::<String>::with_config(
//!     RateLimitingQueueConfig::default().name("pods").metrics_provider(queues),
//! );
//! # drop((queue, driver));
//! let checks = Checks::new().with_informers(informers.clone());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
//! kcache_metrics::serve(listener, Arc::new(registry), checks, CancellationToken::new()).await
//! # }
//! ```
#![doc(test(attr(deny(warnings))))]

mod checks;
mod controller;
mod encode;
mod informer;
mod server;
mod workqueue;

pub use checks::{Check, Checks, leader_election_check};
pub use controller::ControllerMetrics;
pub use informer::{InformerMetrics, InformerView, ResourceLabels};
pub use server::{router, serve};
pub use workqueue::WorkqueueMetrics;
