//! How a [`ThreadSafeStore`] follows resourceVersions: the function that reads one from an
//! object, the store's last-seen resourceVersion, and the constructors of stores of Kubernetes
//! objects, which read them as client-go's store does.

use std::sync::Arc;

use super::ThreadSafeStore;
use crate::store::{Indexers, KeyFunc};

/// Reads the resourceVersion an object carries, so that a [`ThreadSafeStore`] can record the
/// last one it has seen ([`ThreadSafeStore::set_resource_version_func`]). `None` (or an empty
/// string) means the object carries none.
///
/// [`resource_version_func`] reads it from a Kubernetes object's metadata; every store of
/// Kubernetes objects uses it.
pub type ResourceVersionFunc<K> = Arc<dyn Fn(&K) -> Option<&str> + Send + Sync>;

/// The [`ResourceVersionFunc`] of a Kubernetes object: its `metadata.resourceVersion`.
///
/// [`ThreadSafeStore::new`], [`with_indexers`](ThreadSafeStore::with_indexers),
/// [`for_resource`](ThreadSafeStore::for_resource) and so every informer's indexer use it.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::store::resource_version_func;
///
/// let mut cm = ConfigMap::default();
/// cm.metadata.resource_version = Some("42".into());
/// assert_eq!(resource_version_func::<ConfigMap>()(&cm), Some("42"));
/// ```
pub fn resource_version_func<K: kube_core::Resource + 'static>() -> ResourceVersionFunc<K> {
    fn read<K: kube_core::Resource>(obj: &K) -> Option<&str> {
        obj.meta().resource_version.as_deref()
    }
    Arc::new(read::<K>)
}

impl<K: Send + Sync + 'static> ThreadSafeStore<K> {
    /// The last resourceVersion the store has seen (client-go's
    /// `LastStoreSyncResourceVersion`): that of the last [`replace`](Self::replace) or
    /// [`set_resource_version`](Self::set_resource_version) (a bookmark) or, when the store
    /// reads resourceVersions (every store of Kubernetes objects: [`new`](Self::new),
    /// [`with_indexers`](Self::with_indexers), [`for_resource`](Self::for_resource), every
    /// informer's indexer; see
    /// [`set_resource_version_func`](Self::set_resource_version_func)), of the last
    /// object written by object — [`add`](Self::add), [`update`](Self::update),
    /// [`upsert_keyed`](Self::upsert_keyed), [`delete`](Self::delete), an
    /// [`apply`](Self::apply) batch's last upsert — whichever came last. Objects that carry no
    /// resourceVersion and deletions by key leave it as it is. Empty before any of these.
    ///
    /// It is the order of the writes that counts, not the value: a write of an object with an
    /// older resourceVersion than the recorded one still replaces it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::store::ThreadSafeStore;
    ///
    /// let store = ThreadSafeStore::<ConfigMap>::for_resource();
    /// assert_eq!(store.last_sync_resource_version(), "");
    /// store.replace(Vec::new(), "10")?;
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("web".into());
    /// cm.metadata.resource_version = Some("11".into());
    /// store.add(Arc::new(cm.clone()))?;
    /// assert_eq!(store.last_sync_resource_version(), "11");
    /// cm.metadata.resource_version = Some("12".into());
    /// store.delete(&cm)?;
    /// assert_eq!(store.last_sync_resource_version(), "12");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.state.read().resource_version.clone()
    }

    /// Records `resource_version` as the store's sync point (a bookmark).
    pub fn set_resource_version(&self, resource_version: impl Into<String>) {
        self.inner.state.write().resource_version = resource_version.into();
    }

    /// Makes the store read each written object's resourceVersion with `func` and record it
    /// as its [`last_sync_resource_version`](Self::last_sync_resource_version), as client-go's
    /// store does (see that method for which writes count). A store built by
    /// [`without_resource_versions`](Self::without_resource_versions) records only replaces
    /// and bookmarks until this is called. Returns `false`, changing nothing, when the store
    /// already has one (a store has at most one): every store built by [`new`](Self::new),
    /// [`with_indexers`](Self::with_indexers) or [`for_resource`](Self::for_resource) reads
    /// them with [`resource_version_func`].
    pub fn set_resource_version_func(&self, func: ResourceVersionFunc<K>) -> bool {
        self.inner.resource_version_of.set(func).is_ok()
    }

    /// `obj`'s resourceVersion, when the store reads them and it carries one.
    pub(super) fn resource_version_of(&self, obj: &K) -> Option<String> {
        let func = self.inner.resource_version_of.get()?;
        func(obj).filter(|rv| !rv.is_empty()).map(str::to_owned)
    }
}

/// Stores of Kubernetes objects: like client-go's `NewStore` and `NewIndexer`, they record the
/// resourceVersion of every object written ([`resource_version_func`]).
impl<K: kube_core::Resource + Send + Sync + 'static> ThreadSafeStore<K> {
    /// An empty store without indexes that records the resourceVersion of every object
    /// written (client-go's `NewStore`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::store::{ThreadSafeStore, meta_namespace_key_func};
    ///
    /// let store = ThreadSafeStore::<ConfigMap>::new(meta_namespace_key_func());
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("web".into());
    /// cm.metadata.resource_version = Some("11".into());
    /// store.add(Arc::new(cm))?;
    /// assert_eq!(store.last_sync_resource_version(), "11");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(key_func: KeyFunc<K>) -> Self {
        Self::with_indexers(key_func, Indexers::new())
    }

    /// An empty store with the given indexes that records the resourceVersion of every object
    /// written (client-go's `NewIndexer`).
    pub fn with_indexers(key_func: KeyFunc<K>, indexers: Indexers<K>) -> Self {
        let store = Self::without_resource_versions(key_func, indexers);
        store.set_resource_version_func(resource_version_func::<K>());
        store
    }

    /// A store keyed by `namespace/name` ([`meta_namespace_key`](crate::store::meta_namespace_key))
    /// with the namespace index ([`NAMESPACE_INDEX`](crate::store::NAMESPACE_INDEX)), that records
    /// the resourceVersion of every object written ([`resource_version_func`]).
    pub fn for_resource() -> Self {
        Self::with_indexers(
            crate::store::meta_namespace_key_func::<K>(),
            crate::store::namespace_indexers::<K>(),
        )
    }
}
