//! Indexed object caches: [`ObjectKey`], `ThreadSafeStore`, `Indexer`, `Lister`.

mod key;

pub use key::{KeyError, KeyFunc, ObjectKey, meta_namespace_key, meta_namespace_key_func};
