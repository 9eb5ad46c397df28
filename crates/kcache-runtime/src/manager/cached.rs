//! [`Cached`]: the manager's cache of one type, in lean or typed storage ([`Storage`]), read
//! as typed objects; and [`Lister`], its label-filtered reads.

use std::sync::Arc;

use futures::future::join_all;
use kcache::{
    SharedIndexInformer,
    memory::MemoryUsage,
    store::{IndexError, LabelSelector, ObjectKey, Reader},
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

/// The stored form behind a [`Cached`]: one informer, or one per namespace of a set (in
/// the order of [`Cached::namespaces`]).
enum Inner<C> {
    Typed(Vec<SharedIndexInformer<C>>),
    Lean(Vec<SharedIndexInformer<Compact<C>>>),
}

/// The manager's cache of `C` ([`Manager::informer`](super::Manager::informer),
/// [`Manager::cache`](super::Manager::cache)): a shared informer storing lean or typed
/// objects ([`Storage`]), read as typed `Arc<C>`. Cheap to clone.
///
/// A cache of a set of namespaces ([`Cache::namespaces`](super::Cache::namespaces),
/// [`Config::namespaces`](super::Config::namespaces)) is one informer per namespace;
/// its reads merge them: [`get`](Self::get) reads the informer of the key's namespace,
/// [`list`](Self::list), [`len`](Self::len) and [`memory`](Self::memory) add up every
/// namespace's, a [`Lister`] restricted to one namespace reads that one's, and a namespace
/// outside the set holds nothing. [`typed_informers`](Self::typed_informers) and
/// [`lean_informers`](Self::lean_informers) give each informer.
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
    /// `None`: every namespace; else the namespaces, sorted, one informer each when two or
    /// more.
    namespaces: Option<Arc<[String]>>,
}

impl<C> Clone for Cached<C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            namespaces: self.namespaces.clone(),
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
            .field("namespaces", &self.namespaces)
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

/// The sum of the informers' memory, when they account it.
fn total_memory<S: Resource + Clone + Send + Sync + 'static>(
    informers: &[SharedIndexInformer<S>],
) -> Option<MemoryUsage> {
    informers.iter().try_fold(MemoryUsage::default(), |sum, i| {
        i.memory().map(|m| MemoryUsage {
            objects: sum.objects + m.objects,
            bytes: sum.bytes + m.bytes,
        })
    })
}

impl<C: ApiObject> Cached<C> {
    /// A cache over `informers` of `namespaces` (`None`: one informer of every namespace;
    /// else as many informers as namespaces, in their order, or one for one namespace).
    pub(crate) fn typed(
        informers: Vec<SharedIndexInformer<C>>,
        namespaces: Option<Vec<String>>,
    ) -> Self {
        Self::new(Inner::Typed(informers), namespaces)
    }

    /// [`typed`](Self::typed), stored lean.
    pub(crate) fn lean(
        informers: Vec<SharedIndexInformer<Compact<C>>>,
        namespaces: Option<Vec<String>>,
    ) -> Self {
        Self::new(Inner::Lean(informers), namespaces)
    }

    fn new(inner: Inner<C>, namespaces: Option<Vec<String>>) -> Self {
        let count = match &inner {
            Inner::Typed(i) => i.len(),
            Inner::Lean(i) => i.len(),
        };
        debug_assert!(
            count == 1 || namespaces.as_ref().is_some_and(|ns| ns.len() == count),
            "one informer, or one per namespace"
        );
        Self {
            inner: Arc::new(inner),
            namespaces: namespaces.map(Arc::from),
        }
    }

    /// The namespace the cache lists and watches when it is one namespace; `None` for every
    /// namespace (always for a cluster-scoped `C`) or a set of several (see
    /// [`namespaces`](Self::namespaces)).
    pub fn namespace(&self) -> Option<&str> {
        match self.namespaces.as_deref() {
            Some([one]) => Some(one),
            _ => None,
        }
    }

    /// The namespaces the cache lists and watches, sorted: one, or a set with one informer
    /// each ([`Cache::namespaces`](super::Cache::namespaces)); `None` for every namespace
    /// (always for a cluster-scoped `C`).
    pub fn namespaces(&self) -> Option<&[String]> {
        self.namespaces.as_deref()
    }

    /// Whether the cache holds the objects of `namespace` (`None`: a cluster-scoped object,
    /// or reads across namespaces).
    pub(crate) fn covers(&self, namespace: Option<&str>) -> bool {
        match (self.namespaces.as_deref(), namespace) {
            (None, _) => true,
            (Some(set), Some(ns)) => set.iter().any(|s| s == ns),
            (Some(_), None) => false,
        }
    }

    /// Which informer holds the objects of `namespace`: the only one, or the set's one for
    /// it (`None` outside the set).
    fn slot(&self, namespace: Option<&str>) -> Option<usize> {
        match self.namespaces.as_deref() {
            Some(set) if set.len() > 1 => {
                let ns = namespace?;
                set.iter().position(|s| s == ns)
            }
            _ => Some(0),
        }
    }

    /// Whether the objects are stored lean ([`Storage::Lean`]).
    pub fn is_lean(&self) -> bool {
        matches!(&*self.inner, Inner::Lean(_))
    }

    /// The informer, when the storage is typed and the cache is one informer (every
    /// namespace, or one); `None` for a set of several namespaces, whose informers
    /// [`typed_informers`](Self::typed_informers) gives. Index reads in any storage and
    /// across a set: [`index_keys`](Self::index_keys), [`by_index`](Self::by_index).
    pub fn typed_informer(&self) -> Option<&SharedIndexInformer<C>> {
        match self.typed_informers() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// The informer, when the storage is lean and the cache is one informer (its handlers and
    /// listers see `kcache_client::Compact` objects); `None` for a set of several namespaces,
    /// whose informers [`lean_informers`](Self::lean_informers) gives.
    pub fn lean_informer(&self) -> Option<&SharedIndexInformer<Compact<C>>> {
        match self.lean_informers() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Every informer of the cache when the storage is typed (empty when lean): one, or one
    /// per namespace of a set, in the order of [`namespaces`](Self::namespaces).
    pub fn typed_informers(&self) -> &[SharedIndexInformer<C>] {
        match &*self.inner {
            Inner::Typed(i) => i,
            Inner::Lean(_) => &[],
        }
    }

    /// Every informer of the cache when the storage is lean (empty when typed): one, or one
    /// per namespace of a set, in the order of [`namespaces`](Self::namespaces).
    pub fn lean_informers(&self) -> &[SharedIndexInformer<Compact<C>>] {
        match &*self.inner {
            Inner::Typed(_) => &[],
            Inner::Lean(i) => i,
        }
    }

    /// Whether the cache has synced (the first list of each of its informers is in).
    pub fn has_synced(&self) -> bool {
        match &*self.inner {
            Inner::Typed(i) => i.iter().all(SharedIndexInformer::has_synced),
            Inner::Lean(i) => i.iter().all(SharedIndexInformer::has_synced),
        }
    }

    /// Waits until the cache has synced (every informer of a set).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_for_sync(&self) {
        match &*self.inner {
            Inner::Typed(i) => join_all(i.iter().map(SharedIndexInformer::wait_for_sync)).await,
            Inner::Lean(i) => join_all(i.iter().map(SharedIndexInformer::wait_for_sync)).await,
        };
    }

    /// The cached object with this key (`namespace/name`, or `name` for a cluster-scoped
    /// `C`), typed: decoded now from lean storage. `None` for a namespace outside the cache's.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<C>> {
        let slot = self.slot(key.namespace())?;
        match &*self.inner {
            Inner::Typed(i) => i[slot].indexer().get_by_key(key.as_str()),
            Inner::Lean(i) => i[slot]
                .indexer()
                .get_by_key(key.as_str())
                .and_then(|o| decode(&o)),
        }
    }

    /// Every cached object, typed (decoded now from lean storage); a set's namespaces one
    /// after the other.
    pub fn list(&self) -> Vec<Arc<C>> {
        self.lister().list(&LabelSelector::default())
    }

    /// How many objects are cached (in every namespace of a set).
    pub fn len(&self) -> usize {
        match &*self.inner {
            Inner::Typed(i) => i.iter().map(|i| i.indexer().len()).sum(),
            Inner::Lean(i) => i.iter().map(|i| i.indexer().len()).sum(),
        }
    }

    /// Whether no object is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys of the cached objects whose index `index` holds `value` (a set's namespaces
    /// one after the other), without decoding: an index set with
    /// [`Cache::meta_index`](super::Cache::meta_index) or [`Cache::index`](super::Cache::index),
    /// or `kcache::store::NAMESPACE_INDEX`. controller-runtime's `MatchingFields`.
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] for an index the cache does not have.
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<ObjectKey>, IndexError> {
        fn keys<S: Resource + Clone + Send + Sync + 'static>(
            informers: &[SharedIndexInformer<S>],
            index: &str,
            value: &str,
        ) -> Result<Vec<ObjectKey>, IndexError> {
            let mut all = Vec::new();
            for informer in informers {
                all.extend(informer.indexer().index_keys(index, value)?);
            }
            Ok(all)
        }
        match &*self.inner {
            Inner::Typed(i) => keys(i, index, value),
            Inner::Lean(i) => keys(i, index, value),
        }
    }

    /// The cached objects whose index `index` holds `value`, typed (decoded now from lean
    /// storage); see [`index_keys`](Self::index_keys).
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] for an index the cache does not have.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<C>>, IndexError> {
        let mut all = Vec::new();
        match &*self.inner {
            Inner::Typed(informers) => {
                for informer in informers {
                    all.extend(informer.indexer().by_index(index, value)?);
                }
            }
            Inner::Lean(informers) => {
                for informer in informers {
                    let stored = informer.indexer().by_index(index, value)?;
                    all.extend(stored.iter().filter_map(|o| decode(o)));
                }
            }
        }
        Ok(all)
    }

    /// Label-filtered typed reads of the live cache.
    pub fn lister(&self) -> Lister<C> {
        Lister {
            cache: self.clone(),
            namespace: None,
        }
    }

    /// The objects and bytes the cache holds (added up over a set's informers), when it
    /// accounts its memory ([`Cache::account_memory`](super::Cache::account_memory)).
    pub fn memory(&self) -> Option<MemoryUsage> {
        match &*self.inner {
            Inner::Typed(i) => total_memory(i),
            Inner::Lean(i) => total_memory(i),
        }
    }

    /// The resourceVersion of the cached object with this key (empty when it has none), if
    /// cached; never decodes.
    pub(crate) fn resource_version(&self, key: &ObjectKey) -> Option<String> {
        let slot = self.slot(key.namespace())?;
        let meta = |m: &ObjectMeta| m.resource_version.clone().unwrap_or_default();
        match &*self.inner {
            Inner::Typed(i) => i[slot]
                .indexer()
                .get_by_key(key.as_str())
                .map(|o| meta(o.meta())),
            Inner::Lean(i) => i[slot]
                .indexer()
                .get_by_key(key.as_str())
                .map(|o| meta(o.metadata())),
        }
    }

    /// What read-your-own-writes reads of the cache of `namespace`'s objects (metadata
    /// only); `None` for a namespace outside the cache's.
    pub(crate) fn meta_reader(&self, namespace: Option<&str>) -> Option<Arc<dyn MetaReader>> {
        let slot = self.slot(namespace)?;
        Some(match &*self.inner {
            Inner::Typed(i) => Arc::new(i[slot].indexer().clone()),
            Inner::Lean(i) => Arc::new(i[slot].indexer().clone()),
        })
    }

    fn select(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<C>> {
        fn read<S: Resource + Clone + Send + Sync + 'static>(
            informers: &[SharedIndexInformer<S>],
            slot: Option<usize>,
            namespace: Option<&str>,
            selector: &LabelSelector,
        ) -> Vec<Arc<S>> {
            match (namespace, slot) {
                (Some(ns), Some(slot)) => informers[slot].lister().namespaced(ns).list(selector),
                (Some(_), None) => Vec::new(),
                (None, _) => informers
                    .iter()
                    .flat_map(|i| i.lister().list(selector))
                    .collect(),
            }
        }
        let slot = self.slot(namespace);
        match &*self.inner {
            Inner::Typed(i) => read(i, slot, namespace, selector),
            Inner::Lean(i) => read(i, slot, namespace, selector)
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
