//! Which work queue a controller uses ([`WorkQueueKind`]) and the controller's queue handle
//! ([`WorkQueue`]).

use std::{collections::HashMap, fmt, sync::Arc, time::Duration};

use kube_core::Resource;
use parking_lot::Mutex;

use super::config::Config;
use crate::{
    store::ObjectKey,
    workqueue::{
        Driver, PriorityQueue, RateLimitingQueue, RateLimitingQueueConfig, ShutDownError,
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

/// A controller's work queue: a [`RateLimitingQueue`] or a [`PriorityQueue`] of object keys,
/// as [`Config::queue`] says. It has the methods of both (a priority is ignored by
/// the rate-limiting kind). Cheap to clone.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::controller::{self, Controller, WorkQueueKind};
/// use kcache::store::ObjectKey;
/// use kcache::workqueue::priority;
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
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    RateLimiting(RateLimitingQueue<ObjectKey>),
    Priority {
        queue: PriorityQueue<ObjectKey>,
        /// The priority each key a worker holds was handed out with (for its retries).
        in_flight: Arc<Mutex<HashMap<ObjectKey, i32>>>,
    },
}

impl fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Inner::RateLimiting(queue) => f.debug_tuple("WorkQueue").field(queue).finish(),
            Inner::Priority { queue, .. } => f.debug_tuple("WorkQueue").field(queue).finish(),
        }
    }
}

impl WorkQueue {
    /// The queue `config` asks for (named after the controller, with its rate limiter).
    pub(super) fn new(config: &Config) -> (Self, Driver) {
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
                let inner = Inner::RateLimiting(queue);
                (Self { inner }, driver)
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
                let inner = Inner::Priority {
                    queue,
                    in_flight: Arc::default(),
                };
                (Self { inner }, driver)
            }
        }
    }

    /// The kind of queue.
    pub fn kind(&self) -> WorkQueueKind {
        match &self.inner {
            Inner::RateLimiting(_) => WorkQueueKind::RateLimiting,
            Inner::Priority { .. } => WorkQueueKind::Priority,
        }
    }

    /// The [`RateLimitingQueue`], when that is the kind.
    pub fn as_rate_limiting(&self) -> Option<&RateLimitingQueue<ObjectKey>> {
        match &self.inner {
            Inner::RateLimiting(queue) => Some(queue),
            Inner::Priority { .. } => None,
        }
    }

    /// The [`PriorityQueue`], when that is the kind.
    pub fn as_priority(&self) -> Option<&PriorityQueue<ObjectKey>> {
        match &self.inner {
            Inner::RateLimiting(_) => None,
            Inner::Priority { queue, .. } => Some(queue),
        }
    }

    /// Queues `key` (at [`priority::NORMAL`]).
    ///
    /// # Errors
    /// [`ShutDownError`] with the key when the queue is shutting down.
    pub fn add(&self, key: ObjectKey) -> Result<(), ShutDownError<ObjectKey>> {
        self.add_with_priority(key, priority::NORMAL)
    }

    /// Queues `key` at `priority` (ignored by [`WorkQueueKind::RateLimiting`]).
    ///
    /// # Errors
    /// [`ShutDownError`] with the key when the queue is shutting down.
    pub fn add_with_priority(
        &self,
        key: ObjectKey,
        priority: i32,
    ) -> Result<(), ShutDownError<ObjectKey>> {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.add(key),
            Inner::Priority { queue, .. } => queue.add_with_priority(key, priority),
        }
    }

    /// Queues `key` once `delay` has passed; a key a worker holds keeps the priority it was
    /// handed out with, any other key gets [`priority::NORMAL`].
    ///
    /// # Errors
    /// [`ShutDownError`] with the key when the queue is shutting down.
    pub fn add_after(
        &self,
        key: ObjectKey,
        delay: Duration,
    ) -> Result<(), ShutDownError<ObjectKey>> {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.add_after(key, delay),
            Inner::Priority { queue, in_flight } => {
                let opts = AddConfig::default().priority(held_priority(in_flight, &key));
                queue.add_with_config(key, opts.after(delay))
            }
        }
    }

    /// Queues `key` after the wait the rate limiter gives it; the priority is as in
    /// [`add_after`](Self::add_after).
    ///
    /// # Errors
    /// [`ShutDownError`] with the key when the queue is shutting down.
    pub fn add_rate_limited(&self, key: ObjectKey) -> Result<(), ShutDownError<ObjectKey>> {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.add_rate_limited(key),
            Inner::Priority { queue, in_flight } => {
                let priority = held_priority(in_flight, &key);
                queue.add_rate_limited_with_priority(key, priority)
            }
        }
    }

    /// See [`RateLimitingQueue::get`] and [`PriorityQueue::get`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Queue::get`](crate::workqueue::Queue::get).
    pub async fn get(&self) -> Option<ObjectKey> {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.get().await,
            Inner::Priority { queue, in_flight } => {
                let (key, priority) = queue.get_with_priority().await?;
                in_flight.lock().insert(key.clone(), priority);
                Some(key)
            }
        }
    }

    /// Marks `key` as processed; see [`RateLimitingQueue::done`].
    pub fn done(&self, key: &ObjectKey) {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.done(key),
            Inner::Priority { queue, in_flight } => {
                in_flight.lock().remove(key);
                queue.done(key);
            }
        }
    }

    /// Resets the rate limiter's failures of `key`.
    pub fn forget(&self, key: &ObjectKey) {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.forget(key),
            Inner::Priority { queue, .. } => queue.forget(key),
        }
    }

    /// How many times `key` was rate limited since it was last forgotten.
    pub fn num_requeues(&self, key: &ObjectKey) -> usize {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.num_requeues(key),
            Inner::Priority { queue, .. } => queue.num_requeues(key),
        }
    }

    /// The number of keys waiting for a worker (not counting delayed ones).
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.len(),
            Inner::Priority { queue, .. } => queue.len(),
        }
    }

    /// Whether no key is waiting for a worker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of keys waiting for a delay or a rate limit.
    pub fn waiting_len(&self) -> usize {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.waiting_len(),
            Inner::Priority { queue, .. } => queue.waiting_len(),
        }
    }

    /// Whether the queue is shutting down.
    pub fn is_shutting_down(&self) -> bool {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.is_shutting_down(),
            Inner::Priority { queue, .. } => queue.is_shutting_down(),
        }
    }

    /// Refuses new keys; see [`RateLimitingQueue::shutdown`].
    pub fn shutdown(&self) {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.shutdown(),
            Inner::Priority { queue, .. } => queue.shutdown(),
        }
    }

    /// Refuses new keys and waits for the keys in flight; see
    /// [`RateLimitingQueue::shutdown_with_drain`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn shutdown_with_drain(&self) {
        match &self.inner {
            Inner::RateLimiting(queue) => queue.shutdown_with_drain().await,
            Inner::Priority { queue, .. } => queue.shutdown_with_drain().await,
        }
    }
}

fn held_priority(in_flight: &Mutex<HashMap<ObjectKey, i32>>, key: &ObjectKey) -> i32 {
    in_flight
        .lock()
        .get(key)
        .copied()
        .unwrap_or(priority::NORMAL)
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
