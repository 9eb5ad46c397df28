//! Helpers for the FIFO unit tests: a tiny object type and a readable rendering of deltas.

use std::sync::Arc;

use super::{Delta, DeltaObject, Deltas};
use crate::store::{KeyError, KeyFunc, ObjectKey, ThreadSafeStore};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Obj {
    pub(crate) name: String,
    pub(crate) version: u64,
}

pub(crate) fn obj(name: &str, version: u64) -> Arc<Obj> {
    Arc::new(Obj {
        name: name.to_owned(),
        version,
    })
}

/// Keys by name; an empty name is a key error.
pub(crate) fn key_func() -> KeyFunc<Obj> {
    Arc::new(|o: &Obj| {
        if o.name.is_empty() {
            Err(KeyError::MissingName)
        } else {
            Ok(ObjectKey::new(None, &o.name))
        }
    })
}

pub(crate) fn known(objs: &[(&str, u64)]) -> ThreadSafeStore<Obj> {
    let store = ThreadSafeStore::without_resource_versions(key_func(), Default::default());
    for (name, version) in objs {
        store.add(obj(name, *version)).unwrap();
    }
    store
}

/// `"Added a@1"`, `"Deleted! a@1"` (tombstone), `"ReplacedAll[a@1 b@2]@rv"`, `"SyncAll"`,
/// `"Bookmark@rv"`.
pub(crate) fn render(delta: &Delta<Obj>) -> String {
    match &delta.object {
        DeltaObject::Object { key, obj } => {
            assert_eq!(key.as_str(), obj.name, "delta key matches its object");
            format!("{:?} {}@{}", delta.kind, obj.name, obj.version)
        }
        DeltaObject::DeletedFinalStateUnknown { key, obj } => {
            format!("{:?}! {}@{}", delta.kind, key, obj.version)
        }
        DeltaObject::ReplacedAll {
            objects,
            resource_version,
        } => {
            let objs: Vec<String> = objects
                .iter()
                .map(|(_, o)| format!("{}@{}", o.name, o.version))
                .collect();
            format!("{:?}[{}]@{resource_version}", delta.kind, objs.join(" "))
        }
        DeltaObject::SyncAll => format!("{:?}", delta.kind),
        DeltaObject::Bookmark { resource_version } => {
            format!("{:?}@{resource_version}", delta.kind)
        }
    }
}

pub(crate) fn render_all(deltas: &Deltas<Obj>) -> Vec<String> {
    deltas.iter().map(render).collect()
}
