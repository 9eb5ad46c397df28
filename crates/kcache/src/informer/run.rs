//! The run loop: start the reflector and the listeners, pop the FIFO until cancelled, then
//! stop everything in order.

use std::sync::Arc;

use kube_core::Resource;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{Instrument as _, debug};

use super::{SharedIndexInformer, shared_informer::Inner, starter::Hooks};
use crate::{
    fifo::{self, Fifo},
    reflector::ReflectorStore,
};

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Runs the informer until `cancel` fires: the reflector, the FIFO's process loop and one
    /// task per handler. Returns once all of them have stopped. A second call returns at once.
    ///
    /// # Cancel safety
    /// Dropping the future stops the reflector and the process loop; handler tasks end when
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
        let queue: Arc<dyn ReflectorStore<K>> = Arc::new(inner.queue.clone());
        let (handle, reflector_fut) = starter(queue, rconfig, hooks, reflector_cancel.clone());
        *inner.reflector.lock() = Some(handle);
        let reflector_task = tokio::spawn(reflector_fut);
        let process = Arc::clone(&inner)
            .process_loop()
            .instrument(inner.span.clone());
        tokio::select! {
            () = cancel.cancelled() => {}
            () = process => {}
        }
        reflector_cancel.cancel();
        let _ = reflector_task.await;
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

impl<K> Inner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    async fn process_loop(self: Arc<Self>) {
        loop {
            let this = Arc::clone(&self);
            let one_key = self.queue.pops_one_key();
            let popped = self
                .queue
                .pop_batch(move |d, initial| this.handle_deltas(d, initial, one_key))
                .await;
            match popped {
                Ok(()) => {}
                Err(fifo::Error::Closed) => return,
            }
        }
    }
}
