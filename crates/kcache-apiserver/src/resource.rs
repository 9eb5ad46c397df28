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
    /// The verbs served (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`); a request for another answers 405 MethodNotAllowed, as
    /// kube-apiserver does.
    pub verbs: Vec<String>,
    /// Categories advertised in discovery (`all` makes `kubectl get all` list it).
    pub categories: Vec<String>,
    /// The `storageVersionHash` advertised in discovery, when known.
    pub storage_version_hash: Option<String>,
}

/// The verbs of a resource with full CRUD.
const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The subresources this server implements: `status`, `scale` (an `autoscaling/v1` Scale
/// view), `finalize` (namespaces), `eviction`, `binding`, `ephemeralcontainers` and `resize`
/// (pods), `token` (service accounts) and `approval` (CertificateSigningRequests). Other
/// subresources kube-apiserver lists (`pods/log`, `exec`, `proxy`, ...) need a kubelet and
/// are not served.
pub const SERVED_SUBRESOURCES: [&str; 9] = [
    "status",
    "scale",
    "finalize",
    "eviction",
    "binding",
    "ephemeralcontainers",
    "resize",
    "token",
    "approval",
];

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
            verbs: ALL_VERBS.iter().map(|v| (*v).to_owned()).collect(),
            categories: Vec::new(),
            storage_version_hash: None,
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

    /// Serves only these verbs (builder style).
    #[must_use]
    pub fn with_verbs(mut self, verbs: &[&str]) -> Self {
        self.verbs = verbs.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Adds discovery categories (builder style).
    #[must_use]
    pub fn with_categories(mut self, categories: &[&str]) -> Self {
        self.categories = categories.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Whether `verb` is served.
    #[must_use]
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// Whether the subresource `sub` is served.
    #[must_use]
    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.iter().any(|s| s == sub)
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

/// kube-apiserver v1.36.5's discovery, dumped into a data file (see its `source` field):
/// every group, version, resource and subresource with its verbs, names and kinds, and the
/// registry strategies' generation and unconditional-update facts.
const DISCOVERY_TABLE: &str = include_str!("../data/discovery-v1.36.5.json");

/// The parsed discovery table.
#[derive(Debug)]
pub(crate) struct Table {
    /// Groups in kube-apiserver's order (core first); versions preferred first.
    pub(crate) groups: Vec<TableGroup>,
    tracks_generation: Vec<String>,
    conditional_update_only: Vec<String>,
}

/// One group of the table.
#[derive(Debug)]
pub(crate) struct TableGroup {
    /// The group name (empty for core).
    pub(crate) name: String,
    /// `(version, discovery entries of /api/<v> or /apis/<g>/<v>)`, preferred first.
    pub(crate) versions: Vec<(String, Vec<serde_json::Map<String, serde_json::Value>>)>,
}

fn parse_table() -> Table {
    use serde_json::Value;
    let doc: Value = serde_json::from_str(DISCOVERY_TABLE).unwrap_or(Value::Null);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let groups = doc["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            let preferred = g["preferredVersion"].as_str().unwrap_or_default();
            let mut versions: Vec<(String, Vec<serde_json::Map<String, Value>>)> = g["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| {
                    let entries = v["resources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r.as_object().cloned())
                        .collect();
                    (
                        v["version"].as_str().unwrap_or_default().to_owned(),
                        entries,
                    )
                })
                .collect();
            versions.sort_by_key(|(v, _)| v != preferred);
            TableGroup {
                name: g["name"].as_str().unwrap_or_default().to_owned(),
                versions,
            }
        })
        .collect();
    Table {
        groups,
        tracks_generation: strings(&doc["strategies"]["tracksGeneration"]),
        conditional_update_only: strings(&doc["strategies"]["conditionalUpdateOnly"]),
    }
}

/// kube-apiserver's discovery table, parsed once.
pub(crate) fn table() -> &'static Table {
    static TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(parse_table);
    &TABLE
}

impl Table {
    /// The discovery entry of `name` (`pods` or `pods/status`) in `group/version`.
    pub(crate) fn entry(
        &self,
        group: &str,
        version: &str,
        name: &str,
    ) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.groups
            .iter()
            .find(|g| g.name == group)?
            .versions
            .iter()
            .find(|(v, _)| v == version)?
            .1
            .iter()
            .find(|e| e.get("name").and_then(serde_json::Value::as_str) == Some(name))
    }

    /// Where `group` comes in kube-apiserver's group order (`None`: not a built-in group).
    pub(crate) fn group_rank(&self, group: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.name == group)
    }

    /// Where `version` comes in `group`'s version order (preferred first).
    pub(crate) fn version_rank(&self, group: &str, version: &str) -> Option<usize> {
        self.groups
            .iter()
            .find(|g| g.name == group)?
            .versions
            .iter()
            .position(|(v, _)| v == version)
    }
}

fn info_from_entry(
    table: &Table,
    group: &str,
    version: &str,
    entry: &serde_json::Map<String, serde_json::Value>,
    subs: &[String],
) -> ResourceInfo {
    use serde_json::Value;
    let s = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
    let list = |k: &str| -> Vec<String> {
        entry
            .get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let plural = s("name");
    let qualified = if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    };
    ResourceInfo {
        group: group.to_owned(),
        version: version.to_owned(),
        plural: plural.to_owned(),
        singular: s("singularName").to_owned(),
        kind: s("kind").to_owned(),
        namespaced: entry.get("namespaced").and_then(Value::as_bool) == Some(true),
        short_names: list("shortNames"),
        subresources: subs
            .iter()
            .filter(|sub| SERVED_SUBRESOURCES.contains(&sub.as_str()))
            .cloned()
            .collect(),
        tracks_generation: table.tracks_generation.contains(&qualified),
        unconditional_update: !table.conditional_update_only.contains(&qualified),
        schema: None,
        verbs: list("verbs"),
        categories: list("categories"),
        storage_version_hash: entry
            .get("storageVersionHash")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

/// The resource types registered at start: every resource kube-apiserver v1.36.5's discovery
/// lists (68 in 21 groups), generated from its discovery documents (`data/` of this crate),
/// with the subresources this server implements ([`SERVED_SUBRESOURCES`]).
#[must_use]
pub fn builtin_resources() -> Vec<ResourceInfo> {
    let table = table();
    let mut out = Vec::new();
    for g in &table.groups {
        for (version, entries) in &g.versions {
            for entry in entries {
                let name = entry
                    .get("name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default();
                if name.is_empty() || name.contains('/') {
                    continue;
                }
                let prefix = format!("{name}/");
                let subs: Vec<String> = entries
                    .iter()
                    .filter_map(|e| e.get("name").and_then(serde_json::Value::as_str))
                    .filter_map(|n| n.strip_prefix(&prefix))
                    .map(str::to_owned)
                    .collect();
                out.push(info_from_entry(table, &g.name, version, entry, &subs));
            }
        }
    }
    out
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

    #[test]
    fn the_generated_table_serves_every_upstream_resource() {
        let all = builtin_resources();
        assert_eq!(all.len(), 68, "kube-apiserver v1.36.5 lists 68 resources");
        let reg = Registry::new(all);
        let nodes = reg.get("", "v1", "nodes").unwrap();
        assert!(!nodes.namespaced);
        assert_eq!(nodes.short_names, ["no"]);
        assert_eq!(nodes.subresources, ["status"]);
        let pods = reg.get("", "v1", "pods").unwrap();
        assert!(pods.tracks_generation);
        assert_eq!(pods.categories, ["all"]);
        for sub in [
            "binding",
            "eviction",
            "ephemeralcontainers",
            "resize",
            "status",
        ] {
            assert!(pods.has_subresource(sub), "pods/{sub}");
        }
        assert!(!pods.has_subresource("log"));
        let sa = reg.get("", "v1", "serviceaccounts").unwrap();
        assert!(sa.has_subresource("token"));
        let csr = reg
            .get("certificates.k8s.io", "v1", "certificatesigningrequests")
            .unwrap();
        assert!(csr.has_subresource("approval") && csr.has_subresource("status"));
        let review = reg
            .get("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
            .unwrap();
        assert_eq!(review.verbs, ["create"]);
        for (g, p) in [
            ("rbac.authorization.k8s.io", "clusterroles"),
            ("rbac.authorization.k8s.io", "roles"),
            ("rbac.authorization.k8s.io", "rolebindings"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ] {
            assert!(reg.get(g, "v1", p).is_some(), "{p}.{g}");
        }
        let lease = reg.get("coordination.k8s.io", "v1", "leases").unwrap();
        assert!(!lease.unconditional_update && !lease.tracks_generation);
        let ns = reg.get("", "v1", "namespaces").unwrap();
        assert!(!ns.allows("deletecollection"));
        assert_eq!(ns.subresources, ["finalize", "status"]);
        assert_eq!(table().version_rank("autoscaling", "v2"), Some(0));
    }
}
