//! [`Cached`]: the manager's cache of one type, in lean or typed storage ([`Storage`]), read
//! as typed objects; and [`Lister`], its label-filtered reads.

use std::sync::Arc;

use kcache::{
    SharedIndexInformer,
    memory::MemoryUsage,
    store::{LabelSelector, ObjectKey, Reader},
};
use kcache_client::Compact;
use kube_core::{ObjectMeta, Resource};

use crate::{ApiObject, expectations::MetaReader};

/// How the manager stores the objects of a cached type ([`Config::storage`](super::Config::storage)
/// for every type, [`Cache::storage`](super::Cache::storage) for one).
///
/// Reads through the manager ([`Context::get`](crate::Context::get),
/// [`Context::lister`](crate::Context::lister), [`Context::read`](crate::Context::read),
/// [`Cached::get`]) give typed objects either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Storage {
    /// Each object as its wire bytes (protobuf for built-in kinds) plus its parsed metadata
    /// (`kcache_client::Compact`): several times smaller than the decoded object. Keys,
    /// owner references, selectors and read-your-own-writes read the metadata; a typed read
    /// decodes the object (each read: keep the `Arc` for as long as it is needed). The
    /// default, as for kcache's own informers.
    #[default]
    Lean,
    /// Each object decoded (`Arc<C>`, shared with every reader): reads are free, memory is
    /// the decoded objects'. For a type whose every object is read in full often, or that
    /// needs a [`Cache::transform`](super::Cache::transform).
    Typed,
}

/// The stored form behind a [`Cached`].
enum Inner<C> {
    Typed(SharedIndexInformer<C>),
    Lean(SharedIndexInformer<Compact<C>>),
}

/// The manager's cache of `C` ([`Manager::informer`](super::Manager::informer),
/// [`Manager::cache`](super::Manager::cache)): a shared informer storing lean or typed
/// objects ([`Storage`]), read as typed `Arc<C>`. Cheap to clone.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_runtime::{Manager, manager};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kcache_client::Client::infer().await?;
/// let manager = Manager::new(client, manager::Config::new("demo"))?;
/// let cms = manager.cache::<ConfigMap>(manager::Cache::new().account_memory())?;
/// assert!(cms.is_lean()); // the default storage
/// tokio::spawn(manager.run());
/// cms.wait_for_sync().await;
/// println!("{} ConfigMaps in {:?}", cms.len(), cms.memory());
/// # Ok(()) }
/// ```
pub struct Cached<C> {
    inner: Arc<Inner<C>>,
    namespace: Option<Arc<str>>,
}

impl<C> Clone for Cached<C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            namespace: self.namespace.clone(),
        }
    }
}

impl<C> std::fmt::Debug for Cached<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let storage = match &*self.inner {
            Inner::Typed(_) => Storage::Typed,
            Inner::Lean(_) => Storage::Lean,
        };
        f.debug_struct("Cached")
            .field("kind", &std::any::type_name::<C>())
            .field("storage", &storage)
            .field("namespace", &self.namespace)
            .finish()
    }
}

/// The typed object of a lean one; `None` (logged) when its bytes do not decode.
fn decode<C: ApiObject>(stored: &Compact<C>) -> Option<Arc<C>> {
    match stored.typed() {
        Ok(obj) => Some(Arc::new(obj)),
        Err(error) => {
            let meta = stored.metadata();
            tracing::warn!(
                namespace = meta.namespace.as_deref().unwrap_or(""),
                name = meta.name.as_deref().unwrap_or(""),
                %error,
                "a cached object does not decode; read as absent"
            );
            None
        }
    }
}

impl<C: ApiObject> Cached<C> {
    pub(crate) fn typed(informer: SharedIndexInformer<C>, namespace: Option<&str>) -> Self {
        Self {
            inner: Arc::new(Inner::Typed(informer)),
            namespace: namespace.map(Arc::from),
        }
    }

    pub(crate) fn lean(informer: SharedIndexInformer<Compact<C>>, namespace: Option<&str>) -> Self {
        Self {
            inner: Arc::new(Inner::Lean(informer)),
            namespace: namespace.map(Arc::from),
        }
    }

    /// The namespace the cache lists and watches; `None`: every namespace (always for a
    /// cluster-scoped `C`).
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Whether the objects are stored lean ([`Storage::Lean`]).
    pub fn is_lean(&self) -> bool {
        matches!(&*self.inner, Inner::Lean(_))
    }

    /// The informer, when the storage is typed.
    pub fn typed_informer(&self) -> Option<&SharedIndexInformer<C>> {
        match &*self.inner {
            Inner::Typed(i) => Some(i),
            Inner::Lean(_) => None,
        }
    }

    /// The informer, when the storage is lean (its handlers and listers see
    /// `kcache_client::Compact` objects).
    pub fn lean_informer(&self) -> Option<&SharedIndexInformer<Compact<C>>> {
        match &*self.inner {
            Inner::Typed(_) => None,
            Inner::Lean(i) => Some(i),
        }
    }

    /// Whether the cache has synced (its first list is in).
    pub fn has_synced(&self) -> bool {
        match &*self.inner {
            Inner::Typed(i) => i.has_synced(),
            Inner::Lean(i) => i.has_synced(),
        }
    }

    /// Waits until the cache has synced.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_for_sync(&self) {
        match &*self.inner {
            Inner::Typed(i) => i.wait_for_sync().await,
            Inner::Lean(i) => i.wait_for_sync().await,
        }
    }

    /// The cached object with this key (`namespace/name`, or `name` for a cluster-scoped
    /// `C`), typed: decoded now from lean storage.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<C>> {
        match &*self.inner {
            Inner::Typed(i) => i.indexer().get_by_key(key.as_str()),
            Inner::Lean(i) => i
                .indexer()
                .get_by_key(key.as_str())
                .and_then(|o| decode(&o)),
        }
    }

    /// Every cached object, typed (decoded now from lean storage).
    pub fn list(&self) -> Vec<Arc<C>> {
        self.lister().list(&LabelSelector::default())
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        match &*self.inner {
            Inner::Typed(i) => i.indexer().len(),
            Inner::Lean(i) => i.indexer().len(),
        }
    }

    /// Whether no object is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Label-filtered typed reads of the live cache.
    pub fn lister(&self) -> Lister<C> {
        Lister {
            cache: self.clone(),
            namespace: None,
        }
    }

    /// The objects and bytes the cache holds, when it accounts its memory
    /// ([`Cache::account_memory`](super::Cache::account_memory)).
    pub fn memory(&self) -> Option<MemoryUsage> {
        match &*self.inner {
            Inner::Typed(i) => i.memory(),
            Inner::Lean(i) => i.memory(),
        }
    }

    /// The resourceVersion of the cached object with this key (empty when it has none), if
    /// cached; never decodes.
    pub(crate) fn resource_version(&self, key: &ObjectKey) -> Option<String> {
        let meta = |m: &ObjectMeta| m.resource_version.clone().unwrap_or_default();
        match &*self.inner {
            Inner::Typed(i) => i.indexer().get_by_key(key.as_str()).map(|o| meta(o.meta())),
            Inner::Lean(i) => i
                .indexer()
                .get_by_key(key.as_str())
                .map(|o| meta(o.metadata())),
        }
    }

    /// What read-your-own-writes reads of the cache (metadata only).
    pub(crate) fn meta_reader(&self) -> Arc<dyn MetaReader> {
        match &*self.inner {
            Inner::Typed(i) => Arc::new(i.indexer().clone()),
            Inner::Lean(i) => Arc::new(i.indexer().clone()),
        }
    }

    fn select(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<C>> {
        fn read<S: Resource + Send + Sync + 'static>(
            lister: kcache::store::Lister<S>,
            namespace: Option<&str>,
            selector: &LabelSelector,
        ) -> Vec<Arc<S>> {
            match namespace {
                Some(ns) => lister.namespaced(ns).list(selector),
                None => lister.list(selector),
            }
        }
        match &*self.inner {
            Inner::Typed(i) => read(i.lister(), namespace, selector),
            Inner::Lean(i) => read(i.lister(), namespace, selector)
                .iter()
                .filter_map(|o| decode(o))
                .collect(),
        }
    }
}

impl<S: Resource + Send + Sync + 'static> MetaReader for Reader<S> {
    fn last_sync_resource_version(&self) -> String {
        Reader::last_sync_resource_version(self)
    }

    fn resource_version(&self, key: &str) -> Option<String> {
        self.get_by_key(key)
            .map(|o| o.meta().resource_version.clone().unwrap_or_default())
    }
}

/// Label-filtered typed reads of a manager's cache ([`Context::lister`](crate::Context::lister),
/// [`Cached::lister`]), across namespaces or in one. Objects stored lean are decoded per read.
/// Cheap to clone; reads the live cache.
pub struct Lister<C> {
    cache: Cached<C>,
    namespace: Option<String>,
}

impl<C> Clone for Lister<C> {
    fn clone(&self) -> Self {
        Self {
            cache: self.cache.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

impl<C> std::fmt::Debug for Lister<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lister")
            .field("cache", &self.cache)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<C: ApiObject> Lister<C> {
    /// The objects whose labels match `selector` (in this lister's namespace, if it has one).
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<C>> {
        self.cache.select(self.namespace.as_deref(), selector)
    }

    /// The object called `name` (in this lister's namespace; cluster-wide without one).
    pub fn get(&self, name: &str) -> Option<Arc<C>> {
        self.cache
            .get(&ObjectKey::new(self.namespace.as_deref(), name))
    }

    /// Reads restricted to `namespace` (`""` means all namespaces, as in client-go).
    pub fn namespaced(&self, namespace: &str) -> Self {
        Self {
            cache: self.cache.clone(),
            namespace: Some(namespace.to_owned()).filter(|ns| !ns.is_empty()),
        }
    }
}
