//! [`Delta`]: one change carried by a FIFO, and its [`DeltaType`].

use std::{fmt, sync::Arc};

use crate::store::ObjectKey;

/// What kind of change a [`Delta`] is (client-go's `DeltaType` constants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// A watch `ADDED` event.
    Added,
    /// A watch `MODIFIED` event.
    Updated,
    /// A watch `DELETED` event, or a tombstone for an object that vanished during a relist.
    Deleted,
    /// The object was in a relist (non-atomic replace, or a [`DeltaFifo`](super::DeltaFifo)
    /// with `emit_replaced`).
    Replaced,
    /// A resync re-delivers a known object (also a relisted object in a legacy
    /// [`DeltaFifo`](super::DeltaFifo)).
    Sync,
    /// A whole relist in one delta (atomic [`RealFifo`](super::RealFifo)).
    ReplacedAll,
    /// A whole resync in one delta (atomic [`RealFifo`](super::RealFifo)).
    SyncAll,
    /// A watch bookmark moved the resourceVersion (atomic [`RealFifo`](super::RealFifo)).
    Bookmark,
}

impl DeltaType {
    /// Whether deltas of this type may share a [`RealFifo`](super::RealFifo) batch with others.
    /// `ReplacedAll`, `SyncAll` and `Bookmark` are always popped alone.
    pub fn is_batchable(self) -> bool {
        matches!(
            self,
            Self::Added | Self::Updated | Self::Deleted | Self::Replaced | Self::Sync
        )
    }
}

/// The payload of a [`Delta`]. Which variant goes with which [`DeltaType`]:
///
/// | `DeltaType` | `DeltaObject` |
/// |---|---|
/// | `Added`, `Updated`, `Replaced`, `Sync` | `Object` |
/// | `Deleted` | `Object` (the final state the watch reported) or `DeletedFinalStateUnknown` |
/// | `ReplacedAll` | `ReplacedAll` |
/// | `SyncAll` | `SyncAll` |
/// | `Bookmark` | `Bookmark` |
pub enum DeltaObject<K> {
    /// One object and its key.
    Object {
        /// The object's key.
        key: ObjectKey,
        /// The object.
        obj: Arc<K>,
    },
    /// A tombstone: the object vanished while the watch was down, so its deletion was inferred
    /// from a relist. `obj` is the last state the cache or queue knew, which may be stale.
    DeletedFinalStateUnknown {
        /// The vanished object's key.
        key: ObjectKey,
        /// Its last known state.
        obj: Arc<K>,
    },
    /// A complete relist: the consumer's content becomes exactly `objects`.
    ReplacedAll {
        /// The listed objects with their keys, in list order.
        objects: Vec<(ObjectKey, Arc<K>)>,
        /// The list's resourceVersion.
        resource_version: String,
    },
    /// A resync of everything the consumer knows.
    SyncAll,
    /// The resourceVersion moved without a change.
    Bookmark {
        /// The bookmark's resourceVersion.
        resource_version: String,
    },
}

/// One change, as a FIFO hands it to its consumer (client-go's `Delta`).
pub struct Delta<K> {
    /// What happened.
    pub kind: DeltaType,
    /// The object(s) it happened to; see [`DeltaObject`] for the pairing with `kind`.
    pub object: DeltaObject<K>,
}

/// The deltas one pop hands to the consumer, oldest first (client-go's `Deltas`).
pub type Deltas<K> = Vec<Delta<K>>;

impl<K> Delta<K> {
    /// A keyed delta (`Added`, `Updated`, `Deleted`, `Replaced`, `Sync`) about `obj`.
    pub fn keyed(kind: DeltaType, key: ObjectKey, obj: Arc<K>) -> Self {
        Self {
            kind,
            object: DeltaObject::Object { key, obj },
        }
    }

    /// A `Deleted` tombstone for `key` with its last known state.
    pub fn tombstone(key: ObjectKey, obj: Arc<K>) -> Self {
        Self {
            kind: DeltaType::Deleted,
            object: DeltaObject::DeletedFinalStateUnknown { key, obj },
        }
    }

    /// The key, for the per-object deltas; `None` for `ReplacedAll`, `SyncAll`, `Bookmark`.
    pub fn key(&self) -> Option<&ObjectKey> {
        match &self.object {
            DeltaObject::Object { key, .. } | DeltaObject::DeletedFinalStateUnknown { key, .. } => {
                Some(key)
            }
            _ => None,
        }
    }

    /// The object, for the per-object deltas (a tombstone's last known state included).
    pub fn object(&self) -> Option<&Arc<K>> {
        match &self.object {
            DeltaObject::Object { obj, .. } | DeltaObject::DeletedFinalStateUnknown { obj, .. } => {
                Some(obj)
            }
            _ => None,
        }
    }

    /// Whether this is a `DeletedFinalStateUnknown` tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self.object, DeltaObject::DeletedFinalStateUnknown { .. })
    }
}

impl<K> Clone for DeltaObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object { key, obj } => Self::Object {
                key: key.clone(),
                obj: Arc::clone(obj),
            },
            Self::DeletedFinalStateUnknown { key, obj } => Self::DeletedFinalStateUnknown {
                key: key.clone(),
                obj: Arc::clone(obj),
            },
            Self::ReplacedAll {
                objects,
                resource_version,
            } => Self::ReplacedAll {
                objects: objects.clone(),
                resource_version: resource_version.clone(),
            },
            Self::SyncAll => Self::SyncAll,
            Self::Bookmark { resource_version } => Self::Bookmark {
                resource_version: resource_version.clone(),
            },
        }
    }
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Self {
            kind: self.kind,
            object: self.object.clone(),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for DeltaObject<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Object { key, obj } => f
                .debug_struct("Object")
                .field("key", key)
                .field("obj", obj)
                .finish(),
            Self::DeletedFinalStateUnknown { key, obj } => f
                .debug_struct("DeletedFinalStateUnknown")
                .field("key", key)
                .field("obj", obj)
                .finish(),
            Self::ReplacedAll {
                objects,
                resource_version,
            } => f
                .debug_struct("ReplacedAll")
                .field("objects", &objects.len())
                .field("resource_version", resource_version)
                .finish(),
            Self::SyncAll => f.write_str("SyncAll"),
            Self::Bookmark { resource_version } => f
                .debug_struct("Bookmark")
                .field("resource_version", resource_version)
                .finish(),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Delta<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delta")
            .field("kind", &self.kind)
            .field("object", &self.object)
            .finish()
    }
}
