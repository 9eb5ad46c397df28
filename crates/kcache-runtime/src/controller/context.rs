//! [`Context`]: what a reconcile gets next to its object.

use std::sync::Arc;

use kcache::{
    SharedIndexInformer,
    store::{Lister, ObjectKey},
};
use kcache_client::events::{Event, Recorder};
use kube_core::params::Patch;
use serde::Serialize;
use serde_json::json;

use crate::{
    ApiObject,
    api::{self, TrackedApi, Tracker, is_cluster_scoped},
    expectations::Expectations,
    manager::Shared as ManagerShared,
    metrics::ControllerCacheMetrics,
};

/// What every reconcile of one controller shares.
pub(crate) struct Shared<K> {
    pub(crate) name: String,
    pub(crate) field_manager: String,
    pub(crate) manager: Arc<ManagerShared>,
    pub(crate) recorder: Recorder,
    pub(crate) expectations: Arc<Expectations>,
    pub(crate) metrics: ControllerCacheMetrics,
    pub(crate) primary: SharedIndexInformer<K>,
}

/// The context of one reconcile: the object's key, the manager's client for writes, the
/// controller's Events recorder, the listers of the cached types, and the write helpers.
///
/// Writes made through it ([`api`](Self::api), [`apply_owned`](Self::apply_owned),
/// [`patch_status`](Self::patch_status), [`finalizer`](Self::finalizer)) are tracked: the
/// controller's next reconcile of this key starts only once the caches show them
/// ([read-your-own-writes](crate#read-your-own-writes)). Cheap to clone.
pub struct Context<K> {
    shared: Arc<Shared<K>>,
    key: ObjectKey,
    object: Arc<K>,
}

impl<K> Clone for Context<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            key: self.key.clone(),
            object: Arc::clone(&self.object),
        }
    }
}

impl<K> std::fmt::Debug for Context<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("controller", &self.shared.name)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl<K: ApiObject> Context<K> {
    pub(crate) fn new(shared: Arc<Shared<K>>, key: ObjectKey, object: Arc<K>) -> Self {
        Self {
            shared,
            key,
            object,
        }
    }

    /// The key being reconciled.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The object being reconciled, as the cache held it when the reconcile started.
    pub fn object(&self) -> &Arc<K> {
        &self.object
    }

    /// The controller's name.
    pub fn controller(&self) -> &str {
        &self.shared.name
    }

    /// The manager's one kube client for writes, with kube's retries of 429/503/504 (see
    /// [`api`](crate::api#retries)). Writes sent with it directly are **not** tracked for
    /// read-your-own-writes; prefer [`api`](Self::api).
    pub fn kube(&self) -> &kube_client::Client {
        &self.shared.manager.kube
    }

    /// The controller's Events recorder (reporting as `MANAGER/CONTROLLER`, instance the
    /// manager's identity).
    pub fn recorder(&self) -> &Recorder {
        &self.shared.recorder
    }

    /// Publishes `event` about the object being reconciled (`kubectl describe` shows it).
    /// Best effort: a failure is logged, never returned (client-go's recorder does the same).
    pub async fn publish(&self, event: Event) {
        let regarding = self.object.object_ref(&());
        self.shared.recorder.publish(&event, &regarding).await;
    }

    /// The lister of the manager's cache of `C`.
    ///
    /// # Panics
    /// When the manager caches no `C`: declare it with
    /// [`owns`](crate::ControllerBuilder::owns), [`watches`](crate::ControllerBuilder::watches)
    /// or [`Manager::informer`](crate::Manager::informer) before the manager runs.
    pub fn lister<C: ApiObject>(&self) -> Lister<C> {
        self.informer::<C>().lister()
    }

    /// The cached `C` named `name` in the object's namespace (or cluster-wide, for a
    /// cluster-scoped `C`).
    ///
    /// # Panics
    /// As [`lister`](Self::lister).
    pub fn get<C: ApiObject>(&self, name: &str) -> Option<Arc<C>> {
        let key = match self.namespace().filter(|_| !is_cluster_scoped::<C>()) {
            Some(ns) => ObjectKey::new(Some(ns), name),
            None => ObjectKey::new(None, name),
        };
        self.informer::<C>().indexer().get_by_key(key.as_str())
    }

    fn informer<C: ApiObject>(&self) -> SharedIndexInformer<C> {
        self.shared.manager.cached::<C>().unwrap_or_else(|| {
            panic!(
                "controller {}: the manager caches no {}; declare it with owns, watches or \
                 Manager::informer before the manager runs",
                self.shared.name,
                C::kind(&())
            )
        })
    }

    fn namespace(&self) -> Option<&str> {
        self.object.meta().namespace.as_deref()
    }

    /// Writes of `C` in the object's namespace (cluster-wide for a cluster-scoped `C`),
    /// tracked for read-your-own-writes when the manager caches `C` there.
    pub fn api<C: ApiObject>(&self) -> TrackedApi<C> {
        let namespace = self.namespace().map(str::to_owned);
        self.api_in(namespace.as_deref())
    }

    /// [`api`](Self::api) in another namespace (`None`: a cluster-scoped `C`).
    pub fn api_in<C: ApiObject>(&self, namespace: Option<&str>) -> TrackedApi<C> {
        let manager = &self.shared.manager;
        let covered = is_cluster_scoped::<C>()
            || manager.config.namespace.is_none()
            || manager.config.namespace.as_deref() == namespace;
        let cache = if covered { manager.cached::<C>() } else { None };
        let tracker = cache.map(|informer| Tracker {
            expectations: Arc::clone(&self.shared.expectations),
            reconciled: self.key.clone(),
            cache: informer.indexer().clone(),
        });
        TrackedApi::new(
            manager.kube.clone(),
            namespace,
            self.shared.field_manager.clone(),
        )
        .tracked(tracker, self.shared.metrics.clone())
    }

    /// Server-side applies `obj` as an object owned by the one being reconciled: in its
    /// namespace (when `obj` is namespaced and names none), with a controller owner reference
    /// to it (`controller: true`, `blockOwnerDeletion: true`; owner references already on
    /// `obj` are kept), as this controller's field manager with `force`. The owner's deletion
    /// then garbage-collects it, and [`owns`](crate::ControllerBuilder::owns) maps its
    /// changes back to this key. Tracked for read-your-own-writes.
    ///
    /// # Errors
    /// [`api::Error`]: the server's answer (e.g. 409 when another controller owns `obj`).
    pub async fn apply_owned<C: ApiObject>(&self, mut obj: C) -> Result<C, api::Error> {
        if !is_cluster_scoped::<C>() && obj.meta().namespace.is_none() {
            obj.meta_mut().namespace = self.namespace().map(str::to_owned);
        }
        if let Some(owner) = self.object.controller_owner_ref(&()) {
            let refs = obj.meta_mut().owner_references.get_or_insert_with(Vec::new);
            refs.retain(|r| r.uid != owner.uid);
            refs.push(owner);
        }
        let namespace = obj.meta().namespace.clone();
        self.api_in::<C>(namespace.as_deref()).apply(&obj).await
    }

    /// Sets the object's `status` to `status` (a JSON merge patch of the `status`
    /// subresource: fields of `status` not set here are kept). Tracked for
    /// read-your-own-writes.
    ///
    /// # Errors
    /// [`api::Error`]: the server's answer.
    pub async fn patch_status<S: Serialize + std::fmt::Debug>(
        &self,
        status: &S,
    ) -> Result<K, api::Error> {
        let patch = json!({ "status": status });
        let name = self.object.meta().name.as_deref().unwrap_or_default();
        self.api::<K>()
            .patch_status(name, &Patch::Merge(&patch))
            .await
    }
}
