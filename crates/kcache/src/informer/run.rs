//! The run: start the reflector and the listeners, wait until cancelled, then stop everything
//! in order.
//!
//! There is no process loop of its own: the reflector's writes go through [`Applier`], which
//! queues them in the FIFO and then drains the FIFO on the reflector's own task (apply to the
//! indexer, hand notifications to the listeners). client-go pops its FIFO on a goroutine of
//! its own; here that was one task wake-up per event for work that never blocks (the indexer
//! update and the listeners' unbounded buffers), so it is done by the writer. The FIFO keeps
//! its meaning (its batches, its deltas and its sync point); it is only ever drained at once.

use std::sync::Arc;

use kube_core::Resource;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::{
    SharedIndexInformer,
    shared_informer::{Begun, Inner},
};
use crate::reflector::{ReflectorStore, StoreError};

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Runs the informer until `cancel` fires: the reflector (which also applies its changes
    /// to the cache and hands them to the handlers, see the module notes) and one task per
    /// handler. Returns once all of them have stopped. A second call returns at once.
    ///
    /// # Cancel safety
    /// Dropping the future stops the reflector; handler tasks end when
    /// `cancel` fires.
    pub async fn run(&self, cancel: CancellationToken) {
        let inner = Arc::clone(&self.inner);
        let Some(Begun {
            starter,
            hooks,
            reflector_config,
            tasks,
        }) = inner.begin_run()
        else {
            debug!("informer already started");
            return;
        };
        let reflector_cancel = cancel.child_token();
        let queue: Arc<dyn ReflectorStore<K>> = Arc::new(Applier(Arc::clone(&inner)));
        let (handle, reflector_fut) =
            starter(queue, reflector_config, hooks, reflector_cancel.clone());
        inner.set_reflector(handle);
        let mut reflector_task = tokio::spawn(reflector_fut);
        let reflector_ended = tokio::select! {
            () = cancel.cancelled() => false,
            // The reflector ends only when cancelled; the informer waits for its own cancel.
            _ = &mut reflector_task => true,
        };
        if reflector_ended {
            cancel.cancelled().await;
        }
        reflector_cancel.cancel();
        if !reflector_ended {
            let _ = reflector_task.await;
        }
        inner.end_run();
        tasks.close();
        tasks.wait().await;
        inner.wake_waiters();
    }
}

/// The informer's side of the reflector: each write is queued in the FIFO, which is then
/// drained on the writer's task (the cache is up to date when the write returns). The
/// handlers get a watch event's notifications at the reflector's next
/// [`flush`](ReflectorStore::flush) — once per burst of events read together — and every
/// other write's at once.
struct Applier<K>(Arc<Inner<K>>);

impl<K> Applier<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    fn then_drain(&self, queued: Result<(), StoreError>) -> Result<(), StoreError> {
        queued?;
        self.0.drain();
        Ok(())
    }

    fn then_deliver(&self, queued: Result<(), StoreError>) -> Result<(), StoreError> {
        self.then_drain(queued)?;
        self.0.deliver();
        Ok(())
    }
}

impl<K> ReflectorStore<K> for Applier<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.then_drain(self.0.queue.add(obj))
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.then_drain(self.0.queue.update(obj))
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.then_drain(self.0.queue.delete(obj))
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: String) -> Result<(), StoreError> {
        self.then_deliver(self.0.queue.replace(list, resource_version))
    }

    fn resync(&self) -> Result<(), StoreError> {
        self.then_deliver(self.0.queue.resync())
    }

    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        self.then_deliver(self.0.queue.bookmark(resource_version))
    }

    fn flush(&self) {
        self.0.deliver();
    }
}
