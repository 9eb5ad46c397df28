//! The garbage collector, as kube-controller-manager's runs it over `metadata.ownerReferences`:
//!
//! - an object whose owners are all gone (not found, or found with another uid) is deleted
//!   (background propagation; a dangling reference counts as gone), with the propagation
//!   its own GC finalizers ask for;
//! - an owner deleted in the foreground (`foregroundDeletion` finalizer, set by a DELETE with
//!   `propagationPolicy: Foreground`) has its dependents deleted; the finalizer is removed,
//!   and so the owner deleted, once no dependent with `blockOwnerDeletion: true` remains;
//! - an owner deleted with `propagationPolicy: Orphan` (the `orphan` finalizer) has the
//!   references to it removed from its dependents, then the finalizer;
//! - a dependent that also has a live owner only loses the references to gone owners (and to
//!   owners being deleted in the foreground);
//! - references resolve by `apiVersion` + `kind` to a served resource; a namespaced owner is
//!   looked up in the dependent's namespace, a cluster-scoped one without. An unknown kind, or a
//!   cluster-scoped dependent naming a namespaced kind, makes the dependent uncollectable (it is
//!   left alone, as kube-controller-manager reports `OwnerRefInvalidNamespace` and waits).
//!
//! It runs on a task woken by the writes that can matter (the registry's
//! [`Trigger`](crate::registry::Trigger)) (a deletion, an object written with
//! owner references or a deletionTimestamp) and every few seconds, until nothing changes.
//! [`ServerConfig::garbage_collector`](crate::ServerConfig::garbage_collector) turns it off; the
//! apiserver side (the finalizers a DELETE adds, see `registry/propagation.rs`) stays, as on
//! a bare kube-apiserver.

mod pass;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::registry::AppState;

/// How often the collector also runs without being woken (it catches owners removed by paths
/// that do not wake it, such as a CustomResourceDefinition's deletion).
const PERIOD: Duration = Duration::from_secs(5);
/// The pause between two passes of one cascade.
const SETTLE: Duration = Duration::from_millis(5);
/// The pause after the passes of a wake-up, so that a stream of deletions (churn benchmarks)
/// costs at most a pass per interval, not one per write: a pass reads every object's bytes.
const IDLE: Duration = Duration::from_millis(50);
/// Passes run back to back at most this many times per wake-up (a long cascade continues at
/// the next one).
const MAX_PASSES: usize = 64;

/// Runs the collector until `stop` is cancelled.
pub(crate) async fn run(state: Arc<AppState>, stop: CancellationToken) {
    let mut last_rv = 0;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = state.gc.notified() => {}
            () = tokio::time::sleep(PERIOD) => {
                if state.store.current_rv() == last_rv {
                    continue;
                }
            }
        }
        for _ in 0..MAX_PASSES {
            last_rv = state.store.current_rv();
            if !pass::run(&state) || stop.is_cancelled() {
                break;
            }
            tokio::time::sleep(SETTLE).await;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(IDLE) => {}
        }
    }
}
