//! The reflector: keeps a [`ReflectorStore`] in sync with a [`crate::ListerWatcher`].

mod store;

pub use store::{ReflectorStore, StoreError};
