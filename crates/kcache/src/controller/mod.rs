//! [`Controller`]: the reconcile runner users know from controller-runtime and kube-rs.
//!
//! A controller watches a primary type through a [`SharedIndexInformer`], turns every change into
//! the object's key in a [`RateLimitingQueue`](crate::workqueue::RateLimitingQueue) (or a
//! [`PriorityQueue`](crate::workqueue::PriorityQueue), see [`WorkQueueKind`]), and runs `workers` reconcile loops over the queue:
//! a key is never reconciled by two workers at once, changes made while a key is being
//! reconciled queue it once more, errors are retried with the queue's rate limiter (per-key
//! exponential backoff 5 ms → 1000 s, and an overall 10 qps / burst 100 bucket), and success
//! resets the key's backoff. Related types are mapped to primary keys with
//! [`watches`](Controller::watches) and [`owns`](Controller::owns).
//!
//! Policies ([`Config`], [`ErrorPolicy`]):
//!
//! - **Retries**: a failed reconcile goes to the [`ErrorPolicy`] (default
//!   [`DefaultErrorPolicy`]: rate-limited requeue), which may back off, requeue after a delay
//!   or give up; [`Config::max_retries`] gives up after that many retries in a row.
//!   Giving up is logged at error level and counted ([`Metrics::gave_up`]).
//! - **Terminal errors**: an error whose [`ReconcileError::is_terminal`] is true (e.g. wrapped
//!   in [`Terminal`]) is logged at error level, counted, and never retried.
//! - **Timeouts**: with [`Config::reconcile_timeout`], a reconcile that takes
//!   longer is cancelled (its future dropped) and retried with backoff, like an error.
//! - **Panics**: a reconcile that panics (while building or polling its future) is caught,
//!   logged at error level with the panic message, counted ([`Metrics::panicked`])
//!   and retried with backoff; the worker keeps running. (The process's panic hook still
//!   prints the panic as usual.) Timeouts and panics count towards `max_retries` but do not
//!   consult the error policy, which needs an error value.
//! - **Rate limiter**: client-go's default unless [`Config::rate_limiter`] names
//!   another one from [`crate::workqueue`].
//! - **Informer not started**: [`run`](Controller::run) starts nothing itself; if the primary
//!   informer's `run` was not called within [`Config::informer_start_timeout`], it
//!   returns [`Error::InformerNotStarted`] instead of waiting for a sync that never comes.
//!
//! Warm standby under a [`LeaderElector`](crate::leaderelection::LeaderElector): see
//! [`Controller::run_with_leader_election`].
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache::controller::{self, Action, Controller};
//! use kcache::{informer, testing::FakeSource, SharedIndexInformer};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let source = FakeSource::<ConfigMap>::new();
//! let informer = SharedIndexInformer::new(source, informer::Config::default());
//! let controller = Controller::new(informer.clone(), controller::Config::default().workers(2));
//! let cancel = CancellationToken::new();
//! tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
//! let stop = cancel.clone();
//! tokio::spawn(async move { stop.cancel() }); // a real controller runs until shutdown
//! controller
//!     .run(
//!         |key, obj: Option<Arc<ConfigMap>>| async move {
//!             println!("reconcile {key}: exists={}", obj.is_some());
//!             Ok::<_, std::convert::Infallible>(Action::Done)
//!         },
//!         cancel,
//!     )
//!     .await
//!     .expect("the informer was started");
//! # }
//! ```

mod config;
mod leader;
mod metrics;
mod policy;
mod queue;
mod sharded;
#[cfg(test)]
mod tests;
mod worker;

use std::{future::Future, sync::Arc, time::Duration};

use kube_core::Resource;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{debug, error};

pub use config::{Config, Error};
pub use metrics::Metrics;
pub use policy::{Action, DefaultErrorPolicy, ErrorAction, ErrorPolicy, ReconcileError, Terminal};
pub use queue::{WorkQueue, WorkQueueKind};

use crate::workqueue::Interface as _;
use crate::{
    informer::{self, DeletedObject, EventHandler, HandlerRegistration, SharedIndexInformer},
    store::{ObjectKey, meta_namespace_key},
    workqueue::Driver,
};
use worker::Workers;

/// Maps a related object to the primary keys to reconcile.
type KeyMapper<R> = Box<dyn Fn(&R) -> Vec<ObjectKey> + Send + Sync>;

/// Decides whether an update notification (old, new) queues keys; see
/// [`Controller::new_with_update_filter`].
pub type UpdateFilter<R> = Arc<dyn Fn(&R, &R) -> bool + Send + Sync>;

/// Enqueues the keys a mapper derives from each notification.
struct Enqueue<R> {
    queue: WorkQueue,
    map: KeyMapper<R>,
    /// Updates it rejects queue nothing; adds and deletes always queue.
    filter: Option<UpdateFilter<R>>,
}

impl<R: Resource + Send + Sync + 'static> Enqueue<R> {
    fn push(&self, obj: &R, priority: i32) {
        for key in (self.map)(obj) {
            // A queue that shut down refuses keys: the controller is stopping.
            let _ = self.queue.add_with_priority(key, priority);
        }
    }
}

impl<R: Resource + Send + Sync + 'static> EventHandler<R> for Enqueue<R> {
    fn on_add(&self, obj: &Arc<R>, initial: bool) {
        self.push(obj, queue::add_priority(initial));
    }

    fn on_update(&self, old: &Arc<R>, new: &Arc<R>) {
        if let Some(filter) = &self.filter
            && !filter(old, new)
        {
            return;
        }
        // Both: an object whose mapping changed must reach its old and its new owner.
        let priority = queue::update_priority(&**old, &**new);
        self.push(old, priority);
        self.push(new, priority);
    }

    fn on_delete(&self, obj: &DeletedObject<R>) {
        self.push(obj.object(), crate::workqueue::priority::NORMAL);
    }
}

/// Reconciles objects of type `K`; see the [module docs](self).
///
/// `P` is the [`ErrorPolicy`], set with [`with_error_policy`](Self::with_error_policy).
pub struct Controller<K, P = DefaultErrorPolicy> {
    primary: SharedIndexInformer<K>,
    queue: WorkQueue,
    driver: Driver,
    config: Config,
    registrations: Vec<HandlerRegistration>,
    policy: P,
    metrics: Metrics,
    /// Set by [`Controller::run_sharded`].
    shards: Option<sharded::ShardCheck>,
}

impl<K, P> std::fmt::Debug for Controller<K, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.config.name)
            .field("workers", &self.config.workers)
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// A controller for the primary objects of `informer`, with the configured rate limiter
    /// (client-go's default unless [`Config::rate_limiter`] is set) and the
    /// [`DefaultErrorPolicy`].
    ///
    /// # Panics
    /// When the informer has already stopped.
    pub fn new(informer: SharedIndexInformer<K>, config: Config) -> Self {
        let (queue, driver) = WorkQueue::from_config(&config);
        Self::with_parts(informer, config, queue, driver, None)
    }

    /// A controller for the primary objects of `informer` over `queue`, any queue with
    /// client-go's [`RateLimitingInterface`](crate::workqueue::RateLimitingInterface) (as
    /// client-go's controllers take a `TypedRateLimitingInterface`). The caller runs the
    /// queue's background work, if it has any; [`Config::queue`], [`Config::rate_limiter`]
    /// and [`Config::metrics_provider`] are not used (they describe the queue
    /// [`new`](Self::new) makes).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::controller::{self, Controller};
    /// use kcache::workqueue::{ItemFastSlowRateLimiter, RateLimitingQueue, RateLimitingQueueConfig};
    /// use kcache::{informer, testing::FakeSource, SharedIndexInformer};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), informer::Config::default());
    /// let limiter = ItemFastSlowRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10), 3);
    /// let (queue, driver) =
    ///     RateLimitingQueue::with_config(RateLimitingQueueConfig::default().rate_limiter(limiter));
    /// tokio::spawn(driver);
    /// let controller = Controller::with_queue(informer, controller::Config::default(), queue);
    /// assert!(controller.queue().as_rate_limiting().is_some());
    /// # }
    /// ```
    ///
    /// # Panics
    /// When the informer has already stopped.
    pub fn with_queue(
        informer: SharedIndexInformer<K>,
        config: Config,
        queue: impl crate::workqueue::RateLimitingInterface<ObjectKey> + 'static,
    ) -> Self {
        let driver = Driver::new(std::future::ready(()));
        Self::with_parts(informer, config, WorkQueue::new(queue), driver, None)
    }

    /// As [`new`](Self::new), and an update of a primary object queues its key only when
    /// `filter(old, new)` is true (controller-runtime's predicates, such as
    /// `GenerationChangedPredicate`: `|old, new| old.meta().generation != new.meta().generation`).
    /// Adds, deletes and the keys queued when this replica starts leading are not filtered.
    /// A resync is an update whose old and new objects are the same, so a filter comparing
    /// them drops it.
    ///
    /// ```
    /// use kcache::controller::{self, Controller};
    /// use kcache::{informer, testing::FakeSource, SharedIndexInformer};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_core::Resource;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), informer::Config::default());
    /// let controller = Controller::new_with_update_filter(
    ///     informer,
    ///     controller::Config::default(),
    ///     |old: &ConfigMap, new: &ConfigMap| old.meta().labels != new.meta().labels,
    /// );
    /// # drop(controller);
    /// # }
    /// ```
    ///
    /// # Panics
    /// When the informer has already stopped.
    pub fn new_with_update_filter(
        informer: SharedIndexInformer<K>,
        config: Config,
        filter: impl Fn(&K, &K) -> bool + Send + Sync + 'static,
    ) -> Self {
        let (queue, driver) = WorkQueue::from_config(&config);
        Self::with_parts(informer, config, queue, driver, Some(Arc::new(filter)))
    }

    fn with_parts(
        informer: SharedIndexInformer<K>,
        config: Config,
        queue: WorkQueue,
        driver: Driver,
        filter: Option<UpdateFilter<K>>,
    ) -> Self {
        let enqueue = Enqueue::<K> {
            queue: queue.clone(),
            map: Box::new(|obj: &K| meta_namespace_key(obj).into_iter().collect()),
            filter,
        };
        let reg = informer
            .add_event_handler_with_config(
                enqueue,
                informer::HandlerConfig::default()
                    .delivery(informer::Delivery::Inline)
                    .name(format!("controller {}", config.name)),
            )
            .expect("the primary informer has stopped");
        Self {
            primary: informer,
            queue,
            driver,
            config,
            registrations: vec![reg],
            policy: DefaultErrorPolicy,
            metrics: Metrics::default(),
            shards: None,
        }
    }
}

impl<K, P> Controller<K, P>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Also reconcile the primary keys that `map` derives from changes of related objects.
    ///
    /// # Panics
    /// When `informer` has already stopped.
    #[must_use]
    pub fn watches<R>(
        mut self,
        informer: &SharedIndexInformer<R>,
        map: impl Fn(&R) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        R: Resource + Clone + Send + Sync + 'static,
    {
        let enqueue = Enqueue {
            queue: self.queue.clone(),
            map: Box::new(map),
            filter: None,
        };
        let reg = informer
            .add_event_handler_with_config(
                enqueue,
                informer::HandlerConfig::default()
                    .delivery(informer::Delivery::Inline)
                    .name(format!("controller {}", self.config.name)),
            )
            .expect("the related informer has stopped");
        self.registrations.push(reg);
        self
    }

    /// Also reconcile the owner of every changed `R` whose controller owner reference points
    /// to a `K` (same namespace).
    ///
    /// # Panics
    /// When `informer` has already stopped.
    #[must_use]
    pub fn owns<R>(self, informer: &SharedIndexInformer<R>) -> Self
    where
        R: Resource + Clone + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        let dt = K::DynamicType::default();
        let (kind, api_version) = (K::kind(&dt).into_owned(), K::api_version(&dt).into_owned());
        self.watches(informer, move |obj: &R| {
            let meta = obj.meta();
            meta.owner_references
                .iter()
                .flatten()
                .filter(|o| {
                    o.controller == Some(true) && o.kind == kind && o.api_version == api_version
                })
                .map(|o| ObjectKey::new(meta.namespace.as_deref(), &o.name))
                .collect()
        })
    }

    /// Decides what happens to failed reconciles (see [`ErrorPolicy`]); replaces the
    /// [`DefaultErrorPolicy`]. A closure `|key: &ObjectKey, err: &E, retries: u32| ...`
    /// returning an [`ErrorAction`] is a policy.
    #[must_use]
    pub fn with_error_policy<P2>(self, policy: P2) -> Controller<K, P2> {
        Controller {
            primary: self.primary,
            queue: self.queue,
            driver: self.driver,
            config: self.config,
            registrations: self.registrations,
            policy,
            metrics: self.metrics,
            shards: self.shards,
        }
    }

    /// The controller's work queue (to enqueue keys by hand, or read its depth).
    pub fn queue(&self) -> &WorkQueue {
        &self.queue
    }

    /// Counters of the reconciles (shared: read them while the controller runs).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Runs until `cancel` fires: checks that the primary informer was started, waits for it
    /// to sync, then runs the workers. `reconcile(key, object)` gets the cached object
    /// (`None` once it is deleted). `Ok` resets the key's backoff; `Err` goes through the
    /// [module's policies](self). On cancel, the queue stops taking keys and `run` returns
    /// once the reconciles in flight have finished.
    ///
    /// # Errors
    /// [`Error::InformerNotStarted`] when the primary informer's `run` was not called within
    /// [`Config::informer_start_timeout`]; [`Error::InformerStopped`] when it has
    /// already stopped. Nothing was reconciled then.
    pub async fn run<F, Fut, E>(self, reconcile: F, cancel: CancellationToken) -> Result<(), Error>
    where
        F: Fn(ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: ReconcileError,
        P: ErrorPolicy<E>,
    {
        let (workers, driver_task) = self.start(reconcile, &cancel).await?;
        let tracker = TaskTracker::new();
        if !cancel.is_cancelled() {
            workers.spawn(&tracker, &CancellationToken::new());
            cancel.cancelled().await;
        }
        workers.shut_down(tracker, driver_task).await;
        Ok(())
    }

    /// Checks the informer, spawns the queue's driver and waits for the primary sync (or
    /// `cancel`).
    async fn start<F, Fut, E>(
        self,
        reconcile: F,
        cancel: &CancellationToken,
    ) -> Result<(Arc<Workers<K, F, P>>, tokio::task::JoinHandle<()>), Error>
    where
        F: Fn(ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: ReconcileError,
        P: ErrorPolicy<E>,
    {
        let Self {
            primary,
            queue,
            driver,
            config,
            registrations,
            policy,
            metrics,
            shards,
        } = self;
        if let Err(e) = wait_started(&primary, &config, cancel).await {
            error!(controller = %config.name, error = %e, "controller cannot run");
            for reg in &registrations {
                reg.remove();
            }
            queue.shutdown();
            return Err(e);
        }
        let driver_task = tokio::spawn(driver);
        tokio::select! {
            () = primary.wait_for_sync() => {}
            () = cancel.cancelled() => {}
        }
        debug!(controller = %config.name, "primary informer synced");
        let mut workers = Workers::new(
            primary,
            queue,
            config,
            registrations,
            reconcile,
            policy,
            metrics,
        );
        workers.shards = shards;
        let workers = Arc::new(workers);
        Ok((workers, driver_task))
    }
}

/// Waits until `primary.run` was called; errors after the configured timeout, or when it
/// has stopped. Returns `Ok` at once on `cancel`.
async fn wait_started<K>(
    primary: &SharedIndexInformer<K>,
    config: &Config,
    cancel: &CancellationToken,
) -> Result<(), Error>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    const POLL: Duration = Duration::from_millis(10);
    let deadline = tokio::time::Instant::now() + config.informer_start_timeout;
    loop {
        if cancel.is_cancelled() {
            return Ok(());
        }
        if primary.is_stopped() {
            return Err(Error::InformerStopped {
                controller: config.name.clone(),
            });
        }
        if primary.has_started() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::InformerNotStarted {
                controller: config.name.clone(),
                waited: config.informer_start_timeout,
            });
        }
        tokio::select! {
            () = cancel.cancelled() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}
