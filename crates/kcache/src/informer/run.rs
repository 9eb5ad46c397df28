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

use futures::FutureExt as _;
use kube_core::Resource;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{Instrument as _, debug};

use super::{SharedIndexInformer, shared_informer::Inner, starter::Hooks};
use crate::{
    fifo::{self, Fifo},
    reflector::{ReflectorStore, StoreError},
};

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
        let (starter, hooks, tasks) = {
            let mut start = inner.start.lock();
            if start.started || start.stopped {
                debug!("informer already started");
                return;
            }
            let Some(starter) = start.starter.take() else {
                return;
            };
            start.started = true;
            let tasks = TaskTracker::new();
            start.tasks = Some((tasks.clone(), tokio::runtime::Handle::current()));
            let weak = Arc::downgrade(&inner);
            let hooks = Hooks {
                transform: start.transform.clone(),
                error_handler: start.error_handler.clone(),
                should_resync: Arc::new(move || {
                    weak.upgrade().is_some_and(|i| i.processor.should_resync())
                }),
            };
            // Listener tasks, under the start lock so that none is spawned twice.
            for l in inner.processor.listeners() {
                tasks.spawn(l.run().instrument(inner.span.clone()));
            }
            (starter, hooks, tasks)
        };
        let check_period = inner.start.lock().check_period;
        let rconfig = inner.config.reflector.clone().resync_period(check_period);
        let reflector_cancel = cancel.child_token();
        let queue: Arc<dyn ReflectorStore<K>> = Arc::new(Applier(Arc::clone(&inner)));
        let (handle, reflector_fut) = starter(queue, rconfig, hooks, reflector_cancel.clone());
        *inner.reflector.lock() = Some(handle);
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
        inner.queue.close();
        {
            let mut start = inner.start.lock();
            start.stopped = true;
        }
        inner.processor.close_all();
        tasks.close();
        tasks.wait().await;
        inner.sync_notify.notify_waiters();
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

impl<K> Inner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Hands the listeners what the drains queued for them, under the informer's span.
    fn deliver(&self) {
        let _span = self.span.enter();
        self.processor.flush();
    }

    /// Pops and applies everything queued, on the caller's task, under the informer's span;
    /// the notifications wait in the listeners' buffers for the next flush.
    /// `drain_lock` keeps one consumer even if writes ever came from two threads.
    fn drain(&self) {
        let _consumer = self.drain_lock.lock();
        let _span = self.span.enter();
        let one_key = self.queue.pops_one_key();
        loop {
            let popped = self
                .queue
                .pop_batch(|d, initial| self.handle_deltas(d, initial, one_key))
                .now_or_never();
            match popped {
                Some(Ok(())) => {}
                // Nothing queued (the pop would wait), or closed and drained.
                None | Some(Err(fifo::Error::Closed)) => return,
            }
        }
    }
}
