//! [`ThreadSafeStore`]: the informer's cache — `Arc<K>` by [`ObjectKey`] plus named indexes.
//!
//! Here the type, its writes (one writer at a time, under the write lock) and memory
//! accounting; its reads in `reads`; how it follows resourceVersions, and the constructors of
//! stores of Kubernetes objects, in `resource_version`.

use std::{
    borrow::Borrow,
    collections::HashMap,
    fmt,
    hash::Hash,
    sync::{Arc, OnceLock},
};

use parking_lot::RwLock;

use super::{
    KeyError, KeyFunc, ObjectKey,
    accounting::entry_size,
    index::{IndexError, Indexers, Indices},
    state::State,
};
use crate::memory::{MemoryUsage, Sizer};
use crate::store::{ReflectorStore, StoreError};

mod reads;
mod resource_version;

pub use reads::KeyListerGetter;
pub use resource_version::{ResourceVersionFunc, resource_version_func};

/// One keyed change of a [`ThreadSafeStore::apply`] batch.
#[derive(Debug, Clone)]
pub enum Transaction<K> {
    /// Store `obj` under `key`, replacing what was there (client-go's Add and Update).
    Upsert(ObjectKey, Arc<K>),
    /// Remove whatever is stored under the key.
    Delete(ObjectKey),
}

impl<K> Transaction<K> {
    /// The key this change is about.
    pub fn key(&self) -> &ObjectKey {
        match self {
            Self::Upsert(key, _) | Self::Delete(key) => key,
        }
    }
}

/// A thread-safe, indexed map of `Arc<K>` by [`ObjectKey`] — client-go's `ThreadSafeStore` and
/// `Indexer` in one type ([`Indexer`] is an alias).
///
/// It is a cheap-`Clone` handle: clones share one store. Objects are shared, never copied:
/// reads clone `Arc`s out and release the lock before returning. Writers take a
/// [`parking_lot::RwLock`] write lock only for the map and index updates themselves; a
/// [`replace`](Self::replace) builds the new map and indexes outside the lock and swaps them in,
/// so readers never wait behind a relist. The only user code run under the lock are the index
/// functions, and, when memory is accounted ([`set_sizer`](Self::set_sizer)), the sizer of the
/// objects that leave the store.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::store::{NAMESPACE_INDEX, ThreadSafeStore};
///
/// let store = ThreadSafeStore::<ConfigMap>::for_resource();
/// let mut cm = ConfigMap::default();
/// cm.metadata.namespace = Some("prod".into());
/// cm.metadata.name = Some("settings".into());
/// store.add(Arc::new(cm))?;
///
/// assert!(store.get_by_key("prod/settings").is_some());
/// assert_eq!(store.by_index(NAMESPACE_INDEX, "prod")?.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ThreadSafeStore<K> {
    inner: Arc<Inner<K>>,
}

/// client-go's name for an indexed store; the same type as [`ThreadSafeStore`].
pub type Indexer<K> = ThreadSafeStore<K>;

struct Inner<K> {
    key_func: KeyFunc<K>,
    /// Set once, under the state's write lock (with `State::bytes`).
    sizer: OnceLock<Sizer<K>>,
    /// Set once; without it, writes by object record no resourceVersion.
    resource_version_of: OnceLock<ResourceVersionFunc<K>>,
    state: RwLock<State<K>>,
}

impl<K> Clone for ThreadSafeStore<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for ThreadSafeStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.read();
        f.debug_struct("ThreadSafeStore")
            .field("len", &state.items.len())
            .field(
                "indexers",
                &state.indices.indexers.keys().collect::<Vec<_>>(),
            )
            .field("resource_version", &state.resource_version)
            .finish()
    }
}

impl<K: Send + Sync + 'static> ThreadSafeStore<K> {
    /// An empty store with the given indexes (none: `Indexers::new()`) for objects of any type,
    /// Kubernetes resources or not, that reads no resourceVersion from them: it records only
    /// replaces and bookmarks until [`set_resource_version_func`](Self::set_resource_version_func)
    /// tells it how. Stores of Kubernetes objects are built by [`new`](Self::new),
    /// [`with_indexers`](Self::with_indexers) or [`for_resource`](Self::for_resource), which
    /// read them as client-go's store does.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache::store::{Indexers, KeyFunc, ObjectKey, ThreadSafeStore};
    ///
    /// let key: KeyFunc<String> = Arc::new(|s: &String| Ok(ObjectKey::new(None, s)));
    /// let store = ThreadSafeStore::without_resource_versions(key, Indexers::new());
    /// store.add(Arc::new("a".to_string()))?;
    /// assert!(store.contains_key("a"));
    /// assert_eq!(store.last_sync_resource_version(), "");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn without_resource_versions(key_func: KeyFunc<K>, indexers: Indexers<K>) -> Self {
        Self {
            inner: Arc::new(Inner {
                key_func,
                sizer: OnceLock::new(),
                resource_version_of: OnceLock::new(),
                state: RwLock::new(State {
                    items: HashMap::new(),
                    indices: Indices::new(indexers),
                    resource_version: String::new(),
                    bytes: None,
                }),
            }),
        }
    }

    /// The store's key for `obj`.
    ///
    /// # Errors
    /// The key function's [`KeyError`].
    pub fn key_of(&self, obj: &K) -> Result<ObjectKey, KeyError> {
        (self.inner.key_func)(obj)
    }

    /// The key function this store was built with.
    pub fn key_func(&self) -> &KeyFunc<K> {
        &self.inner.key_func
    }

    /// Stores `obj` under its key and returns what it replaced. Add and update are the same
    /// operation, as in client-go. When the store reads resourceVersions
    /// ([`set_resource_version_func`](Self::set_resource_version_func)), `obj`'s becomes its
    /// [`last_sync_resource_version`](Self::last_sync_resource_version).
    ///
    /// # Errors
    /// [`KeyError`] when the key cannot be computed; the store is unchanged.
    pub fn add(&self, obj: Arc<K>) -> Result<Option<Arc<K>>, KeyError> {
        let key = self.key_of(&obj)?;
        Ok(self.upsert_keyed(key, obj))
    }

    /// Same as [`add`](Self::add), resourceVersion included.
    ///
    /// # Errors
    /// [`KeyError`] when the key cannot be computed; the store is unchanged.
    pub fn update(&self, obj: Arc<K>) -> Result<Option<Arc<K>>, KeyError> {
        self.add(obj)
    }

    /// Stores `obj` under `key` (already computed) and returns what it replaced; records its
    /// resourceVersion as [`add`](Self::add) does.
    pub fn upsert_keyed(&self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        let size = self.inner.sizer.get().map(|s| entry_size(s, &key, &obj));
        let resource_version = self.resource_version_of(&obj);
        let mut state = self.inner.state.write();
        let old = state.upsert(key, obj, size, self.inner.sizer.get());
        if let Some(rv) = resource_version {
            state.resource_version = rv;
        }
        old
    }

    /// Removes the object with `obj`'s key and returns it. When the store reads
    /// resourceVersions, `obj`'s (the object's final state, usually newer than the stored
    /// one) becomes its [`last_sync_resource_version`](Self::last_sync_resource_version), even
    /// when nothing was stored under the key (client-go's `DeleteWithObject`).
    ///
    /// # Errors
    /// [`KeyError`] when the key cannot be computed; the store is unchanged.
    pub fn delete(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = self.key_of(obj)?;
        let resource_version = self.resource_version_of(obj);
        let mut state = self.inner.state.write();
        let old = state.remove(&key, self.inner.sizer.get());
        if let Some(rv) = resource_version {
            state.resource_version = rv;
        }
        Ok(old)
    }

    /// Removes the object under `key` and returns it. With no object to read it from, the
    /// recorded resourceVersion is left as it is (client-go's `Delete` by key).
    pub fn delete_by_key<Q>(&self, key: &Q) -> Option<Arc<K>>
    where
        ObjectKey: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut state = self.inner.state.write();
        state.remove(key, self.inner.sizer.get())
    }

    /// Applies several changes under one write lock, in order, and returns for each one the
    /// object that was stored under its key just before it (client-go's `Transaction`).
    ///
    /// Readers see either none or all of the batch. When the store reads resourceVersions,
    /// that of the batch's last upserted object that carries one is recorded (a
    /// [`Transaction::Delete`] has no object to read it from).
    pub fn apply(&self, txns: Vec<Transaction<K>>) -> Vec<Option<Arc<K>>> {
        let resource_version = txns.iter().rev().find_map(|txn| match txn {
            Transaction::Upsert(_, obj) => self.resource_version_of(obj),
            Transaction::Delete(_) => None,
        });
        self.apply_at(txns, resource_version)
    }

    /// [`apply`](Self::apply), recording `resource_version` instead (when given and not
    /// empty; `None` records nothing) as the store's
    /// [`last_sync_resource_version`](Self::last_sync_resource_version) in the same write. The
    /// informer applies each [`pop_batch`](crate::fifo::Fifo::pop_batch) through this, with
    /// the resourceVersion of the batch's last object, deleted ones included.
    pub(crate) fn apply_at(
        &self,
        txns: Vec<Transaction<K>>,
        resource_version: Option<String>,
    ) -> Vec<Option<Arc<K>>> {
        let mut previous = Vec::with_capacity(txns.len());
        // New objects are sized before the lock is taken.
        let sizes = super::accounting::upsert_sizes(self.inner.sizer.get(), &txns);
        let mut state = self.inner.state.write();
        let sizer = self.inner.sizer.get();
        if let Some(rv) = resource_version.filter(|rv| !rv.is_empty()) {
            state.resource_version = rv;
        }
        for (i, txn) in txns.into_iter().enumerate() {
            previous.push(match txn {
                Transaction::Upsert(key, obj) => {
                    let size = sizes.get(i).copied().flatten();
                    state.upsert(key, obj, size, sizer)
                }
                Transaction::Delete(key) => state.remove(&key, sizer),
            });
        }
        previous
    }

    /// Makes the store's content exactly `list`, recorded as of `resource_version`.
    ///
    /// # Errors
    /// [`KeyError`] when a key cannot be computed; the store is unchanged.
    pub fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: impl Into<String>,
    ) -> Result<HashMap<ObjectKey, Arc<K>>, KeyError> {
        let keyed = list
            .into_iter()
            .map(|obj| Ok((self.key_of(&obj)?, obj)))
            .collect::<Result<Vec<_>, KeyError>>()?;
        Ok(self.replace_keyed(keyed, resource_version))
    }

    /// [`replace`](Self::replace) with keys already computed. Returns the previous content (the
    /// informer diffs it against the new list to notify deletions and updates). When a key
    /// occurs twice, the later object wins.
    ///
    /// The new map and its indexes are built before the write lock is taken; the lock is held
    /// only to swap them in (or, if indexers were added meanwhile, to rebuild the indexes).
    /// Benchmarks and model tests reach it through `testing::replace_keyed`.
    pub(crate) fn replace_keyed(
        &self,
        list: Vec<(ObjectKey, Arc<K>)>,
        resource_version: impl Into<String>,
    ) -> HashMap<ObjectKey, Arc<K>> {
        let mut indices = self.inner.state.read().indices.empty_like();
        let mut items = HashMap::with_capacity(list.len());
        let sizer = self.inner.sizer.get();
        let mut bytes = sizer.map(|_| 0);
        for (key, obj) in list {
            let old = items.insert(key.clone(), obj);
            let new = &items[&key];
            indices.update(&key, old.as_deref(), Some(new));
            if let (Some(bytes), Some(sizer)) = (&mut bytes, sizer) {
                *bytes += entry_size(sizer, &key, new);
                if let Some(old) = &old {
                    *bytes -= entry_size(sizer, &key, old);
                }
            }
        }
        let mut state = self.inner.state.write();
        if let (None, Some(sizer)) = (bytes, self.inner.sizer.get()) {
            // A sizer was set while we built: size the new content under the lock.
            bytes = Some(items.iter().map(|(k, o)| entry_size(sizer, k, o)).sum());
        }
        state.bytes = bytes;
        if !Arc::ptr_eq(&indices.indexers, &state.indices.indexers) {
            // Indexers were added while we built: index again with the current set.
            indices = state.indices.empty_like();
            for (key, obj) in &items {
                indices.update(key, None, Some(obj));
            }
        }
        let old_indices = std::mem::replace(&mut state.indices, indices);
        state.resource_version = resource_version.into();
        let previous = std::mem::replace(&mut state.items, items);
        drop(state);
        // The old indexes are freed outside the lock.
        drop(old_indices);
        previous
    }

    /// Registers more indexes; objects already stored are indexed at once.
    ///
    /// # Errors
    /// [`IndexError::Conflict`] when a name is already registered; nothing is added.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), IndexError> {
        let mut state = self.inner.state.write();
        let State { items, indices, .. } = &mut *state;
        indices.add_indexers(indexers, items.iter())
    }

    /// Turns memory accounting on: from now on every insert adds `sizer(obj)` plus
    /// [`entry_overhead`](crate::store::entry_overhead) to the store's total and every
    /// removal or replacement subtracts the old object's, under the write lock (see
    /// [`crate::memory`]). The objects already stored are sized once, now. Returns `false`,
    /// changing nothing, when the store already has a sizer (a store has at most one).
    pub fn set_sizer(&self, sizer: Sizer<K>) -> bool {
        let mut state = self.inner.state.write();
        if self.inner.sizer.set(sizer).is_err() {
            return false;
        }
        let sizer = self.inner.sizer.get();
        state.bytes = sizer.map(|s| state.items.iter().map(|(k, o)| entry_size(s, k, o)).sum());
        true
    }

    /// What the store holds, when memory is accounted ([`set_sizer`](Self::set_sizer));
    /// `None` otherwise. Read from the running total, never by walking the store.
    pub fn memory(&self) -> Option<MemoryUsage> {
        let state = self.inner.state.read();
        state.bytes.map(|bytes| MemoryUsage {
            objects: state.items.len(),
            bytes,
        })
    }
}

/// A store used directly as a reflector's sink (no FIFO, no handlers): client-go's
/// `Store` behaviour. `resync` does nothing; `bookmark` records the resourceVersion.
impl<K: Send + Sync + 'static> ReflectorStore<K> for ThreadSafeStore<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        ThreadSafeStore::add(self, obj)?;
        Ok(())
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        ThreadSafeStore::update(self, obj)?;
        Ok(())
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        ThreadSafeStore::delete(self, &obj)?;
        Ok(())
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: String) -> Result<(), StoreError> {
        let previous = ThreadSafeStore::replace(self, list, resource_version)?;
        drop(previous);
        Ok(())
    }

    fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        self.set_resource_version(resource_version);
        Ok(())
    }
}
