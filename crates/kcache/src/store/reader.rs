//! [`Reader`]: the read-only view of a [`ThreadSafeStore`] that an informer hands out.

use std::{borrow::Borrow, fmt, hash::Hash, sync::Arc};

use super::{IndexError, KeyError, KeyFunc, KeyListerGetter, ObjectKey, ThreadSafeStore};

/// A read-only view of a [`ThreadSafeStore`]: every read, no write.
///
/// An informer's cache has one writer, the informer itself; what
/// [`SharedIndexInformer::indexer`](crate::informer::SharedIndexInformer::indexer) and
/// [`Lister`](super::Lister) give out is this view, so no reader can put the cache out of step
/// with the server. (kube-runtime splits its reflector store the same way, into a `Writer`
/// and a `Store`.) Cheap to clone: it reads the live store, never a copy.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::store::{Reader, ThreadSafeStore};
///
/// let store = ThreadSafeStore::<ConfigMap>::for_resource();
/// let reader = Reader::from(store.clone());
/// let mut cm = ConfigMap::default();
/// cm.metadata.namespace = Some("prod".into());
/// cm.metadata.name = Some("web".into());
/// store.add(Arc::new(cm))?;
/// assert!(reader.get_by_key("prod/web").is_some(), "the view reads the live store");
/// assert_eq!(reader.by_index("namespace", "prod")?.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It has no method that writes:
///
/// ```compile_fail
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::store::{Reader, ThreadSafeStore};
///
/// let reader = Reader::from(ThreadSafeStore::<ConfigMap>::for_resource());
/// reader.add(Arc::new(ConfigMap::default()));
/// ```
pub struct Reader<K> {
    store: ThreadSafeStore<K>,
}

impl<K> Clone for Reader<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<K> fmt::Debug for Reader<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Reader").field(&self.store).finish()
    }
}

impl<K> From<ThreadSafeStore<K>> for Reader<K> {
    fn from(store: ThreadSafeStore<K>) -> Self {
        Self { store }
    }
}

impl<K: Send + Sync + 'static> Reader<K> {
    /// The store's key for `obj`.
    ///
    /// # Errors
    /// The key function's [`KeyError`].
    pub fn key_of(&self, obj: &K) -> Result<ObjectKey, KeyError> {
        self.store.key_of(obj)
    }

    /// The key function the store was built with.
    pub fn key_func(&self) -> &KeyFunc<K> {
        self.store.key_func()
    }

    /// The stored object with `obj`'s key.
    ///
    /// # Errors
    /// [`KeyError`] when the key cannot be computed.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        self.store.get(obj)
    }

    /// The object stored under `key` (an [`ObjectKey`] or its `ns/name` string).
    pub fn get_by_key<Q>(&self, key: &Q) -> Option<Arc<K>>
    where
        ObjectKey: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.store.get_by_key(key)
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        ObjectKey: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.store.contains_key(key)
    }

    /// Every stored object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.store.list_keys()
    }

    /// The number of stored objects.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// [`ThreadSafeStore::by_index`].
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] when no such index exists.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        self.store.by_index(index_name, value)
    }

    /// [`ThreadSafeStore::index_keys`].
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] when no such index exists.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, IndexError> {
        self.store.index_keys(index_name, value)
    }

    /// [`ThreadSafeStore::list_index_func_values`].
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.store.list_index_func_values(index_name)
    }

    /// [`ThreadSafeStore::index`].
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] when no such index exists.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        self.store.index(index_name, obj)
    }

    /// The names of the registered indexes, sorted.
    pub fn indexer_names(&self) -> Vec<String> {
        self.store.indexer_names()
    }

    /// [`ThreadSafeStore::last_sync_resource_version`].
    pub fn last_sync_resource_version(&self) -> String {
        self.store.last_sync_resource_version()
    }
}

impl<K: Send + Sync + 'static> KeyListerGetter<K> for Reader<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.store.list_keys()
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.store.get_by_key(key)
    }

    fn list_keyed(&self) -> Vec<(ObjectKey, Arc<K>)> {
        KeyListerGetter::list_keyed(&self.store)
    }
}
