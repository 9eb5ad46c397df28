//! The store's state under its lock: the entries, their indexes, the last-sync
//! resourceVersion and the memory total, with the single-entry writes that keep them together.

use std::{borrow::Borrow, collections::HashMap, hash::Hash, sync::Arc};

use super::{ObjectKey, accounting::entry_size, index::Indices};
use crate::memory::Sizer;

/// What a [`ThreadSafeStore`](super::ThreadSafeStore) keeps under its lock.
pub(super) struct State<K> {
    pub(super) items: HashMap<ObjectKey, Arc<K>>,
    pub(super) indices: Indices<K>,
    pub(super) resource_version: String,
    /// Bytes held by the entries, when memory is accounted (`Some` exactly when the store's
    /// sizer is set).
    pub(super) bytes: Option<usize>,
}

impl<K> State<K> {
    /// Stores `obj` under `key`; `size` is its entry's size when already computed, `sizer`
    /// the store's (read under the write lock this runs under).
    pub(super) fn upsert(
        &mut self,
        key: ObjectKey,
        obj: Arc<K>,
        size: Option<usize>,
        sizer: Option<&Sizer<K>>,
    ) -> Option<Arc<K>> {
        let old = self.items.insert(key.clone(), Arc::clone(&obj));
        self.indices.update(&key, old.as_deref(), Some(&obj));
        if let (Some(bytes), Some(sizer)) = (&mut self.bytes, sizer) {
            *bytes += size.unwrap_or_else(|| entry_size(sizer, &key, &obj));
            if let Some(old) = &old {
                *bytes = bytes.saturating_sub(entry_size(sizer, &key, old));
            }
        }
        old
    }

    /// Removes the entry under `key`, subtracting its size.
    pub(super) fn remove<Q>(&mut self, key: &Q, sizer: Option<&Sizer<K>>) -> Option<Arc<K>>
    where
        ObjectKey: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (key, old) = self.items.remove_entry(key)?;
        self.indices.update(&key, Some(&old), None);
        if let (Some(bytes), Some(sizer)) = (&mut self.bytes, sizer) {
            *bytes = bytes.saturating_sub(entry_size(sizer, &key, &old));
        }
        Some(old)
    }
}
