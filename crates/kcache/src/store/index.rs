//! Named secondary indexes over a store: [`IndexFunc`], [`Indexers`], the ready-made namespace
//! index, and the bookkeeping a [`ThreadSafeStore`](super::ThreadSafeStore) keeps per index.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use kube_core::Resource;

use super::ObjectKey;

/// Computes the values an object is indexed under (client-go's `IndexFunc`).
///
/// An object may have any number of values, including none (it is then absent from the
/// index). The function runs under the store's write lock: keep it cheap, make it
/// deterministic, and never call back into the store from it.
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Index functions by index name (client-go's `Indexers`).
pub type Indexers<K> = HashMap<String, IndexFunc<K>>;

/// The name of the ready-made namespace index (client-go's `NamespaceIndex`).
pub const NAMESPACE_INDEX: &str = "namespace";

/// client-go's `MetaNamespaceIndexFunc`: indexes an object by its namespace (`""` when
/// cluster-scoped).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::store::namespace_index_func;
///
/// let mut cm = ConfigMap::default();
/// cm.metadata.namespace = Some("prod".into());
/// assert_eq!(namespace_index_func::<ConfigMap>()(&cm), vec!["prod".to_string()]);
/// ```
pub fn namespace_index_func<K: Resource + 'static>() -> IndexFunc<K> {
    Arc::new(|obj: &K| vec![obj.meta().namespace.clone().unwrap_or_default()])
}

/// [`Indexers`] holding only the namespace index under [`NAMESPACE_INDEX`].
pub fn namespace_indexers<K: Resource + 'static>() -> Indexers<K> {
    HashMap::from([(NAMESPACE_INDEX.to_owned(), namespace_index_func::<K>())])
}

/// Why an index operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// No indexer is registered under this name.
    #[error("index {0:?} does not exist")]
    UnknownIndex(String),
    /// `add_indexers` was given names that are already registered; nothing was added.
    #[error("indexer conflict: {0:?} already exist")]
    Conflict(Vec<String>),
}

/// One index: indexed value → keys of the objects that have it.
pub(crate) type Index = HashMap<String, HashSet<ObjectKey>>;

/// All indexes of a store, kept consistent with its items.
pub(crate) struct Indices<K> {
    /// Shared so that a `replace` can build new indices outside the lock and detect, under the
    /// lock, whether the indexers changed meanwhile (pointer equality).
    pub(crate) indexers: Arc<Indexers<K>>,
    pub(crate) indices: HashMap<String, Index>,
}

impl<K> Indices<K> {
    pub(crate) fn new(indexers: Indexers<K>) -> Self {
        let indices = indexers
            .keys()
            .map(|name| (name.clone(), Index::new()))
            .collect();
        Self {
            indexers: Arc::new(indexers),
            indices,
        }
    }

    /// Fresh, empty indices for the same indexers.
    pub(crate) fn empty_like(&self) -> Self {
        Self {
            indexers: Arc::clone(&self.indexers),
            indices: self
                .indexers
                .keys()
                .map(|name| (name.clone(), Index::new()))
                .collect(),
        }
    }

    /// Moves `key` from the values of `old` to the values of `new` in every index.
    pub(crate) fn update(&mut self, key: &ObjectKey, old: Option<&K>, new: Option<&K>) {
        let Self { indexers, indices } = self;
        for (name, func) in indexers.iter() {
            let index = match indices.get_mut(name) {
                Some(index) => index,
                None => indices.entry(name.clone()).or_default(),
            };
            update_one(index, func, key, old, new);
        }
    }

    /// Registers new indexers and indexes `items` with them.
    pub(crate) fn add_indexers<'a>(
        &mut self,
        new: Indexers<K>,
        items: impl Iterator<Item = (&'a ObjectKey, &'a Arc<K>)>,
    ) -> Result<(), IndexError>
    where
        K: 'a,
    {
        let mut conflicts: Vec<String> = new
            .keys()
            .filter(|name| self.indexers.contains_key(*name))
            .cloned()
            .collect();
        if !conflicts.is_empty() {
            conflicts.sort();
            return Err(IndexError::Conflict(conflicts));
        }
        let mut fresh: HashMap<String, Index> = new
            .keys()
            .map(|name| (name.clone(), Index::new()))
            .collect();
        for (key, obj) in items {
            for (name, func) in &new {
                if let Some(index) = fresh.get_mut(name) {
                    update_one(index, func, key, None, Some(obj));
                }
            }
        }
        let mut merged: Indexers<K> = (*self.indexers).clone();
        merged.extend(new);
        self.indexers = Arc::new(merged);
        self.indices.extend(fresh);
        Ok(())
    }

    pub(crate) fn func(&self, name: &str) -> Result<&IndexFunc<K>, IndexError> {
        self.indexers
            .get(name)
            .ok_or_else(|| IndexError::UnknownIndex(name.to_owned()))
    }

    /// The keys under `value` in index `name`; `None` when nothing has that value.
    pub(crate) fn keys(
        &self,
        name: &str,
        value: &str,
    ) -> Result<Option<&HashSet<ObjectKey>>, IndexError> {
        self.func(name)?;
        Ok(self.indices.get(name).and_then(|index| index.get(value)))
    }
}

fn update_one<K>(
    index: &mut Index,
    func: &IndexFunc<K>,
    key: &ObjectKey,
    old: Option<&K>,
    new: Option<&K>,
) {
    let old_values = old.map(|o| func(o)).unwrap_or_default();
    let new_values = new.map(|n| func(n)).unwrap_or_default();
    if old_values == new_values {
        return;
    }
    for value in &old_values {
        if new_values.contains(value) {
            continue;
        }
        if let Some(set) = index.get_mut(value) {
            set.remove(key);
            if set.is_empty() {
                index.remove(value);
            }
        }
    }
    for value in new_values {
        index.entry(value).or_default().insert(key.clone());
    }
}
