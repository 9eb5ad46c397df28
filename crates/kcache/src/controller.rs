//! [`Controller`]: the reconcile runner users know from controller-runtime and kube-rs.
//!
//! A controller watches a primary type through a [`SharedIndexInformer`], turns every change into
//! the object's key in a [`RateLimitingQueue`], and runs `workers` reconcile loops over the queue:
//! a key is never reconciled by two workers at once, changes made while a key is being
//! reconciled queue it once more, errors are retried with the queue's rate limiter (per-key
//! exponential backoff 5 ms → 1000 s, and an overall 10 qps / burst 100 bucket), and success
//! resets the key's backoff. Related types are mapped to primary keys with
//! [`watches`](Controller::watches) and [`owns`](Controller::owns).
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache::controller::{Action, Controller, ControllerConfig};
//! use kcache::{informer::InformerConfig, testing::FakeSource, SharedIndexInformer};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let source = FakeSource::<ConfigMap>::new();
//! let informer = SharedIndexInformer::new(source, InformerConfig::default());
//! let controller = Controller::new(informer.clone(), ControllerConfig::default().workers(2));
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
//!     .await;
//! # }
//! ```

use std::{fmt::Display, future::Future, sync::Arc, time::Duration};

use kube_core::Resource;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{Instrument, debug, info_span, warn};

use crate::{
    informer::{
        DeletedObject, EventHandler, HandlerOptions, HandlerRegistration, SharedIndexInformer,
    },
    store::{ObjectKey, meta_namespace_key},
    workqueue::{Driver, RateLimitingQueue, RateLimitingQueueConfig},
};

/// What a successful reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing: wait for the next change (the key's retry backoff is reset).
    Done,
    /// Reconcile again right away (backoff reset).
    Requeue,
    /// Reconcile again after this delay (backoff reset).
    RequeueAfter(Duration),
}

/// Controller settings.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Name for logs and queue metrics.
    pub name: String,
    /// Number of concurrent reconcile workers (client-go convention: 1–5).
    pub workers: usize,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            name: "controller".to_owned(),
            workers: 1,
        }
    }
}

impl ControllerConfig {
    /// Sets [`ControllerConfig::name`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets [`ControllerConfig::workers`] (at least 1).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }
}

/// Maps a related object to the primary keys to reconcile.
type KeyMapper<R> = Box<dyn Fn(&R) -> Vec<ObjectKey> + Send + Sync>;

/// Enqueues the keys a mapper derives from each notification.
struct Enqueue<R> {
    queue: RateLimitingQueue<ObjectKey>,
    map: KeyMapper<R>,
}

impl<R: Send + Sync + 'static> Enqueue<R> {
    fn push(&self, obj: &R) {
        for key in (self.map)(obj) {
            // A queue that shut down refuses keys: the controller is stopping.
            let _ = self.queue.add(key);
        }
    }
}

impl<R: Send + Sync + 'static> EventHandler<R> for Enqueue<R> {
    fn on_add(&self, obj: &Arc<R>, _initial: bool) {
        self.push(obj);
    }

    fn on_update(&self, old: &Arc<R>, new: &Arc<R>) {
        // Both: an object whose mapping changed must reach its old and its new owner.
        self.push(old);
        self.push(new);
    }

    fn on_delete(&self, obj: &DeletedObject<R>) {
        self.push(obj.object());
    }
}

/// Reconciles objects of type `K`; see the [module docs](self).
pub struct Controller<K> {
    primary: SharedIndexInformer<K>,
    queue: RateLimitingQueue<ObjectKey>,
    driver: Driver,
    config: ControllerConfig,
    registrations: Vec<HandlerRegistration>,
}

impl<K> Controller<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// A controller for the primary objects of `informer`, with client-go's default rate
    /// limiter.
    ///
    /// # Panics
    /// When the informer has already stopped.
    pub fn new(informer: SharedIndexInformer<K>, config: ControllerConfig) -> Self {
        let (queue, driver) = RateLimitingQueue::with_config(
            RateLimitingQueueConfig::default().name(config.name.clone()),
        );
        let enqueue = Enqueue::<K> {
            queue: queue.clone(),
            map: Box::new(|obj: &K| meta_namespace_key(obj).into_iter().collect()),
        };
        let reg = informer
            .add_event_handler_with_options(enqueue, HandlerOptions::default().inline(true))
            .expect("the primary informer has stopped");
        Self {
            primary: informer,
            queue,
            driver,
            config,
            registrations: vec![reg],
        }
    }

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
        };
        let reg = informer
            .add_event_handler_with_options(enqueue, HandlerOptions::default().inline(true))
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

    /// The controller's work queue (to enqueue keys by hand, or read its depth).
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// Runs until `cancel` fires: waits for the primary informer to sync, then runs the
    /// workers. `reconcile(key, object)` gets the cached object (`None` once it is deleted).
    /// `Err` retries the key with backoff; `Ok` resets its backoff. On cancel, the queue stops
    /// taking keys and `run` returns once the reconciles in flight have finished.
    pub async fn run<F, Fut, E>(self, reconcile: F, cancel: CancellationToken)
    where
        F: Fn(ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let Self {
            primary,
            queue,
            driver,
            config,
            registrations,
        } = self;
        let driver_task = tokio::spawn(driver);
        tokio::select! {
            () = primary.wait_for_sync() => {}
            () = cancel.cancelled() => {}
        }
        let reconcile = Arc::new(reconcile);
        let workers = TaskTracker::new();
        if !cancel.is_cancelled() {
            for worker in 0..config.workers {
                let (queue, primary, reconcile) =
                    (queue.clone(), primary.clone(), Arc::clone(&reconcile));
                let name = config.name.clone();
                workers.spawn(async move {
                    while let Some(key) = queue.get().await {
                        let obj = primary.indexer().get_by_key(key.as_str());
                        let span = info_span!("reconcile", controller = %name, worker, key = %key);
                        let result = reconcile(key.clone(), obj).instrument(span).await;
                        match result {
                            Ok(Action::Done) => queue.forget(&key),
                            Ok(Action::Requeue) => {
                                queue.forget(&key);
                                let _ = queue.add(key.clone());
                            }
                            Ok(Action::RequeueAfter(d)) => {
                                queue.forget(&key);
                                let _ = queue.add_after(key.clone(), d);
                            }
                            Err(e) => {
                                warn!(controller = %name, %key, retries = queue.num_requeues(&key), error = %e, "reconcile failed; retrying with backoff");
                                let _ = queue.add_rate_limited(key.clone());
                            }
                        }
                        queue.done(&key);
                    }
                });
            }
            cancel.cancelled().await;
        }
        debug!(controller = %config.name, "shutting down: draining reconciles in flight");
        for reg in &registrations {
            reg.remove();
        }
        queue.shutdown_with_drain().await;
        workers.close();
        workers.wait().await;
        let _ = driver_task.await;
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::HashMap,
        sync::atomic::{AtomicUsize, Ordering},
    };

    use k8s_openapi::{
        api::core::v1::{ConfigMap, Secret},
        apimachinery::pkg::apis::meta::v1::OwnerReference,
    };
    use kube_core::ObjectMeta;
    use parking_lot::Mutex;

    use super::*;
    use crate::{informer::InformerConfig, testing::FakeSource};

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    struct Setup {
        src: FakeSource<ConfigMap>,
        informer: SharedIndexInformer<ConfigMap>,
        cancel: CancellationToken,
    }

    fn setup() -> Setup {
        let src = FakeSource::new();
        let informer = SharedIndexInformer::new(src.clone(), InformerConfig::default());
        let cancel = CancellationToken::new();
        tokio::spawn({
            let (i, c) = (informer.clone(), cancel.clone());
            async move { i.run(c).await }
        });
        Setup {
            src,
            informer,
            cancel,
        }
    }

    async fn eventually(mut cond: impl FnMut() -> bool) {
        for _ in 0..10_000 {
            if cond() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("condition never held");
    }

    #[tokio::test(start_paused = true)]
    async fn reconcile_runs_for_every_object_and_sees_deletions_as_none() {
        let s = setup();
        s.src.upsert(cm("a"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let controller = Controller::new(s.informer.clone(), ControllerConfig::default());
        let log = Arc::clone(&seen);
        let run = tokio::spawn(controller.run(
            move |key, obj: Option<Arc<ConfigMap>>| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().push(format!("{key} {}", obj.is_some()));
                    Ok::<_, String>(Action::Done)
                }
            },
            s.cancel.clone(),
        ));
        eventually(|| seen.lock().len() == 1).await;
        s.src.delete(&ObjectKey::new(Some("ns"), "a"));
        eventually(|| seen.lock().len() == 2).await;
        assert_eq!(*seen.lock(), ["ns/a true", "ns/a false"]);
        s.cancel.cancel();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn errors_are_retried_with_backoff_and_success_forgets_the_key() {
        let s = setup();
        s.src.upsert(cm("a"));
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let controller = Controller::new(s.informer.clone(), ControllerConfig::default());
        let queue = controller.queue().clone();
        let log = Arc::clone(&attempts);
        let run = tokio::spawn(controller.run(
            move |_key, _obj: Option<Arc<ConfigMap>>| {
                let log = Arc::clone(&log);
                async move {
                    let mut log = log.lock();
                    log.push(tokio::time::Instant::now());
                    if log.len() < 4 {
                        Err("not yet".to_owned())
                    } else {
                        Ok(Action::Done)
                    }
                }
            },
            s.cancel.clone(),
        ));
        eventually(|| attempts.lock().len() == 4).await;
        let t = attempts.lock().clone();
        let gaps: Vec<Duration> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps[0] >= Duration::from_millis(5)
                && gaps[1] >= Duration::from_millis(10)
                && gaps[2] >= Duration::from_millis(20),
            "{gaps:?}"
        );
        eventually(|| queue.num_requeues(&ObjectKey::new(Some("ns"), "a")) == 0).await;
        s.cancel.cancel();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_reconciles_again_after_the_delay() {
        let s = setup();
        s.src.upsert(cm("a"));
        let times = Arc::new(Mutex::new(Vec::new()));
        let controller = Controller::new(s.informer.clone(), ControllerConfig::default());
        let log = Arc::clone(&times);
        let run = tokio::spawn(controller.run(
            move |_key, _obj: Option<Arc<ConfigMap>>| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().push(tokio::time::Instant::now());
                    Ok::<_, String>(Action::RequeueAfter(Duration::from_secs(30)))
                }
            },
            s.cancel.clone(),
        ));
        eventually(|| times.lock().len() >= 3).await;
        let t = times.lock().clone();
        assert!(t[1] - t[0] >= Duration::from_secs(30));
        s.cancel.cancel();
        run.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_key_is_never_reconciled_by_two_workers_at_once() {
        let s = setup();
        for i in 0..20 {
            s.src.upsert(cm(&format!("c{i}")));
        }
        let in_flight: Arc<Mutex<HashMap<ObjectKey, usize>>> = Arc::default();
        let total = Arc::new(AtomicUsize::new(0));
        let controller =
            Controller::new(s.informer.clone(), ControllerConfig::default().workers(4));
        let (f, t) = (Arc::clone(&in_flight), Arc::clone(&total));
        let run = tokio::spawn(controller.run(
            move |key: ObjectKey, _obj: Option<Arc<ConfigMap>>| {
                let (f, t) = (Arc::clone(&f), Arc::clone(&t));
                async move {
                    let n = {
                        let mut m = f.lock();
                        let n = m.entry(key.clone()).or_default();
                        *n += 1;
                        *n
                    };
                    assert_eq!(n, 1, "two workers on {key}");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    *f.lock().get_mut(&key).unwrap() -= 1;
                    t.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, String>(Action::Done)
                }
            },
            s.cancel.clone(),
        ));
        for round in 0..5 {
            for i in 0..20 {
                s.src.upsert(cm(&format!("c{i}")));
            }
            tokio::time::sleep(Duration::from_millis(1 + round)).await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while total.load(Ordering::SeqCst) < 20 {
            assert!(tokio::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        s.cancel.cancel();
        run.await.unwrap();
        assert!(
            in_flight.lock().values().all(|n| *n == 0),
            "shutdown waited for reconciles in flight"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn owned_objects_enqueue_their_controller_owner() {
        let s = setup();
        s.src.upsert(cm("owner"));
        let secrets = FakeSource::<Secret>::new();
        let secret_informer = SharedIndexInformer::new(secrets.clone(), InformerConfig::default());
        tokio::spawn({
            let (i, c) = (secret_informer.clone(), s.cancel.clone());
            async move { i.run(c).await }
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let controller =
            Controller::new(s.informer.clone(), ControllerConfig::default()).owns(&secret_informer);
        let log = Arc::clone(&seen);
        let run = tokio::spawn(controller.run(
            move |key: ObjectKey, _obj: Option<Arc<ConfigMap>>| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().push(key.to_string());
                    Ok::<_, String>(Action::Done)
                }
            },
            s.cancel.clone(),
        ));
        eventually(|| seen.lock().len() == 1).await;
        let mut secret = Secret::default();
        secret.metadata.name = Some("child".into());
        secret.metadata.namespace = Some("ns".into());
        secret.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: "u".into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        secrets.upsert(secret);
        eventually(|| seen.lock().len() == 2).await;
        assert_eq!(*seen.lock(), ["ns/owner", "ns/owner"]);
        s.cancel.cancel();
        run.await.unwrap();
    }
}
