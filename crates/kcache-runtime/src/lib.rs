//! # kcache-runtime
//!
//! A controller runtime on kcache, in controller-runtime's shape: one [`Manager`] owns the
//! client, the shared informers, the controllers, leader election with warm standby, one
//! Prometheus registry with the `/metrics` `/healthz` `/readyz` server, signals and a
//! graceful shutdown; controllers are declared with [`Manager::controller`]
//! (`owns`, `watches`, event [`filter`]s, policies) and given a reconcile function that gets
//! the object and a [`Context`] (the client for writes, an Events recorder, the listers of
//! the cached types, and the write helpers: [`Context::finalizer`],
//! [`Context::apply_owned`], [`Context::patch_status`]).
//!
//! Everything underneath is kcache's: [`kcache::controller::Controller`] (queue, workers,
//! policies, priority queue, warm standby), [`kcache::SharedInformerFactory`],
//! [`kcache::leaderelection::LeaderElector`] on a Lease, `kcache-metrics` for every family
//! and the probes, `kcache-client` for HTTP and Events.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
//! use kcache_runtime::{Action, Context, FinalizerEvent, Manager, api, filter, manager};
//!
//! async fn reconcile(_app: Arc<ConfigMap>, ctx: Context<ConfigMap>) -> Result<Action, api::Error> {
//!     // `async`, not `async move`: the closure borrows `ctx` while `finalizer` runs it.
//!     ctx.finalizer("example.com/cleanup", |event| async {
//!         match event {
//!             FinalizerEvent::Apply(_app) => {
//!                 // Read owned objects from the cache; write through the context.
//!                 if ctx.get::<Deployment>("web").is_none() {
//!                     let mut web = Deployment::default();
//!                     web.metadata.name = Some("web".into());
//!                     ctx.apply_owned(web).await?;
//!                 }
//!                 Ok(Action::Done)
//!             }
//!             FinalizerEvent::Cleanup(_app) => Ok(Action::Done),
//!         }
//!     })
//!     .await
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kcache_client::Client::infer().await?;
//! let config = manager::Config::new("example-operator")
//!     .namespace("apps")
//!     .leader_election(manager::LeaderElection::new("example-operator"))
//!     .metrics_addr("0.0.0.0:8080".parse()?);
//! let manager = Manager::new(client, config)?;
//! manager
//!     .controller::<ConfigMap>()
//!     .owns::<Deployment>()
//!     .with_event_filter(filter::labels_changed)
//!     .build(reconcile)?;
//! manager.run().await?; // until SIGTERM / SIGINT, then a graceful shutdown
//! # Ok(()) }
//! ```
//!
//! # Caches
//!
//! The manager keeps one shared informer per type, in its namespace (or one per namespace of
//! a set: [`manager::Config::namespaces`], [`manager::Cache::namespaces`], controller-runtime's
//! `DefaultNamespaces`; reads merge them, controllers watch each), storing each object
//! lean ([`manager::Storage::Lean`]: its wire bytes plus its parsed metadata, several times
//! smaller than the decoded object); reconciles read typed objects all the same
//! ([`Context::get`], [`Context::lister`], [`Context::read`] decode on read). Declare a type's
//! cache with [`Manager::cache`] before a controller uses it to narrow it
//! ([`manager::Cache`]: label and field selectors, a namespace or namespaces of its own,
//! typed storage, managed-fields stripping, a transform, memory accounting, indexes read with
//! [`manager::Cached::index_keys`] and [`manager::Cached::by_index`]);
//! [`manager::Config`] sets the defaults of every type (namespace or namespaces, label and
//! field selectors, storage).
//! [`Context::read`] reports a miss as an error naming the cache's namespace and selectors.
//! [`Manager::metadata_cache`] caches only the metadata of a type
//! (`PartialObjectMeta<C>`).
//!
//! # Helpers
//!
//! [`Context::apply_owned`] says whether it created, updated or left the object unchanged
//! ([`api::Applied`]); [`conditions`] sets status conditions with Kubernetes' rules;
//! [`Context::finalizer`] removes its finalizer from the newest version the controller
//! knows, so a cleanup may write the object it finalizes. The field manager and the Events'
//! reporter are `MANAGER/CONTROLLER` unless [`manager::Config::field_manager`],
//! [`manager::Config::event_reporter`] or the controller's own say otherwise.
//!
//! # Read-your-own-writes
//!
//! A controller reads from caches that follow the API server a little behind. Without care,
//! a reconcile that runs right after its own write (a requeue, an event of another type)
//! reads the cache from before that write: it creates the Deployment again, or publishes
//! "Created" twice. Here every write through a reconcile's [`Context`] (create, apply,
//! patch, status, update, delete, the finalizer's patches) records what the cache must
//! show for that key: the object at a resourceVersion at least as new as the write's, or
//! its absence after a delete (client-go's expectations, for every write). The next
//! reconcile of the key first waits until its caches show all of them, for at most
//! [`manager::Config::cache_wait_timeout`]; it then reads its own writes. If they do not
//! show in time the reconcile is not run on the stale cache: the key is retried with the
//! queue's backoff. A write never shown is dropped after
//! [`manager::Config::expectations_ttl`]. The waits are in the metrics
//! (`kcache_controller_cache_wait*`, `kcache_controller_pending_writes`).
//!
//! Writes are tracked per reconciled key, and only for types the manager caches in the
//! namespace written to. Writes sent with the raw kube client ([`Context::kube`]) are not.
//!
//! # Metrics
//!
//! The manager registers every family below in its one registry and serves it on
//! `/metrics` ([`manager::Config::metrics_addr`]). Informer families carry the labels of
//! [`kcache_metrics::ResourceLabels`]: `resource`, `group`, `namespace`, `selector`,
//! `field_selector`, each present when not empty.
//!
//! | family | type | labels | what |
//! |---|---|---|---|
//! | `workqueue_depth` | gauge | `name`, `controller` | keys waiting in a controller's queue |
//! | `workqueue_adds_total` | counter | `name`, `controller` | keys queued |
//! | `workqueue_queue_duration_seconds` | histogram | `name`, `controller` | seconds a key waited for a worker |
//! | `workqueue_work_duration_seconds` | histogram | `name`, `controller` | seconds a worker held a key |
//! | `workqueue_retries_total` | counter | `name`, `controller` | keys queued again after a delay or a rate limit |
//! | `workqueue_unfinished_work_seconds` | gauge | `name`, `controller` | seconds of work in flight |
//! | `workqueue_longest_running_processor_seconds` | gauge | `name`, `controller` | age of the oldest key in flight |
//! | `controller_runtime_reconcile_total` | counter | `controller`, `result` | reconciles, `success` or `error` |
//! | `controller_runtime_reconcile_errors_total` | counter | `controller` | failed reconciles |
//! | `controller_runtime_terminal_reconcile_errors_total` | counter | `controller` | terminal errors (never retried) |
//! | `controller_runtime_reconcile_panics_total` | counter | `controller` | reconciles that panicked |
//! | `controller_runtime_reconcile_time_seconds` | histogram | `controller` | seconds per reconcile (the cache wait included) |
//! | `controller_runtime_max_concurrent_reconciles` | gauge | `controller` | workers |
//! | `controller_runtime_active_workers` | gauge | `controller` | workers inside a reconcile |
//! | `kcache_controller_retries_total` | counter | `controller` | failed keys queued again |
//! | `kcache_controller_gave_up_total` | counter | `controller` | keys given up |
//! | `kcache_controller_timeouts_total` | counter | `controller` | reconciles cancelled by the reconcile timeout |
//! | `kcache_controller_writes_total` | counter | `controller`, `verb`, `resource` | writes through the context (`create`, `apply`, `patch`, `patch_status`, `update`, `delete`) |
//! | `kcache_controller_cache_waits_total` | counter | `controller` | reconciles that waited for the caches to show their earlier writes |
//! | `kcache_controller_cache_wait_seconds` | histogram | `controller` | seconds waited (0.5 ms … 30 s) |
//! | `kcache_controller_cache_wait_timeouts_total` | counter | `controller` | reconciles not run: the caches were behind (retried) |
//! | `kcache_controller_expectations_expired_total` | counter | `controller` | writes never shown, no longer waited for |
//! | `kcache_controller_pending_writes` | gauge | `controller` | writes not shown yet |
//! | `leader_election_master_status` | gauge | `name` (the Lease) | 1 while this replica leads |
//! | `kcache_reflector_lists_total` | counter | resource labels | completed LISTs |
//! | `kcache_reflector_relists_total` | counter | resource labels, `cause` | relists by cause |
//! | `kcache_reflector_watch_lists_total` | counter | resource labels | completed streaming lists |
//! | `kcache_reflector_watches_total` | counter | resource labels | watches opened |
//! | `kcache_reflector_watch_events_total` | counter | resource labels, `type` | watch events by type |
//! | `kcache_reflector_bookmarks_total` | counter | resource labels | bookmarks |
//! | `kcache_reflector_errors_total` | counter | resource labels | errors recovered from |
//! | `kcache_reflector_panics_total` | counter | resource labels | panics caught |
//! | `kcache_reflector_consecutive_failures` | gauge | resource labels | failures since the last success |
//! | `kcache_reflector_last_resource_version_age_seconds` | gauge | resource labels | seconds since the resourceVersion last advanced |
//! | `kcache_reflector_list_items` | histogram | resource labels | objects per initial sync |
//! | `kcache_reflector_list_duration_seconds` | histogram | resource labels | seconds per initial sync |
//! | `kcache_informer_synced` | gauge | resource labels | 1 once synced |
//! | `kcache_informer_objects` | gauge | resource labels | objects cached |
//! | `kcache_informer_queue_length` | gauge | resource labels | deltas waiting in the informer |
//! | `kcache_informer_cache_bytes`, `kcache_informer_cache_budget_bytes` | gauge | resource labels | for informers whose memory is accounted (none by default) |
//! | `kcache_informer_handler_buffer_depth`, `kcache_informer_handler_buffer_max_depth` | gauge | resource labels, `handler` | each handler's buffer |
//!
//! Readiness (`/readyz`) is "every informer synced and healthy" plus
//! [`Manager::add_readiness_check`]s; liveness (`/healthz`, `/livez`) is the leader
//! election's check (client-go's `HealthzAdaptor`, 20 s tolerance) plus
//! [`Manager::add_liveness_check`]s.
#![doc(test(attr(deny(warnings))))]

pub mod api;
pub mod conditions;
mod controller;
mod expectations;
pub mod manager;
mod metrics;

use std::fmt::Debug;

use kube_core::Resource;
use serde::{Serialize, de::DeserializeOwned};

pub use api::{FinalizerEvent, TrackedApi};
pub use controller::{Context, ControllerBuilder, filter};
pub use kcache::{
    controller::{Action, ErrorAction},
    store::ObjectKey,
};
pub use kcache_client::events::{Event, EventType};
pub use manager::Manager;

/// A typed Kubernetes object the manager caches and writes: a k8s-openapi type or a kube
/// `CustomResource`. Implemented for every type with these bounds.
pub trait ApiObject:
    Resource<DynamicType = (), Scope: 'static>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
}

impl<T> ApiObject for T where
    T: Resource<DynamicType = (), Scope: 'static>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

#[cfg(test)]
mod send_sync {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<Manager>();
        assert_send_sync::<Context<ConfigMap>>();
        assert_send_sync::<TrackedApi<ConfigMap>>();
        // A builder moves between threads; it is not shared.
        assert_send::<ControllerBuilder<'_, ConfigMap>>();
        assert_send_sync::<api::Error>();
        assert_send_sync::<manager::Error>();
        assert_send_sync::<manager::Config>();
    }
}
