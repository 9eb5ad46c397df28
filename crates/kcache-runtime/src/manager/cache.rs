//! [`Cache`]: the settings of the manager's cache of one type (controller-runtime's
//! `cache.ByObject`), given to [`Manager::cache`](super::Manager::cache).

use std::{fmt, sync::Arc};

use super::Storage;

/// How the manager caches one type `C`: label and field selectors (only matching objects
/// are listed, watched and cached), the [`Storage`] (lean or typed), managed-fields
/// stripping, a transform applied before storing, memory accounting. Types without one are
/// cached as the manager's [`Config`](super::Config) says: in its namespace, with its
/// default selectors, storage and
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
    /// `Some(Some(ns))`: only `ns`; `Some(None)`: every namespace; `None`: the manager's.
    pub(crate) namespace: Option<Option<String>>,
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
    /// manager's [`namespace`](super::Config::namespace) (controller-runtime's
    /// `ByObject.Namespaces`, with one namespace). A read outside it is an error naming it.
    /// Ignored for a cluster-scoped `C`.
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
        self.namespace = Some(Some(namespace.into()));
        self
    }

    /// Lists, watches and caches the objects of every namespace, whatever the manager's
    /// [`namespace`](super::Config::namespace).
    #[must_use]
    pub fn all_namespaces(mut self) -> Self {
        self.namespace = Some(None);
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

    /// The storage of this cache, given the manager's default: typed when a transform is set.
    pub(crate) fn effective_storage(&self, default: Storage) -> Storage {
        if self.transform.is_some() {
            Storage::Typed
        } else {
            self.storage.unwrap_or(default)
        }
    }

    /// `label selector "a=b", field selector "c=d"`, or `no selector`: for messages.
    pub(crate) fn describe(&self) -> String {
        let namespace = match &self.namespace {
            Some(Some(ns)) => Some(format!("namespace {ns:?}")),
            Some(None) => Some("all namespaces".to_owned()),
            None => None,
        };
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
