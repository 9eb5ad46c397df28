//! [`RecordingStore`]: a [`ReflectorStore`] that records every call, for reflector tests.

use std::{collections::BTreeMap, sync::Arc};

use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::{
    store::{ObjectKey, meta_namespace_key},
    store::{ReflectorStore, StoreError},
};

/// One call made on a [`RecordingStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreOp {
    /// `add` of the object with this key and RV.
    Add(ObjectKey, String),
    /// `update` of the object with this key and RV.
    Update(ObjectKey, String),
    /// `delete` of the object with this key.
    Delete(ObjectKey),
    /// `replace` with this many objects at this RV.
    Replace(usize, String),
    /// `resync`.
    Resync,
    /// `bookmark` at this RV.
    Bookmark(String),
}

/// A [`ReflectorStore`] that applies calls to a map and records them in order.
pub struct RecordingStore<K> {
    inner: Mutex<Inner<K>>,
    changed: Notify,
}

impl<K> std::fmt::Debug for RecordingStore<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("RecordingStore")
            .field("objects", &inner.objects.len())
            .field("ops", &inner.ops)
            .finish()
    }
}

struct Inner<K> {
    objects: BTreeMap<ObjectKey, Arc<K>>,
    ops: Vec<StoreOp>,
}

impl<K: Resource> Default for RecordingStore<K> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                objects: BTreeMap::new(),
                ops: Vec::new(),
            }),
            changed: Notify::new(),
        }
    }
}

impl<K: Resource> RecordingStore<K> {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The calls so far.
    pub fn ops(&self) -> Vec<StoreOp> {
        self.inner.lock().ops.clone()
    }

    /// The current content: key → resourceVersion.
    pub fn snapshot(&self) -> BTreeMap<ObjectKey, String> {
        self.inner
            .lock()
            .objects
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.meta().resource_version.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The current objects.
    pub fn objects(&self) -> Vec<Arc<K>> {
        self.inner.lock().objects.values().cloned().collect()
    }

    /// Waits until `pred` holds over the recorded calls.
    pub async fn wait_for(&self, mut pred: impl FnMut(&[StoreOp]) -> bool) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if pred(&self.inner.lock().ops) {
                return;
            }
            notified.await;
        }
    }

    fn record(
        &self,
        f: impl FnOnce(&mut Inner<K>) -> Result<StoreOp, StoreError>,
    ) -> Result<(), StoreError> {
        let mut inner = self.inner.lock();
        let op = f(&mut inner)?;
        inner.ops.push(op);
        drop(inner);
        self.changed.notify_waiters();
        Ok(())
    }
}

fn rv_of<K: Resource>(obj: &K) -> String {
    obj.meta().resource_version.clone().unwrap_or_default()
}

impl<K: Resource + Send + Sync> ReflectorStore<K> for RecordingStore<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = meta_namespace_key(&*obj)?;
        self.record(|i| {
            let op = StoreOp::Add(key.clone(), rv_of(&*obj));
            i.objects.insert(key, obj);
            Ok(op)
        })
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = meta_namespace_key(&*obj)?;
        self.record(|i| {
            let op = StoreOp::Update(key.clone(), rv_of(&*obj));
            i.objects.insert(key, obj);
            Ok(op)
        })
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = meta_namespace_key(&*obj)?;
        self.record(|i| {
            i.objects.remove(&key);
            Ok(StoreOp::Delete(key))
        })
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: String) -> Result<(), StoreError> {
        let mut objects = BTreeMap::new();
        for obj in list {
            objects.insert(meta_namespace_key(&*obj)?, obj);
        }
        self.record(|i| {
            let op = StoreOp::Replace(objects.len(), resource_version);
            i.objects = objects;
            Ok(op)
        })
    }

    fn resync(&self) -> Result<(), StoreError> {
        self.record(|_| Ok(StoreOp::Resync))
    }

    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        self.record(|_| Ok(StoreOp::Bookmark(resource_version.to_owned())))
    }
}
