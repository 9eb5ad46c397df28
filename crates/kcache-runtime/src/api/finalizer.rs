//! [`Context::finalizer`]: a finalizer on the primary object, added on the first reconcile,
//! run on deletion, then removed.

use std::{future::Future, sync::Arc};

use kcache::controller::Action;
use kube_core::params::Patch;
use serde_json::json;
use tracing::debug;

use super::Error;

/// Tries to remove a finalizer after a cleanup: the newest version known, then (after a
/// conflict) the object read again from the API server.
const REMOVE_ATTEMPTS: u32 = 3;
use crate::{ApiObject, Context};

/// What a reconcile guarded by [`Context::finalizer`] is asked to do.
#[derive(Debug, Clone)]
pub enum FinalizerEvent<K> {
    /// The object is alive and carries the finalizer: make the world match it.
    Apply(Arc<K>),
    /// The object is being deleted and still carries the finalizer: release what it holds
    /// that garbage collection does not (outside the cluster, or not owned through owner
    /// references). Return [`Action::Done`] once done; the finalizer is then removed and the
    /// deletion completes. Any other action (or an error) keeps the finalizer, and the
    /// cleanup runs again.
    Cleanup(Arc<K>),
}

impl<K: ApiObject> Context<K> {
    /// Runs `reconcile` under the finalizer `name` (e.g. `demo.kcache.dev/cleanup`), as
    /// kube-rs' `finalizer` and controller-runtime's finalizer helper do:
    ///
    /// | object | finalizer | what happens |
    /// |---|---|---|
    /// | alive | absent | the finalizer is added, then `reconcile(Apply(updated))` |
    /// | alive | present | `reconcile(Apply(obj))` |
    /// | deleting | present | `reconcile(Cleanup(obj))`; on `Ok(Action::Done)` the finalizer is removed |
    /// | deleting | absent | nothing (`Ok(Action::Done)`): not ours to clean up |
    ///
    /// Adding and removing are JSON merge patches of `metadata.finalizers` conditional on
    /// a `resourceVersion`, so that no finalizer of anyone else is ever lost:
    ///
    /// - **adding** is conditional on the version the reconcile started from: if the object
    ///   changed since the cache showed it (another controller's finalizer, a spec change),
    ///   the patch fails with 409 Conflict and the error retries the reconcile on the newer
    ///   object;
    /// - **removing** (after a cleanup returned [`Action::Done`]) is conditional on the
    ///   newest version this controller knows: the cache's, or the one its own last write
    ///   of the object returned. A cleanup may therefore write the object it finalizes
    ///   (an annotation, a status) through [`Context::api`] before returning `Done`: the
    ///   removal follows that write. On a conflict (a writer this controller does not know
    ///   of, or a write sent with [`Context::kube`], which is not tracked) the object is
    ///   read again from the API server and the removal retried on it, within the same
    ///   reconcile (three attempts in all); past that, the conflict is returned.
    ///
    /// What it guarantees: the cleanup runs to `Done` once per deletion as long as the
    /// removal succeeds within those attempts; if the removal fails, the next reconcile
    /// runs the cleanup again (make it idempotent: it must tolerate what it already
    /// released). The update events caused by this controller's own writes of the object
    /// do not queue it again (see [`ControllerBuilder::build`](crate::ControllerBuilder::build)),
    /// so a failing cleanup that writes is retried with the queue's backoff, never in a hot
    /// loop. All the writes are tracked (read-your-own-writes), like every write through
    /// [`Context::api`].
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_runtime::{Action, Context, FinalizerEvent, api};
    ///
    /// async fn reconcile(_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>) -> Result<Action, api::Error> {
    ///     ctx.finalizer("example.com/cleanup", |event| async {
    ///         match event {
    ///             FinalizerEvent::Apply(_cm) => Ok(Action::Done),     // create, update
    ///             FinalizerEvent::Cleanup(_cm) => Ok(Action::Done),   // release
    ///         }
    ///     })
    ///     .await
    /// }
    /// # fn main() { let _ = reconcile; }
    /// ```
    ///
    /// # Errors
    /// `reconcile`'s error, or the failed patch as an `E` (a conflict included).
    pub async fn finalizer<F, Fut, E>(&self, name: &str, reconcile: F) -> Result<Action, E>
    where
        F: FnOnce(FinalizerEvent<K>) -> Fut,
        Fut: Future<Output = Result<Action, E>>,
        E: From<Error>,
    {
        let obj = Arc::clone(self.object());
        let meta = obj.meta();
        let finalizers = meta.finalizers.clone().unwrap_or_default();
        let present = finalizers.iter().any(|f| f == name);
        match (meta.deletion_timestamp.is_some(), present) {
            (false, true) => reconcile(FinalizerEvent::Apply(obj)).await,
            (false, false) => {
                let mut with = finalizers;
                with.push(name.to_owned());
                let updated = self.set_finalizers(&obj, with).await?;
                debug!(controller = %self.controller(), key = %self.key(), finalizer = name, "finalizer added");
                reconcile(FinalizerEvent::Apply(Arc::new(updated))).await
            }
            (true, true) => {
                let action = reconcile(FinalizerEvent::Cleanup(Arc::clone(&obj))).await?;
                if action == Action::Done {
                    self.remove_finalizer(name).await?;
                    debug!(controller = %self.controller(), key = %self.key(), finalizer = name, "cleaned up; finalizer removed");
                }
                Ok(action)
            }
            (true, false) => Ok(Action::Done),
        }
    }

    /// Removes finalizer `name` after a cleanup: from the newest version of the object the
    /// controller knows (its own writes included), and on a conflict from the object read
    /// again from the API server, at most [`REMOVE_ATTEMPTS`] times.
    async fn remove_finalizer(&self, name: &str) -> Result<(), Error> {
        let mut current = self.newest();
        for attempt in 1..=REMOVE_ATTEMPTS {
            let finalizers = current.meta().finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == name) {
                return Ok(());
            }
            let without = finalizers.into_iter().filter(|f| f != name).collect();
            match self.set_finalizers(&current, without).await {
                Ok(_) => return Ok(()),
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) if e.is_conflict() && attempt < REMOVE_ATTEMPTS => {
                    debug!(controller = %self.controller(), key = %self.key(), finalizer = name, attempt,
                        "the object changed since; removing the finalizer from the current one");
                    let object = current.meta().name.clone().unwrap_or_default();
                    match self.api::<K>().get_fresh(&object).await? {
                        Some(fresh) => current = Arc::new(fresh),
                        None => return Ok(()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sets `obj`'s finalizers, conditional on its resourceVersion.
    async fn set_finalizers(&self, obj: &K, finalizers: Vec<String>) -> Result<K, Error> {
        let meta = obj.meta();
        let patch = json!({
            "metadata": {
                "finalizers": finalizers,
                "resourceVersion": meta.resource_version,
            }
        });
        let name = meta.name.as_deref().unwrap_or_default();
        self.api::<K>().patch(name, &Patch::Merge(&patch)).await
    }
}
