//! Which built-in work queue a controller uses ([`WorkQueueKind`]) and the controller's handle on
//! its queue, whichever it is ([`WorkQueue`]).

use std::{collections::HashMap, fmt, future::Future, sync::Arc, time::Duration};

use kube_core::Resource;
use parking_lot::Mutex;

use super::config::Config;
use crate::{
    store::ObjectKey,
    workqueue::{
        DelayingInterface, Driver, Interface, PriorityQueue, RateLimitingInterface,
        RateLimitingQueue, RateLimitingQueueConfig,
        priority::{self, AddConfig},
    },
};

/// The kind of work queue behind a [`Controller`](super::Controller), set with
/// [`Config::queue`].
///
/// ```
/// use kcache::controller::{Config, WorkQueueKind};
///
/// let config = Config::default().queue(WorkQueueKind::Priority);
/// assert_eq!(config.queue, WorkQueueKind::Priority);
/// assert_eq!(Config::default().queue, WorkQueueKind::RateLimiting);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkQueueKind {
    /// client-go's [`RateLimitingQueue`]: keys are reconciled in the order they were queued.
    #[default]
    RateLimiting,
    /// A [`PriorityQueue`] (controller-runtime ≥ 0.23's default): objects of the informers'
    /// initial lists and resyncs (an update whose old and new objects have the same
    /// resourceVersion, which includes unchanged objects of a relist) are queued at
    /// [`priority::LOW`], every other change at [`priority::NORMAL`], so an object created
    /// right after a large relist is reconciled before the relisted ones. A key queued twice
    /// keeps the higher priority. A retry after a failed reconcile (backoff or a delay from
    /// the error policy) or an [`Action::RequeueAfter`](super::Action::RequeueAfter) keeps the
    /// priority the key was reconciled at, as in controller-runtime; an
    /// [`Action::Requeue`](super::Action::Requeue) queues it at [`priority::NORMAL`].
    Priority,
}

/// A controller's work queue: any queue with client-go's [`RateLimitingInterface`] over object
/// keys (a [`RateLimitingQueue`] or a [`PriorityQueue`] as [`Config::queue`] says, or the
/// caller's own, given to [`Controller::with_queue`](super::Controller::with_queue)), behind one
/// handle that implements the same interface. Cheap to clone.
///
/// A key keeps, for its retries ([`add_after`](DelayingInterface::add_after) and
/// [`add_rate_limited`](RateLimitingInterface::add_rate_limited) while a worker holds it), the
/// priority it was handed out with ([`get_with_priority`](RateLimitingInterface::get_with_priority)),
/// as in controller-runtime; a queue without priorities ignores them.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::controller::{self, Controller, WorkQueueKind};
/// use kcache::store::ObjectKey;
/// use kcache::workqueue::{Interface, priority};
/// use kcache::{informer, testing::FakeSource, SharedIndexInformer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), informer::Config::default());
/// let controller = Controller::new(informer, controller::Config::default().queue(WorkQueueKind::Priority));
/// let queue = controller.queue();
/// queue.add_with_priority(ObjectKey::new(Some("ns"), "old"), priority::LOW).unwrap();
/// queue.add(ObjectKey::new(Some("ns"), "new")).unwrap();
/// assert_eq!(queue.len(), 2);
/// assert!(queue.as_priority().is_some());
/// # }
/// ```
#[derive(Clone)]
pub struct WorkQueue {
    queue: Arc<dyn erased::DynQueue>,
    /// The priority each key a worker holds was handed out with (for its retries).
    in_flight: Arc<Mutex<HashMap<ObjectKey, i32>>>,
}

impl fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueue")
            .field("kind", &self.kind())
            .field("len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

/// The erased queue behind a [`WorkQueue`] (in a module of its own so that its methods do not
/// shadow the interface's where `super::*` is imported).
mod erased {
    use std::any::Any;

    use futures::{FutureExt, future::BoxFuture};

    use crate::store::ObjectKey;
    use crate::workqueue::{Interface, RateLimitingInterface, ShutDownError, priority::AddConfig};

    /// [`RateLimitingInterface`] made object safe (its futures boxed), so that [`WorkQueue`](super::WorkQueue) can
    /// hold any queue.
    pub(super) trait DynQueue: Send + Sync {
        fn add_with_config(&self, key: ObjectKey, config: AddConfig) -> AddResult;
        fn get_with_priority(&self) -> BoxFuture<'_, Option<(ObjectKey, i32)>>;
        fn done(&self, key: &ObjectKey);
        fn forget(&self, key: &ObjectKey);
        fn num_requeues(&self, key: &ObjectKey) -> usize;
        fn len(&self) -> usize;
        fn shutdown(&self);
        fn shutdown_with_drain(&self) -> BoxFuture<'_, ()>;
        fn is_shutting_down(&self) -> bool;
        fn as_any(&self) -> &dyn Any;
    }

    pub(super) type AddResult = Result<(), ShutDownError<ObjectKey>>;

    impl<Q: RateLimitingInterface<ObjectKey> + 'static> DynQueue for Q {
        fn add_with_config(&self, key: ObjectKey, config: AddConfig) -> AddResult {
            RateLimitingInterface::add_with_config(self, key, config)
        }
        fn get_with_priority(&self) -> BoxFuture<'_, Option<(ObjectKey, i32)>> {
            RateLimitingInterface::get_with_priority(self).boxed()
        }
        fn done(&self, key: &ObjectKey) {
            Interface::done(self, key);
        }
        fn forget(&self, key: &ObjectKey) {
            RateLimitingInterface::forget(self, key);
        }
        fn num_requeues(&self, key: &ObjectKey) -> usize {
            RateLimitingInterface::num_requeues(self, key)
        }
        fn len(&self) -> usize {
            Interface::len(self)
        }
        fn shutdown(&self) {
            Interface::shutdown(self);
        }
        fn shutdown_with_drain(&self) -> BoxFuture<'_, ()> {
            Interface::shutdown_with_drain(self).boxed()
        }
        fn is_shutting_down(&self) -> bool {
            Interface::is_shutting_down(self)
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }
}

use erased::AddResult;

impl WorkQueue {
    /// A controller's handle on `queue`, for [`Controller::with_queue`](super::Controller::with_queue).
    pub fn new<Q: RateLimitingInterface<ObjectKey> + 'static>(queue: Q) -> Self {
        Self {
            queue: Arc::new(queue),
            in_flight: Arc::default(),
        }
    }

    /// The queue `config` asks for (named after the controller, with its rate limiter).
    pub(super) fn from_config(config: &Config) -> (Self, Driver) {
        match config.queue {
            WorkQueueKind::RateLimiting => {
                let mut qconfig = RateLimitingQueueConfig::default().name(config.name.clone());
                if let Some(limiter) = &config.rate_limiter {
                    qconfig = qconfig.shared_rate_limiter(Arc::clone(limiter));
                }
                if let Some(provider) = &config.metrics_provider {
                    qconfig = qconfig.metrics_provider(Arc::clone(provider));
                }
                let (queue, driver) = RateLimitingQueue::with_config(qconfig);
                (Self::new(queue), driver)
            }
            WorkQueueKind::Priority => {
                let mut qconfig = priority::Config::default().name(config.name.clone());
                if let Some(limiter) = &config.rate_limiter {
                    qconfig = qconfig.shared_rate_limiter(Arc::clone(limiter));
                }
                if let Some(provider) = &config.metrics_provider {
                    qconfig = qconfig.metrics_provider(Arc::clone(provider));
                }
                let (queue, driver) = PriorityQueue::with_config(qconfig);
                (Self::new(queue), driver)
            }
        }
    }

    /// The queue behind this handle, when it is a `Q`.
    pub fn downcast_ref<Q: 'static>(&self) -> Option<&Q> {
        self.queue.as_any().downcast_ref()
    }

    /// The kind of queue; `None` for a queue of the caller's.
    pub fn kind(&self) -> Option<WorkQueueKind> {
        if self.as_rate_limiting().is_some() {
            Some(WorkQueueKind::RateLimiting)
        } else if self.as_priority().is_some() {
            Some(WorkQueueKind::Priority)
        } else {
            None
        }
    }

    /// The [`RateLimitingQueue`], when that is the queue.
    pub fn as_rate_limiting(&self) -> Option<&RateLimitingQueue<ObjectKey>> {
        self.downcast_ref()
    }

    /// The [`PriorityQueue`], when that is the queue.
    pub fn as_priority(&self) -> Option<&PriorityQueue<ObjectKey>> {
        self.downcast_ref()
    }

    /// Queues `key` at `priority` (ignored by a queue without priorities).
    ///
    /// # Errors
    /// [`ShutDownError`](crate::workqueue::ShutDownError) with the key when the queue is shutting down.
    pub fn add_with_priority(&self, key: ObjectKey, priority: i32) -> AddResult {
        self.queue
            .add_with_config(key, AddConfig::default().priority(priority))
    }

    /// The number of keys waiting for a delay or a rate limit, when the queue is one of
    /// kcache's (`None` for a queue of the caller's).
    pub fn waiting_len(&self) -> Option<usize> {
        (self.as_rate_limiting().map(|q| q.waiting_len()))
            .or_else(|| self.as_priority().map(PriorityQueue::waiting_len))
    }

    /// The priority `key` was handed out with while a worker holds it, else `NORMAL`.
    fn held_priority(&self, key: &ObjectKey) -> i32 {
        let held = self.in_flight.lock().get(key).copied();
        held.unwrap_or(priority::NORMAL)
    }
}

/// Keys are queued at [`priority::NORMAL`]; retries of a key a worker holds keep its priority.
impl Interface<ObjectKey> for WorkQueue {
    fn add(&self, key: ObjectKey) -> AddResult {
        self.add_with_priority(key, priority::NORMAL)
    }
    async fn get(&self) -> Option<ObjectKey> {
        RateLimitingInterface::get_with_priority(self)
            .await
            .map(|(key, _)| key)
    }
    fn done(&self, key: &ObjectKey) {
        self.in_flight.lock().remove(key);
        self.queue.done(key);
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
    fn shutdown(&self) {
        self.queue.shutdown();
    }
    fn shutdown_with_drain(&self) -> impl Future<Output = ()> + Send {
        self.queue.shutdown_with_drain()
    }
    fn is_shutting_down(&self) -> bool {
        self.queue.is_shutting_down()
    }
}

impl DelayingInterface<ObjectKey> for WorkQueue {
    fn add_after(&self, key: ObjectKey, delay: Duration) -> AddResult {
        let config = AddConfig::default().priority(self.held_priority(&key));
        self.queue.add_with_config(key, config.after(delay))
    }
}

impl RateLimitingInterface<ObjectKey> for WorkQueue {
    fn add_rate_limited(&self, key: ObjectKey) -> AddResult {
        let config = AddConfig::default().priority(self.held_priority(&key));
        self.queue.add_with_config(key, config.rate_limited())
    }
    fn forget(&self, key: &ObjectKey) {
        self.queue.forget(key);
    }
    fn num_requeues(&self, key: &ObjectKey) -> usize {
        self.queue.num_requeues(key)
    }
    fn add_with_config(&self, key: ObjectKey, config: AddConfig) -> AddResult {
        self.queue.add_with_config(key, config)
    }
    async fn get_with_priority(&self) -> Option<(ObjectKey, i32)> {
        let (key, priority) = self.queue.get_with_priority().await?;
        self.in_flight.lock().insert(key.clone(), priority);
        Some((key, priority))
    }
}

/// The priority of an add notification: low for the initial list.
pub(super) fn add_priority(is_in_initial_list: bool) -> i32 {
    if is_in_initial_list {
        priority::LOW
    } else {
        priority::NORMAL
    }
}

/// The priority of an update notification: low for a resync or an unchanged relisted object
/// (same resourceVersion), as controller-runtime's `WithLowPriorityWhenUnchanged`.
pub(super) fn update_priority<R: Resource>(old: &R, new: &R) -> i32 {
    let (old, new) = (&old.meta().resource_version, &new.meta().resource_version);
    if old.is_some() && old == new {
        priority::LOW
    } else {
        priority::NORMAL
    }
}

#[cfg(test)]
mod tests;
