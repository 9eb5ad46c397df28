//! [`ServerHandle`]: read and write objects of a running server from Rust, without HTTP,
//! with the same validation and semantics as the REST API.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::registry::managed::{FieldsChange, Manager, field_set};
use crate::registry::{self, AppState, Target};
use crate::resource::ResourceInfo;
use crate::status::ApiError;

/// Direct access to a running server's objects; cheap to clone.
///
/// Paths are the REST paths, e.g. `/api/v1/namespaces/default/configmaps` for a
/// collection and `/api/v1/namespaces/default/configmaps/cm1` for an object.
#[derive(Debug, Clone)]
pub struct ServerHandle {
    pub(crate) state: Arc<AppState>,
}

impl ServerHandle {
    fn target(&self, path: &str, named: bool) -> Result<Target, ApiError> {
        match registry::resolve_path(&self.state.registry, path) {
            Some(t) if t.name.is_some() == named && !t.watch_path => Ok(t),
            _ => Err(ApiError::unknown_resource()),
        }
    }

    /// Serves one more resource type from now on (and in discovery).
    pub fn register(&self, info: ResourceInfo) {
        self.state.registry.register(info);
    }

    /// The current global resourceVersion.
    #[must_use]
    pub fn resource_version(&self) -> u64 {
        self.state.store.current_rv()
    }

    /// Creates `object` in the collection at `collection_path`; returns the stored object.
    ///
    /// # Errors
    /// The [`ApiError`] the REST API would answer (404 unknown namespace, 409, 422, ...).
    pub fn create(&self, collection_path: &str, object: Value) -> Result<Value, ApiError> {
        let t = self.target(collection_path, false)?;
        if t.info.namespaced && t.namespace.is_none() {
            return Err(ApiError::method_not_allowed());
        }
        let change = FieldsChange::Set(Manager::handle(), field_set(&object, false));
        registry::create_object(&self.state, &t, object, false, &change).map(|o| o.value().clone())
    }

    /// Creates `object` where its `apiVersion` and `kind` say (in `metadata.namespace`, or
    /// `default`, for a namespaced kind); returns the stored object. This is how a manifest
    /// is loaded ([`crate::manifests`]).
    ///
    /// # Errors
    /// 404 for a kind the server does not serve, else as [`ServerHandle::create`].
    pub fn create_object(&self, object: Value) -> Result<Value, ApiError> {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let info = self
            .state
            .registry
            .all()
            .into_iter()
            .find(|i| i.group == group && i.version == version && i.kind == kind)
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "NotFound",
                    format!("the server does not serve {kind} in {api_version:?}"),
                )
            })?;
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if info.namespaced {
            let ns = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .unwrap_or("default");
            format!("{prefix}/namespaces/{ns}/{}", info.plural)
        } else {
            format!("{prefix}/{}", info.plural)
        };
        self.create(&path, object)
    }

    /// The current objects of the collection at `collection_path` (all namespaces for a
    /// namespaced resource without a namespace in the path), ordered by namespace and name,
    /// with the resourceVersion they are consistent at.
    ///
    /// # Errors
    /// 404 for an unknown resource path.
    pub fn list(&self, collection_path: &str) -> Result<(Vec<Value>, u64), ApiError> {
        let t = self.target(collection_path, false)?;
        let all = |_: &crate::object::StoredObject| true;
        let q = crate::store::ListQuery {
            namespace: t.namespace.as_deref(),
            at: crate::store::ReadAt::Latest,
            start_after: None,
            limit: None,
            filter: &all,
            count_remaining: false,
        };
        let page = self
            .state
            .store
            .list(&t.info.id(), &q)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok((
            page.items.iter().map(|o| o.value().clone()).collect(),
            page.rv,
        ))
    }

    /// Reads the object at `path`.
    ///
    /// # Errors
    /// 404 NotFound when it does not exist.
    pub fn get(&self, path: &str) -> Result<Value, ApiError> {
        let t = self.target(path, true)?;
        registry::get_object(&self.state, &t).map(|o| o.value().clone())
    }

    /// Replaces the object at `path` (a `metadata.resourceVersion` in `object` is checked).
    ///
    /// # Errors
    /// 404 when missing, 409 on a stale resourceVersion.
    pub fn update(&self, path: &str, object: Value) -> Result<Value, ApiError> {
        let t = self.target(path, true)?;
        let change = FieldsChange::Update(Manager::handle());
        registry::update_object(&self.state, &t, object, false, &change).map(|o| o.value().clone())
    }

    /// Creates the RBAC objects kube-apiserver creates at start, then aggregates the aggregated
    /// ClusterRoles (as kube-controller-manager would in a cluster).
    pub(crate) fn seed_rbac(&self) -> Result<(), ApiError> {
        for (path, obj) in crate::auth::bootstrap::objects() {
            self.create(&path, obj)?;
        }
        // Aggregated roles may select aggregated roles: sync until nothing changes.
        for _ in 0..8 {
            if !self.aggregate_cluster_roles() {
                break;
            }
        }
        Ok(())
    }

    /// Brings the aggregated ClusterRoles' rules up to date (one pass, writing through this
    /// handle); whether a role changed.
    pub(crate) fn aggregate_cluster_roles(&self) -> bool {
        crate::auth::aggregate::aggregate(&self.state.store, |path, object| {
            self.update(path, object).map(drop)
        })
    }

    /// Deletes the object at `path` (finalizers are honoured).
    ///
    /// # Errors
    /// 404 when missing.
    pub fn delete(&self, path: &str) -> Result<(), ApiError> {
        let t = self.target(path, true)?;
        registry::delete_object(&self.state, &t, &json!({}), false).map(|_| ())
    }
}
