//! The write side a reflector feeds: client-go's `ReflectorStore`, the contract between the
//! reflector and the stores and FIFOs it writes to. It lives beside the store, which the
//! reflector depends on (never the other way round); `kcache::reflector` re-exports it.

use std::sync::Arc;

use super::KeyError;

/// What a [`ReflectorStore`] operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object's key could not be computed; nothing was changed.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The queue was closed; nothing was changed.
    #[error("the queue is closed")]
    Closed,
}

/// The sink of a reflector: every change it observes on the server lands here.
///
/// `RealFifo` and `DeltaFifo` implement it (the informer path), and so can a plain store (a
/// reflector that writes straight into a cache). Implementations must be cheap and must never
/// block on user code: the reflector calls them from its watch loop.
pub trait ReflectorStore<K>: Send + Sync {
    /// An object was added (watch `ADDED`).
    ///
    /// # Errors
    /// [`StoreError`] when the key cannot be computed or the sink is closed.
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError>;

    /// An object was modified (watch `MODIFIED`).
    ///
    /// # Errors
    /// [`StoreError`] when the key cannot be computed or the sink is closed.
    fn update(&self, obj: Arc<K>) -> Result<(), StoreError>;

    /// An object was deleted (watch `DELETED`); `obj` is its final state.
    ///
    /// # Errors
    /// [`StoreError`] when the key cannot be computed or the sink is closed.
    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError>;

    /// The result of a full list: the sink's content becomes exactly `list`, as of
    /// `resource_version`. Objects that vanished are reported as deletions.
    ///
    /// # Errors
    /// [`StoreError`] when a key cannot be computed (nothing is changed) or the sink is closed.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: String) -> Result<(), StoreError>;

    /// Periodic resync: re-deliver known objects (client-go `Resync`).
    ///
    /// # Errors
    /// [`StoreError::Closed`] when the sink is closed.
    fn resync(&self) -> Result<(), StoreError>;

    /// A watch bookmark moved the resourceVersion without a change. Sinks that track
    /// resourceVersions (an atomic `RealFifo`) record it; the default does nothing.
    ///
    /// # Errors
    /// [`StoreError::Closed`] when the sink is closed.
    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        let _ = resource_version;
        Ok(())
    }

    /// The reflector has handed over every watch event it had read and is about to wait for
    /// more (or its watch ended): a sink that defers work per burst of events (the informer
    /// wakes its handlers once per burst, not once per event) does it now. The default does
    /// nothing.
    fn flush(&self) {}
}
