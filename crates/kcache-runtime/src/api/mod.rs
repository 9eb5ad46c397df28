//! Writes: [`TrackedApi`], a controller's writes of one type through the manager's client,
//! each one recorded so that the controller's next reconcile of the same key reads it back
//! from the cache ([read-your-own-writes](crate#read-your-own-writes)); the helpers built on
//! it ([`Context::apply_owned`](crate::Context::apply_owned),
//! [`Context::patch_status`](crate::Context::patch_status),
//! [`Context::finalizer`](crate::Context::finalizer)); and their [`Error`].
//!
//! # Retries
//!
//! Every write goes through the manager's one kube client for writes
//! ([`Manager::kube`](crate::Manager::kube), `kcache_client::Client::kube_for_writes`): kube's
//! default retry policy, which retries a request answered **429 Too Many Requests, 503
//! Service Unavailable or 504 Gateway Timeout**, up to 15 times, with exponential backoff from
//! 5 ms (honouring `Retry-After`). It applies to every verb here (create, apply, patch,
//! update, delete, and the Events the recorder publishes). Nothing else is retried in place:
//! a 409 Conflict, a 422 Invalid, a 500 or a broken connection is returned as an [`Error`],
//! and the reconcile's error goes through the controller's error policy (by default, a retry
//! of the whole reconcile with the queue's backoff, on a cache that then holds what the
//! failed attempt wrote). The informers' lists and watches use the other client, without
//! retries, because the reflector must see those answers to apply client-go's recovery.

mod applied;
mod error;
mod finalizer;

use std::{any::TypeId, fmt::Debug, sync::Arc};

use kube_core::params::GetParams;

use kcache::store::ObjectKey;
use kube_core::{
    ClusterResourceScope, Request, Resource,
    params::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde::{Serialize, de::DeserializeOwned};

pub use applied::Applied;
pub use error::Error;
pub use finalizer::FinalizerEvent;

use crate::{
    expectations::{Expectations, MetaReader, Written},
    metrics::ControllerCacheMetrics,
};

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Called with every object a write returned (the controller's own writes of its primary
/// type: the finalizer removes from the newest, own events do not requeue).
pub(crate) type WriteHook<C> = Arc<dyn Fn(&C) + Send + Sync>;

/// Where a write is recorded: the reconciled key, and the cache that must show the write.
pub(crate) struct Tracker<C> {
    pub(crate) expectations: Arc<Expectations>,
    pub(crate) reconciled: ObjectKey,
    pub(crate) cache: Arc<dyn MetaReader>,
    pub(crate) _kind: std::marker::PhantomData<fn() -> C>,
}

/// Whether `C` is cluster-scoped.
pub(crate) fn is_cluster_scoped<C: Resource>() -> bool
where
    C::Scope: 'static,
{
    TypeId::of::<C::Scope>() == TypeId::of::<ClusterResourceScope>()
}

/// A controller's writes of `C` in one namespace (or cluster-wide for a cluster-scoped `C`),
/// through the manager's client for writes, each recorded for read-your-own-writes when the
/// manager caches `C` there. Made by [`Context::api`](crate::Context::api); every write
/// names the controller as its field manager.
///
/// Each method returns the object as the API server answered it; see the
/// [module docs](self#retries) for what is retried.
pub struct TrackedApi<C> {
    kube: kube_client::Client,
    request: Request,
    namespace: Option<String>,
    resource: String,
    field_manager: String,
    tracker: Option<Tracker<C>>,
    metrics: Option<ControllerCacheMetrics>,
    on_write: Option<WriteHook<C>>,
}

impl<C> Debug for TrackedApi<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackedApi")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .field("field_manager", &self.field_manager)
            .field("tracked", &self.tracker.is_some())
            .finish_non_exhaustive()
    }
}

impl<C> TrackedApi<C>
where
    C: Resource<DynamicType = ()>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static,
    C::Scope: 'static,
{
    /// Writes of `C` in `namespace` (ignored for a cluster-scoped `C`), untracked.
    pub(crate) fn new(
        kube: kube_client::Client,
        namespace: Option<&str>,
        field_manager: String,
    ) -> Self {
        let namespace = namespace
            .filter(|_| !is_cluster_scoped::<C>())
            .map(str::to_owned);
        Self {
            kube,
            request: Request::new(C::url_path(&(), namespace.as_deref())),
            namespace,
            resource: C::plural(&()).into_owned(),
            field_manager,
            tracker: None,
            metrics: None,
            on_write: None,
        }
    }

    /// Calls `hook` with every object a write returns.
    pub(crate) fn on_write(mut self, hook: Option<WriteHook<C>>) -> Self {
        self.on_write = hook;
        self
    }

    /// Object `name` as the API server has it now (GET; not a write, not tracked); `None`
    /// when it does not exist.
    pub(crate) async fn get_fresh(&self, name: &str) -> Result<Option<C>> {
        let what = self.what(name);
        let request = self
            .request
            .get(name, &GetParams::default())
            .map_err(|e| Error::request("get", &what, kube_client::Error::BuildRequest(e)))?;
        match self.kube.request::<serde_json::Value>(request).await {
            Ok(value) => self.decode(value, "get", &what).map(Some),
            Err(kube_client::Error::Api(s)) if s.is_not_found() => Ok(None),
            Err(e) => Err(Error::request("get", &what, e)),
        }
    }

    /// Records the writes into `tracker`, counting them in `metrics`.
    pub(crate) fn tracked(
        mut self,
        tracker: Option<Tracker<C>>,
        metrics: ControllerCacheMetrics,
    ) -> Self {
        self.tracker = tracker;
        self.metrics = Some(metrics);
        self
    }

    /// The namespace written to; `None` for a cluster-scoped `C`.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Whether this controller's next reconcile waits for these writes to show in the cache
    /// (the manager caches `C` in this namespace).
    pub fn is_tracked(&self) -> bool {
        self.tracker.is_some()
    }

    /// `deployments mon/web`, for messages.
    fn what(&self, name: &str) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{name}", self.resource),
            None => format!("{} {name}", self.resource),
        }
    }

    fn name_of<'a>(&self, obj: &'a C, verb: &'static str) -> Result<&'a str> {
        obj.meta().name.as_deref().ok_or_else(|| Error::NoName {
            verb,
            resource: self.resource.clone(),
        })
    }

    fn encode(&self, obj: &impl Serialize, what: &str) -> Result<Vec<u8>> {
        serde_json::to_vec(obj).map_err(|source| Error::Encode {
            what: what.to_owned(),
            source,
        })
    }

    async fn send(
        &self,
        request: std::result::Result<http::Request<Vec<u8>>, kube_core::request::Error>,
        verb: &'static str,
        what: String,
    ) -> Result<serde_json::Value> {
        let request = request
            .map_err(|e| Error::request(verb, &what, kube_client::Error::BuildRequest(e)))?;
        if let Some(m) = &self.metrics {
            m.wrote(verb, &self.resource);
        }
        self.kube
            .request::<serde_json::Value>(request)
            .await
            .map_err(|e| Error::request(verb, &what, e))
    }

    fn decode(&self, value: serde_json::Value, verb: &'static str, what: &str) -> Result<C> {
        serde_json::from_value(value)
            .map_err(|e| Error::request(verb, what, kube_client::Error::SerdeError(e)))
    }

    /// Records that `obj` (as the server answered) must show in the cache.
    fn track(&self, obj: &C, written: Written, verb: &'static str) {
        let Some(t) = &self.tracker else { return };
        let meta = obj.meta();
        let Some(name) = meta.name.as_deref() else {
            return;
        };
        let key = ObjectKey::new(meta.namespace.as_deref(), name);
        // A write that leaves a terminating object without finalizers deleted it (the
        // finalizer helper's last patch): the cache must lose it, at whatever version.
        let finalized =
            meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(Vec::is_empty);
        let (written, rv, what) = if finalized {
            let what = format!("{verb} {} (deleted)", self.what(name));
            (Written::Deleted, String::new(), what)
        } else {
            let rv = meta.resource_version.clone().unwrap_or_default();
            let what = format!("{verb} {} at resourceVersion {rv}", self.what(name));
            (written, rv, what)
        };
        t.expectations
            .expect(&t.reconciled, t.cache.clone(), key, rv, written, what);
    }

    async fn write(
        &self,
        request: std::result::Result<http::Request<Vec<u8>>, kube_core::request::Error>,
        verb: &'static str,
        name: &str,
    ) -> Result<C> {
        let what = self.what(name);
        let value = self.send(request, verb, what.clone()).await?;
        let obj = self.decode(value, verb, &what)?;
        self.track(&obj, Written::Upserted, verb);
        if let Some(hook) = &self.on_write {
            hook(&obj);
        }
        Ok(obj)
    }

    /// Creates `obj` (POST).
    ///
    /// # Errors
    /// [`Error`]: the server's answer (409 AlreadyExists: [`Error::is_already_exists`]).
    pub async fn create(&self, obj: &C) -> Result<C> {
        let name = self.name_of(obj, "create")?;
        let body = self.encode(obj, &self.what(name))?;
        let pp = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        self.write(self.request.create(&pp, body), "create", name)
            .await
    }

    /// Server-side applies `obj` as this controller's field manager, with `force` (the
    /// controller owns the fields it sets), creating it if it does not exist.
    ///
    /// # Errors
    /// [`Error`]: the server's answer.
    pub async fn apply(&self, obj: &C) -> Result<C> {
        let name = self.name_of(obj, "apply")?;
        let pp = PatchParams::apply(&self.field_manager).force();
        self.write(
            self.request.patch(name, &pp, &Patch::Apply(obj)),
            "apply",
            name,
        )
        .await
    }

    /// Patches object `name` (JSON merge, JSON patch, strategic merge, or apply with this
    /// controller's field manager). A merge patch that sets `metadata.resourceVersion` is
    /// conditional on it: 409 Conflict if the object changed since.
    ///
    /// # Errors
    /// [`Error`]: the server's answer.
    pub async fn patch<P: Serialize + Debug>(&self, name: &str, patch: &Patch<P>) -> Result<C> {
        let pp = self.patch_params(patch);
        self.write(self.request.patch(name, &pp, patch), "patch", name)
            .await
    }

    /// Patches the `status` subresource of object `name`.
    ///
    /// # Errors
    /// [`Error`]: the server's answer.
    pub async fn patch_status<P: Serialize + Debug>(
        &self,
        name: &str,
        patch: &Patch<P>,
    ) -> Result<C> {
        let pp = self.patch_params(patch);
        let request = self.request.patch_subresource("status", name, &pp, patch);
        self.write(request, "patch_status", name).await
    }

    fn patch_params<P: Serialize>(&self, patch: &Patch<P>) -> PatchParams {
        match patch {
            Patch::Apply(_) => PatchParams::apply(&self.field_manager).force(),
            _ => PatchParams {
                field_manager: Some(self.field_manager.clone()),
                ..PatchParams::default()
            },
        }
    }

    /// Replaces `obj` (PUT); conditional on its `metadata.resourceVersion` when set.
    ///
    /// # Errors
    /// [`Error`]: the server's answer (409 Conflict: [`Error::is_conflict`]).
    pub async fn replace(&self, obj: &C) -> Result<C> {
        let name = self.name_of(obj, "update")?;
        let body = self.encode(obj, &self.what(name))?;
        let pp = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        self.write(self.request.replace(name, &pp, body), "update", name)
            .await
    }

    /// Deletes object `name` (background propagation: its dependents are garbage collected
    /// afterwards). Returns the object when it still exists, terminating (finalizers
    /// pending), else `None`.
    ///
    /// # Errors
    /// [`Error`]: the server's answer (404: [`Error::is_not_found`]).
    pub async fn delete(&self, name: &str) -> Result<Option<C>> {
        let what = self.what(name);
        let value = self
            .send(
                self.request.delete(name, &DeleteParams::background()),
                "delete",
                what.clone(),
            )
            .await?;
        let is_status = value.get("kind").and_then(|k| k.as_str()) == Some("Status");
        let obj = if is_status {
            None
        } else {
            Some(self.decode(value, "delete", &what)?)
        };
        let terminating = obj.as_ref().filter(|o| {
            o.meta().deletion_timestamp.is_some()
                && o.meta().finalizers.as_ref().is_some_and(|f| !f.is_empty())
        });
        match (terminating, &self.tracker) {
            (Some(o), _) => {
                self.track(o, Written::Upserted, "delete");
                if let Some(hook) = &self.on_write {
                    hook(o);
                }
            }
            (None, Some(t)) => {
                let key = ObjectKey::new(self.namespace.as_deref(), name);
                // Not the returned object's resourceVersion: kube-apiserver may answer with
                // the object as it was before the delete. Gone from the cache is the sign.
                t.expectations.expect(
                    &t.reconciled,
                    t.cache.clone(),
                    key,
                    String::new(),
                    Written::Deleted,
                    format!("delete {what}"),
                );
            }
            (None, None) => {}
        }
        Ok(terminating.cloned())
    }
}
