//! [`Cache`]: the settings of the manager's cache of one type (controller-runtime's
//! `cache.ByObject`), given to [`Manager::cache`](super::Manager::cache).

use std::{fmt, sync::Arc};

use kcache::{factory::MetaIndexFunc, store::IndexFunc};
use kube_core::ObjectMeta;

use super::{Storage, namespaces::Scope};

/// How the manager caches one type `C`: label and field selectors (only matching objects
/// are listed, watched and cached), the [`Storage`] (lean or typed), managed-fields
/// stripping, a transform applied before storing, memory accounting, the namespaces. Types
/// without one are cached as the manager's [`Config`](super::Config) says: in its namespace
/// or [`namespaces`](super::Config::namespaces), with its default selectors, storage and
/// [`strip_managed_fields`](super::Config::strip_managed_fields).
///
/// A selected cache holds only what its selectors match: a reconcile reading an object
/// outside them finds nothing. [`Context::read`](crate::Context::read) says so in its error,
/// naming the selectors.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_runtime::{Manager, manager};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kcache_client::Client::infer().await?;
/// let manager = Manager::new(client, manager::Config::new("demo").namespace("apps"))?;
/// // Only the ConfigMaps this operator labels, without their annotations.
/// manager.cache::<ConfigMap>(
///     manager::Cache::new()
///         .label_selector("app.kubernetes.io/managed-by=demo")
///         .transform(|mut cm: ConfigMap| {
///             cm.metadata.annotations = None;
///             cm
///         }),
/// )?;
/// # Ok(()) }
/// ```
pub struct Cache<C> {
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    pub(crate) strip_managed_fields: Option<bool>,
    pub(crate) transform: Option<Arc<dyn Fn(C) -> C + Send + Sync>>,
    pub(crate) storage: Option<Storage>,
    pub(crate) account_memory: bool,
    /// The namespaces it lists and watches; `None`: the manager's.
    pub(crate) namespace: Option<Scope>,
    /// Its indexes beside the namespace index, by name.
    pub(crate) indexes: Vec<(String, CacheIndex<C>)>,
}

/// An index of a manager's cache: over the typed object, or over its metadata.
pub(crate) enum CacheIndex<C> {
    /// Over the typed object (decoded to run, from lean storage).
    Typed(IndexFunc<C>),
    /// Over the metadata (never decodes).
    Meta(MetaIndexFunc),
}

impl<C> Default for Cache<C> {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            strip_managed_fields: None,
            transform: None,
            storage: None,
            account_memory: false,
            namespace: None,
            indexes: Vec::new(),
        }
    }
}

impl<C> fmt::Debug for Cache<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("strip_managed_fields", &self.strip_managed_fields)
            .field("transform", &self.transform.is_some())
            .field("storage", &self.storage)
            .field("account_memory", &self.account_memory)
            .field("namespace", &self.namespace)
            .field(
                "indexes",
                &self.indexes.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<C> Cache<C> {
    /// Every object of the type in the manager's namespace, as the manager's defaults say.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists, watches and caches only the objects matching this label selector
    /// (`app=web,tier!=db`), instead of the manager's
    /// [`default_label_selector`](super::Config::default_label_selector).
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Lists, watches and caches only the objects matching this field selector
    /// (`spec.nodeName=node-a`), instead of the manager's
    /// [`default_field_selector`](super::Config::default_field_selector).
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Drops `metadata.managedFields` before storing (default: the manager's
    /// [`strip_managed_fields`](super::Config::strip_managed_fields)).
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = Some(on);
        self
    }

    /// Applies `transform` to every object before it is stored (after managed fields are
    /// stripped): drop what the controller never reads. Reconciles read the transformed
    /// objects. A transform works on the decoded object, so a cache with one stores typed
    /// objects ([`Storage::Typed`]) whatever the manager's default storage.
    #[must_use]
    pub fn transform(mut self, transform: impl Fn(C) -> C + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// Lists, watches and caches the objects of this namespace only, instead of the
    /// manager's [`namespace`](super::Config::namespace) or
    /// [`namespaces`](super::Config::namespaces) (controller-runtime's
    /// `ByObject.Namespaces`, with one namespace): one informer. A read outside it is an
    /// error naming it. Ignored for a cluster-scoped `C`. The same as
    /// [`namespaces`](Self::namespaces) with one namespace.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Secret;
    /// use kcache_runtime::{Manager, manager};
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = kcache_client::Client::infer().await?;
    /// let manager = Manager::new(client, manager::Config::new("demo").namespace("apps"))?;
    /// // The apps' objects in "apps", the credentials they use in "vault".
    /// manager.cache::<Secret>(manager::Cache::new().namespace("vault"))?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(Scope::of([namespace]));
        self
    }

    /// Lists, watches and caches the objects of these namespaces only, instead of the
    /// manager's [`namespace`](super::Config::namespace) or
    /// [`namespaces`](super::Config::namespaces) (controller-runtime's
    /// `ByObject.Namespaces`). Ignored for a cluster-scoped `C`.
    ///
    /// A set of two or more namespaces is one informer per namespace, with this cache's
    /// selectors, storage, stripping, transform and memory accounting (controller-runtime's
    /// multi-namespace cache): one list and one watch per namespace, each cheaper than one
    /// of every namespace when the set is a small part of the cluster. Reads merge them: a
    /// [`Cached::list`](super::Cached::list) concatenates the namespaces', a read in one
    /// namespace reads its informer, a read in a namespace outside the set finds nothing
    /// ([`Context::read`](crate::Context::read) says so in its error, naming the set:
    /// `namespaces ["a", "b"]`). Controllers register their handlers on every informer of
    /// the set, and the manager starts them once every informer has synced.
    ///
    /// One namespace is the same as [`namespace`](Self::namespace) (one informer); an
    /// empty set is every namespace, as [`all_namespaces`](Self::all_namespaces). The
    /// namespaces are kept sorted, each once.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Secret;
    /// use kcache_runtime::{Manager, manager};
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = kcache_client::Client::infer().await?;
    /// let manager = Manager::new(client, manager::Config::new("demo").namespace("apps"))?;
    /// // The apps' objects in "apps", their credentials in "vault" and "certs".
    /// let secrets = manager.cache::<Secret>(manager::Cache::new().namespaces(["vault", "certs"]))?;
    /// assert_eq!(secrets.lean_informers().len(), 2);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn namespaces(mut self, namespaces: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.namespace = Some(Scope::of(namespaces));
        self
    }

    /// Lists, watches and caches the objects of every namespace, whatever the manager's
    /// [`namespace`](super::Config::namespace) or [`namespaces`](super::Config::namespaces).
    #[must_use]
    pub fn all_namespaces(mut self) -> Self {
        self.namespace = Some(Scope::All);
        self
    }

    /// Stores the objects as `storage` says, instead of the manager's
    /// [`storage`](super::Config::storage).
    #[must_use]
    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = Some(storage);
        self
    }

    /// Stores decoded objects ([`Storage::Typed`]): reads are free, memory is the decoded
    /// objects'. For a type whose every object the reconciles read in full, often.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcache_runtime::manager::{Cache, Storage};
    ///
    /// let pods = Cache::<Pod>::new().typed();
    /// assert_eq!(format!("{pods:?}").contains("Some(Typed)"), true);
    /// # let _ = Storage::Lean;
    /// ```
    #[must_use]
    pub fn typed(self) -> Self {
        self.storage(Storage::Typed)
    }

    /// Accounts the memory the cache holds: [`Cached::memory`](super::Cached::memory) and
    /// kcache-metrics' `kcache_informer_cache_bytes` report it. Lean objects are sized by
    /// their bytes and parsed metadata, typed ones by kcache's estimate of the decoded object.
    #[must_use]
    pub fn account_memory(mut self) -> Self {
        self.account_memory = true;
        self
    }

    /// Adds an index named `name` over each object's metadata (labels, annotations, owner
    /// references…), controller-runtime's `IndexField` for what metadata holds: it never
    /// decodes the object, whatever the storage. Read it with
    /// [`Cached::index_keys`](super::Cached::index_keys) or
    /// [`Cached::by_index`](super::Cached::by_index). Every cache also has
    /// `kcache::store::NAMESPACE_INDEX`.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_runtime::manager::Cache;
    ///
    /// let by_owner = Cache::<ConfigMap>::new().meta_index("owner", |meta| {
    ///     let owners = meta.owner_references.iter().flatten();
    ///     owners.map(|o| o.uid.clone()).collect()
    /// });
    /// assert!(format!("{by_owner:?}").contains(r#"indexes: ["owner"]"#));
    /// ```
    #[must_use]
    pub fn meta_index(
        mut self,
        name: impl Into<String>,
        index: impl Fn(&ObjectMeta) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.indexes
            .push((name.into(), CacheIndex::Meta(Arc::new(index))));
        self
    }

    /// Adds an index named `name` over the typed object (`spec.nodeName`, a data key…),
    /// controller-runtime's `IndexField`. In lean storage the object is decoded each time the
    /// index runs (once per add, twice per update, once per delete); an object that does not
    /// decode is in no value of it. Prefer [`meta_index`](Self::meta_index) for metadata.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcache_runtime::manager::Cache;
    ///
    /// let by_node = Cache::<Pod>::new().index("node", |pod: &Pod| {
    ///     let spec = pod.spec.as_ref();
    ///     spec.and_then(|s| s.node_name.clone()).into_iter().collect()
    /// });
    /// assert!(format!("{by_node:?}").contains(r#"indexes: ["node"]"#));
    /// ```
    #[must_use]
    pub fn index(
        mut self,
        name: impl Into<String>,
        index: impl Fn(&C) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.indexes
            .push((name.into(), CacheIndex::Typed(Arc::new(index))));
        self
    }

    /// The storage of this cache, given the manager's default: typed when a transform is set.
    pub(crate) fn effective_storage(&self, default: Storage) -> Storage {
        if self.transform.is_some() {
            Storage::Typed
        } else {
            self.storage.unwrap_or(default)
        }
    }

    /// `namespace "a", label selector "a=b", field selector "c=d"`, or `no selector`: for
    /// messages; the namespaces are the cache's, else `manager_set` (the manager's set, when
    /// it is several namespaces).
    pub(crate) fn describe(&self, manager_set: Option<&Scope>) -> String {
        let namespace = self.namespace.as_ref().or(manager_set).map(Scope::describe);
        let parts: Vec<String> = namespace
            .into_iter()
            .chain(
                [
                    ("label selector", &self.label_selector),
                    ("field selector", &self.field_selector),
                ]
                .into_iter()
                .filter_map(|(what, s)| s.as_ref().map(|s| format!("{what} {s:?}"))),
            )
            .collect();
        if parts.is_empty() {
            "no selector".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::{Cache, Scope};

    #[test]
    fn the_description_names_the_caches_namespaces_else_the_managers_set() {
        let set = Scope::of(["b", "a"]);
        assert_eq!(Cache::<ConfigMap>::new().describe(None), "no selector");
        assert_eq!(
            Cache::<ConfigMap>::new().describe(Some(&set)),
            r#"namespaces ["a", "b"]"#
        );
        let own = Cache::<ConfigMap>::new()
            .namespaces(["c", "d"])
            .label_selector("app=web");
        assert_eq!(
            own.describe(Some(&set)),
            r#"namespaces ["c", "d"], label selector "app=web""#
        );
        assert_eq!(
            Cache::<ConfigMap>::new().namespaces(["c"]).describe(None),
            r#"namespace "c""#
        );
        assert_eq!(
            Cache::<ConfigMap>::new()
                .namespaces(Vec::<String>::new())
                .describe(None),
            "all namespaces"
        );
    }
}
