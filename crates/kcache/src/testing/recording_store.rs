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

/// Which write a [`RecordingStore`]'s hook runs before (see [`RecordingStore::with_hook`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// `add`.
    Add,
    /// `update`.
    Update,
    /// `delete`.
    Delete,
    /// `replace`.
    Replace,
    /// `resync`.
    Resync,
    /// `bookmark`.
    Bookmark,
}

/// A hook run before each write; its error fails the write, which is then not recorded.
type Hook = Box<dyn Fn(Write) -> Result<(), StoreError> + Send + Sync>;

/// A [`ReflectorStore`] that applies calls to a map and records them in order.
pub struct RecordingStore<K> {
    inner: Mutex<Inner<K>>,
    changed: Notify,
    hook: Option<Hook>,
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
            hook: None,
        }
    }
}

impl<K: Resource> RecordingStore<K> {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `hook` before every write, which fails with the hook's error (and is not
    /// recorded) when it returns one: a store that fails its second resync, or that reads
    /// the reflector's state at its `replace`.
    ///
    /// ```
    /// use kcache::store::{KeyError, ReflectorStore, StoreError};
    /// use kcache::testing::{RecordingStore, StoreOp, Write};
    ///
    /// let store = RecordingStore::<k8s_openapi::api::core::v1::ConfigMap>::new()
    ///     .with_hook(|write| match write {
    ///         Write::Resync => Err(StoreError::Key(KeyError::MissingName)),
    ///         _ => Ok(()),
    ///     });
    /// assert!(store.resync().is_err());
    /// store.bookmark("7").unwrap();
    /// assert_eq!(store.ops(), [StoreOp::Bookmark("7".into())]);
    /// ```
    #[must_use]
    pub fn with_hook(
        mut self,
        hook: impl Fn(Write) -> Result<(), StoreError> + Send + Sync + 'static,
    ) -> Self {
        self.hook = Some(Box::new(hook));
        self
    }

    fn before(&self, write: Write) -> Result<(), StoreError> {
        self.hook.as_ref().map_or(Ok(()), |hook| hook(write))
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
        self.before(Write::Add)?;
        let key = meta_namespace_key(&*obj)?;
        self.record(|i| {
            let op = StoreOp::Add(key.clone(), rv_of(&*obj));
            i.objects.insert(key, obj);
            Ok(op)
        })
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.before(Write::Update)?;
        let key = meta_namespace_key(&*obj)?;
        self.record(|i| {
            let op = StoreOp::Update(key.clone(), rv_of(&*obj));
            i.objects.insert(key, obj);
            Ok(op)
        })
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.before(Write::Delete)?;
        let key = meta_namespace_key(&*obj)?;
        self.record(|i| {
            i.objects.remove(&key);
            Ok(StoreOp::Delete(key))
        })
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: String) -> Result<(), StoreError> {
        self.before(Write::Replace)?;
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
        self.before(Write::Resync)?;
        self.record(|_| Ok(StoreOp::Resync))
    }

    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        self.before(Write::Bookmark)?;
        self.record(|_| Ok(StoreOp::Bookmark(resource_version.to_owned())))
    }
}
