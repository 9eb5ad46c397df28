//! The store an informer hands its reflector: its queue, plus a sync check after every write.
//!
//! The informer learns that it has synced when a pop completes. An empty initial list queues
//! nothing to pop in a non-atomic [`RealFifo`](crate::fifo::RealFifo) or a
//! [`DeltaFifo`](crate::fifo::DeltaFifo), so the check also runs after each write the
//! reflector makes (client-go reads `HasSynced` straight off the queue for the same reason).

use std::sync::{Arc, Weak};

use kube_core::Resource;

use super::shared_informer::Inner;
use crate::reflector::{ReflectorStore, StoreError};

pub(crate) struct QueueSink<K> {
    queue: Arc<dyn ReflectorStore<K>>,
    informer: Weak<Inner<K>>,
}

impl<K> QueueSink<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(queue: Arc<dyn ReflectorStore<K>>, informer: &Arc<Inner<K>>) -> Self {
        Self {
            queue,
            informer: Arc::downgrade(informer),
        }
    }

    fn checked(&self, result: Result<(), StoreError>) -> Result<(), StoreError> {
        if let Some(informer) = self.informer.upgrade() {
            informer.note_synced();
        }
        result
    }
}

impl<K> ReflectorStore<K> for QueueSink<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.checked(self.queue.add(obj))
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.checked(self.queue.update(obj))
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.checked(self.queue.delete(obj))
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: String) -> Result<(), StoreError> {
        self.checked(self.queue.replace(list, resource_version))
    }

    fn resync(&self) -> Result<(), StoreError> {
        self.queue.resync()
    }

    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        self.queue.bookmark(resource_version)
    }
}
