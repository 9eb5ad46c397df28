//! The read side of a [`ThreadSafeStore`]: lookups, lists and index queries, each under the
//! read lock and cloning `Arc`s out; and [`KeyListerGetter`], the part of it the FIFOs use.

use std::{borrow::Borrow, hash::Hash, sync::Arc};

use super::ThreadSafeStore;
use crate::store::{IndexError, KeyError, ObjectKey};

/// The read side the FIFOs need from the informer's cache: which objects the consumer "knows".
///
/// client-go's `KeyListerGetter`. [`ThreadSafeStore`] implements it; a non-atomic
/// [`RealFifo`](crate::fifo::RealFifo) and a [`DeltaFifo`](crate::fifo::DeltaFifo) use it to
/// find objects that vanished during a relist and to queue resyncs.
pub trait KeyListerGetter<K>: Send + Sync {
    /// The keys of every known object, in no particular order.
    fn list_keys(&self) -> Vec<ObjectKey>;

    /// The known object under `key`, if any.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;

    /// Every known object with its key, as one consistent snapshot.
    ///
    /// The default calls [`list_keys`](Self::list_keys) then [`get_by_key`](Self::get_by_key)
    /// per key and skips keys that vanished in between; stores override it with a snapshot
    /// taken under one lock.
    fn list_keyed(&self) -> Vec<(ObjectKey, Arc<K>)> {
        self.list_keys()
            .into_iter()
            .filter_map(|key| {
                let obj = self.get_by_key(key.as_str())?;
                Some((key, obj))
            })
            .collect()
    }
}

impl<K: Send + Sync + 'static> ThreadSafeStore<K> {
    /// The stored object with `obj`'s key.
    ///
    /// # Errors
    /// [`KeyError`] when the key cannot be computed.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(&key))
    }

    /// The object stored under `key` (an [`ObjectKey`] or its `ns/name` string).
    pub fn get_by_key<Q>(&self, key: &Q) -> Option<Arc<K>>
    where
        ObjectKey: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.state.read().items.get(key).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        ObjectKey: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.state.read().items.contains_key(key)
    }

    /// Every stored object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.state.read().items.values().cloned().collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.state.read().items.keys().cloned().collect()
    }

    /// The number of stored objects.
    pub fn len(&self) -> usize {
        self.inner.state.read().items.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored objects that have `value` in index `index_name` (client-go's `ByIndex`).
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] when no such index exists.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let state = self.inner.state.read();
        let Some(keys) = state.indices.keys(index_name, value)? else {
            return Ok(Vec::new());
        };
        Ok(keys
            .iter()
            .filter_map(|key| state.items.get(key).cloned())
            .collect())
    }

    /// The keys of the stored objects that have `value` in index `index_name`
    /// (client-go's `IndexKeys`), sorted.
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] when no such index exists.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, IndexError> {
        let state = self.inner.state.read();
        let mut keys: Vec<ObjectKey> = state
            .indices
            .keys(index_name, value)?
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        drop(state);
        keys.sort_unstable();
        Ok(keys)
    }

    /// Every value currently present in index `index_name` (client-go's
    /// `ListIndexFuncValues`), in no particular order; empty for an unknown index, as in
    /// client-go.
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        let state = self.inner.state.read();
        state
            .indices
            .indices
            .get(index_name)
            .map(|index| index.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The stored objects that share at least one value of index `index_name` with `obj`
    /// (client-go's `Index`); `obj` itself need not be stored.
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] when no such index exists.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        let state = self.inner.state.read();
        let values = state.indices.func(index_name)?(obj);
        let Some(index) = state.indices.indices.get(index_name) else {
            return Ok(Vec::new());
        };
        let mut keys: Vec<&ObjectKey> = values
            .iter()
            .filter_map(|value| index.get(value))
            .flatten()
            .collect();
        if values.len() > 1 {
            keys.sort_unstable();
            keys.dedup();
        }
        Ok(keys
            .into_iter()
            .filter_map(|key| state.items.get(key).cloned())
            .collect())
    }

    /// The names of the registered indexes, sorted.
    pub fn indexer_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .inner
            .state
            .read()
            .indices
            .indexers
            .keys()
            .cloned()
            .collect();
        names.sort_unstable();
        names
    }
}

impl<K: Send + Sync + 'static> KeyListerGetter<K> for ThreadSafeStore<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        ThreadSafeStore::list_keys(self)
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        ThreadSafeStore::get_by_key(self, key)
    }

    fn list_keyed(&self) -> Vec<(ObjectKey, Arc<K>)> {
        let state = self.inner.state.read();
        state
            .items
            .iter()
            .map(|(key, obj)| (key.clone(), Arc::clone(obj)))
            .collect()
    }
}
