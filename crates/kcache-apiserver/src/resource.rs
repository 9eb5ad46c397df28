//! Resource types the server knows: group, version, plural name, kind and scope.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

/// Describes one resource type served under `/api/v1` or `/apis/<group>/<version>`.
///
/// Objects are stored schemaless; this only tells the server how to route, name and
/// present them (discovery documents, `kind` of lists, bookmarks and Status details).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; empty for the legacy core group (`/api/v1`).
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural resource name used in URLs, e.g. `configmaps`.
    pub plural: String,
    /// Singular name, e.g. `configmap`.
    pub singular: String,
    /// Object kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Short names advertised in discovery (`cm`).
    pub short_names: Vec<String>,
    /// Subresources served as plain views of the object (`status`).
    pub subresources: Vec<String>,
    /// Whether the server maintains `metadata.generation` (bumped when anything but
    /// `metadata` and `status` changes). True for custom resources and pods.
    pub tracks_generation: bool,
    /// Whether a PUT without `metadata.resourceVersion` is accepted (the registry strategy's
    /// `AllowUnconditionalUpdate`); false for Leases, which answer 422.
    pub unconditional_update: bool,
    /// The structural schema (`openAPIV3Schema`) of a custom resource served for a
    /// CustomResourceDefinition: unknown fields are pruned by it. `None` for built-in kinds.
    pub schema: Option<Arc<serde_json::Value>>,
}

impl ResourceInfo {
    /// A namespaced resource with the given coordinates; the singular name is the
    /// lower-cased kind.
    #[must_use]
    pub fn namespaced(group: &str, version: &str, plural: &str, kind: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.to_owned(),
            namespaced: true,
            short_names: Vec::new(),
            subresources: Vec::new(),
            tracks_generation: true,
            unconditional_update: true,
            schema: None,
        }
    }

    /// A cluster-scoped resource with the given coordinates.
    #[must_use]
    pub fn cluster(group: &str, version: &str, plural: &str, kind: &str) -> Self {
        Self {
            namespaced: false,
            ..Self::namespaced(group, version, plural, kind)
        }
    }

    /// Adds short names (builder style).
    #[must_use]
    pub fn with_short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Adds subresources (builder style); only `status` has a meaning to the server.
    #[must_use]
    pub fn with_subresources(mut self, names: &[&str]) -> Self {
        self.subresources = names.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Turns off `metadata.generation` tracking (builder style).
    #[must_use]
    pub fn without_generation(mut self) -> Self {
        self.tracks_generation = false;
        self
    }

    /// Refuses updates without a resourceVersion (builder style).
    #[must_use]
    pub fn without_unconditional_update(mut self) -> Self {
        self.unconditional_update = false;
        self
    }

    /// `group/version`, or just `version` for the core group.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The name used in Status messages: `configmaps` or `leases.coordination.k8s.io`.
    #[must_use]
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The identity of this resource type.
    #[must_use]
    pub fn id(&self) -> ResourceId {
        ResourceId {
            group: self.group.clone(),
            version: self.version.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// Identifies a resource type: group, version and plural name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId {
    /// API group (empty for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name.
    pub plural: String,
}

/// The resource types registered at start: the core types a controller usually touches
/// plus `coordination.k8s.io/v1` leases, `events.k8s.io/v1` events and the `apps/v1`
/// workloads, and `apiextensions.k8s.io/v1` CustomResourceDefinitions.
#[must_use]
pub fn builtin_resources() -> Vec<ResourceInfo> {
    vec![
        ResourceInfo::cluster("", "v1", "namespaces", "Namespace")
            .with_short_names(&["ns"])
            .with_subresources(&["finalize", "status"])
            .without_generation(),
        ResourceInfo::namespaced("", "v1", "pods", "Pod")
            .with_short_names(&["po"])
            .with_subresources(&["status"]),
        ResourceInfo::namespaced("", "v1", "configmaps", "ConfigMap")
            .with_short_names(&["cm"])
            .without_generation(),
        ResourceInfo::namespaced("", "v1", "secrets", "Secret").without_generation(),
        ResourceInfo::namespaced("", "v1", "services", "Service")
            .with_short_names(&["svc"])
            .with_subresources(&["status"])
            .without_generation(),
        ResourceInfo::namespaced("", "v1", "events", "Event")
            .with_short_names(&["ev"])
            .without_generation(),
        ResourceInfo::namespaced("coordination.k8s.io", "v1", "leases", "Lease")
            .without_generation()
            .without_unconditional_update(),
        ResourceInfo::namespaced("events.k8s.io", "v1", "events", "Event")
            .with_short_names(&["ev"])
            .without_generation(),
        ResourceInfo::cluster(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
        )
        .with_short_names(&["crd", "crds"])
        .with_subresources(&["status"])
        .without_generation(),
        ResourceInfo::namespaced("apps", "v1", "deployments", "Deployment")
            .with_short_names(&["deploy"])
            .with_subresources(&["scale", "status"]),
        ResourceInfo::namespaced("apps", "v1", "replicasets", "ReplicaSet")
            .with_short_names(&["rs"])
            .with_subresources(&["scale", "status"]),
        ResourceInfo::namespaced("apps", "v1", "statefulsets", "StatefulSet")
            .with_short_names(&["sts"])
            .with_subresources(&["scale", "status"]),
        ResourceInfo::namespaced("apps", "v1", "daemonsets", "DaemonSet")
            .with_short_names(&["ds"])
            .with_subresources(&["status"]),
    ]
}

/// Thread-safe registry of served resource types; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    inner: Arc<RwLock<BTreeMap<ResourceId, Arc<ResourceInfo>>>>,
}

impl Registry {
    /// A registry holding `resources`.
    #[must_use]
    pub fn new(resources: impl IntoIterator<Item = ResourceInfo>) -> Self {
        let reg = Self::default();
        for r in resources {
            reg.register(r);
        }
        reg
    }

    /// Adds (or replaces) a resource type.
    pub fn register(&self, info: ResourceInfo) -> Arc<ResourceInfo> {
        let info = Arc::new(info);
        self.inner.write().insert(info.id(), info.clone());
        info
    }

    /// Removes a resource type (a deleted CustomResourceDefinition's); returns it if it was
    /// registered.
    pub fn unregister(&self, id: &ResourceId) -> Option<Arc<ResourceInfo>> {
        self.inner.write().remove(id)
    }

    /// Looks a resource type up by group, version and plural.
    #[must_use]
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        let id = ResourceId {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
        };
        self.inner.read().get(&id).cloned()
    }

    /// Every registered resource type, ordered by group, version, plural.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.inner.read().values().cloned().collect()
    }

    /// Whether any resource is served under `group/version`.
    #[must_use]
    pub fn has_group_version(&self, group: &str, version: &str) -> bool {
        self.inner
            .read()
            .keys()
            .any(|id| id.group == group && id.version == version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_registered_with_their_scope() {
        let reg = Registry::new(builtin_resources());
        assert!(!reg.get("", "v1", "namespaces").unwrap().namespaced);
        assert!(reg.get("", "v1", "pods").unwrap().namespaced);
        let lease = reg.get("coordination.k8s.io", "v1", "leases").unwrap();
        assert_eq!(lease.qualified_plural(), "leases.coordination.k8s.io");
        assert_eq!(lease.api_version(), "coordination.k8s.io/v1");
        assert!(reg.get("", "v1", "nosuch").is_none());
    }
}
