//! Indexed object caches: [`ObjectKey`] and [`KeyFunc`], the [`ThreadSafeStore`] (alias
//! [`Indexer`]) with named indexes, its read-only view [`Reader`], and the [`Lister`] that
//! reads it with label selectors.
//!
//! The informer owns one [`ThreadSafeStore`] per resource: its FIFO's consumer writes popped
//! deltas into it ([`ThreadSafeStore::apply`] for a batch, a replace for an atomic relist),
//! and everything else reads it. The FIFOs see it only through
//! [`KeyListerGetter`].
//!
//! A store given a [`Sizer`](crate::memory::Sizer) ([`ThreadSafeStore::set_sizer`]) keeps the
//! bytes its objects hold up to date as they come and go ([`ThreadSafeStore::memory`]); see
//! [`crate::memory`].

mod accounting;
mod index;
mod key;
mod lister;
mod reader;
mod reflector_store;
mod selector;
mod state;
mod thread_safe_store;

pub use accounting::entry_overhead;
pub use index::{
    IndexError, IndexFunc, Indexers, NAMESPACE_INDEX, namespace_index_func, namespace_indexers,
};
pub use key::{KeyError, KeyFunc, ObjectKey, meta_namespace_key, meta_namespace_key_func};
pub use lister::{Lister, NamespaceLister};
pub use reader::Reader;
pub use reflector_store::{ReflectorStore, StoreError};
pub use selector::{LabelSelector, SelectorError, matches_labels, parse_label_selector};
pub use thread_safe_store::{
    Indexer, KeyListerGetter, ResourceVersionFunc, ThreadSafeStore, Transaction,
    resource_version_func,
};

#[cfg(test)]
mod tests;
