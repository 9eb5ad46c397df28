//! [`Context`]: what a reconcile gets next to its object.

use std::{
    any::{Any, TypeId},
    sync::Arc,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kcache::store::ObjectKey;
use kcache_client::events::{Event, Recorder};
use kube_core::params::Patch;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::json;

use crate::{
    ApiObject,
    api::{self, TrackedApi, Tracker, WriteHook, is_cluster_scoped},
    controller::own_writes::OwnWrites,
    expectations::{Expectations, at_least},
    manager::{Cached, Lister, Shared as ManagerShared},
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
    pub(crate) primary: Cached<K>,
    /// The primary objects this controller wrote, whose events must not queue them again.
    pub(crate) own_writes: Arc<OwnWrites>,
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
    /// The newest version of the reconciled object this reconcile wrote.
    written: Arc<Mutex<Option<Arc<K>>>>,
}

impl<K> Clone for Context<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            key: self.key.clone(),
            object: Arc::clone(&self.object),
            written: Arc::clone(&self.written),
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
            written: Arc::new(Mutex::new(None)),
        }
    }

    /// The newest version of the reconciled object the controller knows: the cache's, the
    /// one the reconcile started from, or the one its last write returned, whichever has the
    /// highest resourceVersion.
    pub(crate) fn newest(&self) -> Arc<K> {
        let rv = |o: &K| o.meta().resource_version.clone().unwrap_or_default();
        let newer = |candidate: &str, than: &str| candidate != than && at_least(candidate, than);
        let mut newest = Arc::clone(&self.object);
        if let Some(written) = self.written.lock().clone()
            && newer(&rv(&written), &rv(&newest))
        {
            newest = written;
        }
        // The cache's version is read from its metadata, and decoded only when newer.
        let cached_rv = self.shared.primary.resource_version(&self.key);
        if cached_rv.is_some_and(|cached| newer(&cached, &rv(&newest)))
            && let Some(cached) = self.shared.primary.get(&self.key)
        {
            newest = cached;
        }
        newest
    }

    /// For writes of the primary type: records each object written, for [`newest`](Self::newest)
    /// and so that its watch event does not queue the key again.
    fn write_hook<C: ApiObject>(&self) -> Option<WriteHook<C>> {
        if TypeId::of::<C>() != TypeId::of::<K>() {
            return None;
        }
        let (own, written) = (
            Arc::clone(&self.shared.own_writes),
            Arc::clone(&self.written),
        );
        let (primary, key) = (self.shared.primary.clone(), self.key.clone());
        Some(Arc::new(move |obj: &C| {
            let Some(obj) = (obj as &dyn Any).downcast_ref::<K>() else {
                return;
            };
            let meta = obj.meta();
            let same = meta.name.as_deref() == Some(key.name())
                && meta.namespace.as_deref() == key.namespace();
            if same {
                *written.lock() = Some(Arc::new(obj.clone()));
            }
            // Its event may already be in: then there is nothing to hold back.
            let rv = meta.resource_version.as_deref().unwrap_or_default();
            let shown = primary
                .resource_version(&ObjectKey::new(
                    meta.namespace.as_deref(),
                    meta.name.as_deref().unwrap_or_default(),
                ))
                .is_some_and(|seen| !seen.is_empty() && at_least(&seen, rv));
            if !shown {
                own.record(obj);
            }
        }))
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

    /// The controller's Events recorder (reporting as its event reporter, by default
    /// `MANAGER/CONTROLLER`; instance the manager's identity).
    pub fn recorder(&self) -> &Recorder {
        &self.shared.recorder
    }

    /// Publishes `event` about the object being reconciled (`kubectl describe` shows it).
    /// Best effort: a failure is logged, never returned (client-go's recorder does the same).
    pub async fn publish(&self, event: Event) {
        let regarding = self.object.object_ref(&());
        self.shared.recorder.publish(&event, &regarding).await;
    }

    /// The lister of the manager's cache of `C`: typed reads (objects stored lean are
    /// decoded per read; see [`manager::Storage`](crate::manager::Storage)).
    ///
    /// # Panics
    /// When the manager caches no `C`: declare it with
    /// [`owns`](crate::ControllerBuilder::owns), [`watches`](crate::ControllerBuilder::watches)
    /// or [`Manager::informer`](crate::Manager::informer) before the manager runs.
    pub fn lister<C: ApiObject>(&self) -> Lister<C> {
        self.informer::<C>().lister()
    }

    /// The cached `C` named `name` in the object's namespace (or cluster-wide, for a
    /// cluster-scoped `C`); decoded now when the cache stores it lean.
    ///
    /// # Panics
    /// As [`lister`](Self::lister).
    pub fn get<C: ApiObject>(&self, name: &str) -> Option<Arc<C>> {
        let key = match self.namespace().filter(|_| !is_cluster_scoped::<C>()) {
            Some(ns) => ObjectKey::new(Some(ns), name),
            None => ObjectKey::new(None, name),
        };
        self.informer::<C>().get(&key)
    }

    /// [`get`](Self::get), with a miss as an error that names the cache's selectors (see
    /// [`manager::Cache`](crate::manager::Cache)): a selected cache leaves out every object
    /// its selectors do not match, and a reconcile that expected one learns why.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_runtime::{Action, Context, api};
    ///
    /// async fn reconcile(_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>) -> Result<Action, api::Error> {
    ///     // "configmaps apps/settings is not in the manager's cache of configmaps
    ///     // (label selector "app=web"): it does not exist, or the cache's selectors leave it out"
    ///     let _settings = ctx.read::<ConfigMap>("settings")?;
    ///     Ok(Action::Done)
    /// }
    /// # fn main() { let _ = reconcile; }
    /// ```
    ///
    /// # Errors
    /// [`api::Error::NotCached`] when the cache holds no such object.
    ///
    /// # Panics
    /// As [`lister`](Self::lister).
    pub fn read<C: ApiObject>(&self, name: &str) -> Result<Arc<C>, api::Error> {
        self.get::<C>(name).ok_or_else(|| {
            let resource = C::plural(&()).into_owned();
            let what = match self.namespace().filter(|_| !is_cluster_scoped::<C>()) {
                Some(ns) => format!("{resource} {ns}/{name}"),
                None => format!("{resource} {name}"),
            };
            api::Error::NotCached {
                what,
                resource,
                selectors: self
                    .shared
                    .manager
                    .selectors::<C>()
                    .unwrap_or_else(|| "no selector".to_owned()),
            }
        })
    }

    fn informer<C: ApiObject>(&self) -> Cached<C> {
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
        // The informer holding `namespace`'s objects (of a set: that namespace's), if cached.
        let reader = manager.cached::<C>().and_then(|cached| {
            let namespace = namespace.filter(|_| !is_cluster_scoped::<C>());
            if is_cluster_scoped::<C>() || cached.covers(namespace) {
                cached.meta_reader(namespace)
            } else {
                None
            }
        });
        let tracker = reader.map(|cache| Tracker {
            expectations: Arc::clone(&self.shared.expectations),
            reconciled: self.key.clone(),
            cache,
            _kind: std::marker::PhantomData,
        });
        TrackedApi::new(
            manager.kube.clone(),
            namespace,
            self.shared.field_manager.clone(),
        )
        .tracked(tracker, self.shared.metrics.clone())
        .on_write(self.write_hook::<C>())
    }

    /// Server-side applies `obj` as an object owned by the one being reconciled: in its
    /// namespace (when `obj` is namespaced and names none), with a controller owner reference
    /// to it (`controller: true`, `blockOwnerDeletion: true`; owner references already on
    /// `obj` are kept), as this controller's field manager with `force`. The owner's deletion
    /// then garbage-collects it, and [`owns`](crate::ControllerBuilder::owns) maps its
    /// changes back to this key. Tracked for read-your-own-writes.
    ///
    /// Returns what happened ([`api::Applied`]): `Created` when the object did not exist,
    /// `Unchanged` when the apply left its resourceVersion where it was, else `Updated`.
    /// "Did not exist" and the version before are read from the manager's cache of `C`
    /// (which holds this controller's own earlier writes), or with a GET when the manager
    /// caches no `C` there (one more request). A cache behind another writer's change may
    /// report `Updated` for an apply that changed nothing.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// use kcache_runtime::{Action, Context, Event, EventType, api::{self, Applied}};
    ///
    /// async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<ConfigMap>) -> Result<Action, api::Error> {
    ///     let mut secret = Secret::default();
    ///     secret.metadata.name = cm.metadata.name.clone();
    ///     let applied = ctx.apply_owned(secret).await?;
    ///     if let Applied::Created(_) | Applied::Updated(_) = &applied {
    ///         let event = Event {
    ///             type_: EventType::Normal,
    ///             reason: applied.verb().into(),
    ///             note: Some("secret written".into()),
    ///             action: "Apply".into(),
    ///             secondary: None,
    ///         };
    ///         ctx.publish(event).await;
    ///     }
    ///     Ok(Action::Done)
    /// }
    /// # fn main() { let _ = reconcile; }
    /// ```
    ///
    /// # Errors
    /// [`api::Error`]: the server's answer (e.g. 409 when another controller owns `obj`).
    pub async fn apply_owned<C: ApiObject>(
        &self,
        mut obj: C,
    ) -> Result<api::Applied<C>, api::Error> {
        if !is_cluster_scoped::<C>() && obj.meta().namespace.is_none() {
            obj.meta_mut().namespace = self.namespace().map(str::to_owned);
        }
        if let Some(owner) = self.object.controller_owner_ref(&()) {
            let refs = obj.meta_mut().owner_references.get_or_insert_with(Vec::new);
            refs.retain(|r| r.uid != owner.uid);
            refs.push(owner);
        }
        let namespace = obj.meta().namespace.clone();
        let api = self.api_in::<C>(namespace.as_deref());
        let name = obj.meta().name.clone().unwrap_or_default();
        let before = if api.is_tracked() {
            let key = ObjectKey::new(
                namespace.as_deref().filter(|_| !is_cluster_scoped::<C>()),
                &name,
            );
            self.informer::<C>().resource_version(&key)
        } else if name.is_empty() {
            None
        } else {
            api.get_fresh(&name)
                .await?
                .map(|o| o.meta().resource_version.clone().unwrap_or_default())
        };
        let applied = api.apply(&obj).await?;
        let after = applied.meta().resource_version.clone().unwrap_or_default();
        Ok(match before {
            None => api::Applied::Created(applied),
            Some(rv) if rv == after => api::Applied::Unchanged(applied),
            Some(_) => api::Applied::Updated(applied),
        })
    }

    /// A status condition observed on the object being reconciled: `observedGeneration` is
    /// its `metadata.generation`; set it with [`conditions::set_condition`](crate::conditions::set_condition)
    /// (which keeps `lastTransitionTime` unless the status changes).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use k8s_openapi::{api::apps::v1::Deployment, apimachinery::pkg::apis::meta::v1::Condition};
    /// use kcache_runtime::{Action, Context, api, conditions::set_condition};
    ///
    /// async fn reconcile(_dep: Arc<Deployment>, ctx: Context<Deployment>) -> Result<Action, api::Error> {
    ///     let mut conditions: Vec<Condition> = Vec::new(); // from the object's status
    ///     let ready = ctx.condition("Ready", true, "Serving", "all replicas ready");
    ///     if set_condition(&mut conditions, ready) {
    ///         ctx.patch_status(&serde_json::json!({ "conditions": conditions })).await?;
    ///     }
    ///     Ok(Action::Done)
    /// }
    /// # fn main() { let _ = reconcile; }
    /// ```
    pub fn condition(
        &self,
        type_: impl Into<String>,
        status: bool,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Condition {
        let mut condition = crate::conditions::new(type_, status, reason, message);
        condition.observed_generation = self.object.meta().generation;
        condition
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
