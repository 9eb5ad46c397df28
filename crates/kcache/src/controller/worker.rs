//! The reconcile workers and what they do with each outcome.

use std::{
    any::Any, collections::HashMap, future::Future, panic::AssertUnwindSafe, sync::Arc,
    time::Duration,
};

use futures::FutureExt;
use kube_core::Resource;
use parking_lot::Mutex;
use tokio::{sync::watch, task::JoinHandle};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{Instrument, debug, error, info_span, warn};

use crate::workqueue::{DelayingInterface as _, Interface as _, RateLimitingInterface as _};

use super::{
    config::Config,
    metrics::{Active, Counters, Metrics},
    policy::{Action, ErrorAction, ErrorPolicy, ReconcileError},
    sharded::ShardCheck,
};
use crate::{
    controller::WorkQueue,
    informer::{HandlerRegistration, SharedIndexInformer},
    leaderelection::LeaderState,
    store::ObjectKey,
};

/// How one reconcile ended.
enum Outcome<E> {
    Returned(Result<Action, E>),
    Panicked(String),
    TimedOut(Duration),
}

/// Everything the workers share.
pub(super) struct Workers<K, F, P> {
    pub(super) primary: SharedIndexInformer<K>,
    pub(super) queue: WorkQueue,
    pub(super) config: Config,
    registrations: Vec<HandlerRegistration>,
    reconcile: F,
    policy: P,
    metrics: Metrics,
    /// Failures in a row per key (the `retries` the policy sees).
    failures: Mutex<HashMap<ObjectKey, u32>>,
    /// For a sharded controller: which keys may be reconciled here.
    pub(super) shards: Option<ShardCheck>,
}

impl<K, F, Fut, E, P> Workers<K, F, P>
where
    K: Resource + Clone + Send + Sync + 'static,
    F: Fn(ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: ReconcileError,
    P: ErrorPolicy<E>,
{
    pub(super) fn new(
        primary: SharedIndexInformer<K>,
        queue: WorkQueue,
        config: Config,
        registrations: Vec<HandlerRegistration>,
        reconcile: F,
        policy: P,
        metrics: Metrics,
    ) -> Self {
        Self {
            primary,
            queue,
            config,
            registrations,
            reconcile,
            policy,
            metrics,
            failures: Mutex::new(HashMap::new()),
            shards: None,
        }
    }

    /// Spawns `config.workers` workers on `tracker`; they stop taking keys when `stop` fires
    /// or the queue shuts down (a reconcile in flight finishes first).
    pub(super) fn spawn(self: &Arc<Self>, tracker: &TaskTracker, stop: &CancellationToken) {
        self.spawn_while(tracker, stop, None);
    }

    /// As [`spawn`](Self::spawn), and the workers also stop, before they start another
    /// reconcile, as soon as `leading` says this replica no longer leads (whoever watches the
    /// same state and sees the change can count on no reconcile starting after it; `stop` is
    /// fired by a task that may run later).
    pub(super) fn spawn_while(
        self: &Arc<Self>,
        tracker: &TaskTracker,
        stop: &CancellationToken,
        leading: Option<&watch::Receiver<LeaderState>>,
    ) {
        for worker in 0..self.config.workers {
            let (this, stop) = (Arc::clone(self), stop.clone());
            let leading = leading.cloned();
            tracker.spawn(async move { this.work(worker, stop, leading).await });
        }
    }

    /// Stops the informer handlers and the queue, waits for the workers in `tracker` to finish
    /// (draining the reconciles in flight), then for the queue's driver.
    pub(super) async fn shut_down(&self, tracker: TaskTracker, driver_task: JoinHandle<()>) {
        debug!(controller = %self.config.name, "shutting down: draining reconciles in flight");
        for reg in &self.registrations {
            reg.remove();
        }
        self.queue.shutdown_with_drain().await;
        tracker.close();
        tracker.wait().await;
        let _ = driver_task.await;
    }

    async fn work(
        &self,
        worker: usize,
        stop: CancellationToken,
        leading: Option<watch::Receiver<LeaderState>>,
    ) {
        loop {
            // `get` is cancel safe: a key is only taken in the poll that returns it.
            let key = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                key = self.queue.get() => match key {
                    Some(key) => key,
                    None => return,
                },
            };
            if leading.as_ref().is_some_and(|l| !l.borrow().is_leading()) {
                // Stepped down: the key waits in the queue for the next leadership.
                debug!(controller = %self.config.name, %key, "not leading any more; left queued");
                self.queue.done(&key);
                let _ = self.queue.add(key);
                return;
            }
            let guard = match &self.shards {
                None => None,
                Some(check) => {
                    let cached = self.primary.indexer().get_by_key(key.as_str());
                    match check.admit(&key, cached.as_deref()) {
                        Some(guard) => Some(guard),
                        None => {
                            // Another replica's shard (or one this replica handed over).
                            debug!(controller = %self.config.name, %key, "not in a shard held here; skipped");
                            self.reset(&key);
                            self.queue.done(&key);
                            continue;
                        }
                    }
                }
            };
            // `retries` > 0: this run was triggered by a failed earlier one, not by an event.
            let retries = self.retries(&key);
            let span = info_span!("reconcile", controller = %self.config.name, worker, key = %key, retries);
            self.process(&key).instrument(span).await;
            drop(guard);
            self.queue.done(&key);
        }
    }

    async fn process(&self, key: &ObjectKey) {
        let c = &self.metrics.counters;
        Counters::inc(&c.reconciles);
        let obj = self.primary.indexer().get_by_key(key.as_str());
        let name = &self.config.name;
        let outcome = {
            let _active = Active::enter(&c.active);
            let started = tokio::time::Instant::now();
            let outcome = self.call(key.clone(), obj).await;
            c.reconcile_time.0.observe(started.elapsed().as_secs_f64());
            outcome
        };
        match outcome {
            Outcome::Returned(Ok(action)) => {
                Counters::inc(&c.succeeded);
                self.reset(key);
                match action {
                    Action::Done => {}
                    Action::Requeue => {
                        let _ = self.queue.add(key.clone());
                    }
                    Action::RequeueAfter(d) => {
                        let _ = self.queue.add_after(key.clone(), d);
                    }
                }
            }
            Outcome::Returned(Err(e)) if e.is_terminal() => {
                Counters::inc(&c.failed);
                Counters::inc(&c.terminal);
                error!(controller = %name, %key, error = %e, "reconcile failed with a terminal error; not retrying");
                self.reset(key);
            }
            Outcome::Returned(Err(e)) => {
                Counters::inc(&c.failed);
                let retries = self.retries(key);
                let action = self.policy.on_error(key, &e, retries);
                self.retry(key, action, retries, &e);
            }
            Outcome::Panicked(msg) => {
                Counters::inc(&c.failed);
                Counters::inc(&c.panicked);
                error!(controller = %name, %key, panic = %msg, "reconcile panicked; retrying with backoff");
                let retries = self.retries(key);
                self.retry(
                    key,
                    ErrorAction::Backoff,
                    retries,
                    &format!("panicked: {msg}"),
                );
            }
            Outcome::TimedOut(d) => {
                Counters::inc(&c.failed);
                Counters::inc(&c.timed_out);
                let retries = self.retries(key);
                self.retry(
                    key,
                    ErrorAction::Backoff,
                    retries,
                    &format!("timed out after {d:?}"),
                );
            }
        }
    }

    /// Runs the reconcile, catching panics (building or polling the future) and enforcing the
    /// timeout (the future is dropped when it passes).
    async fn call(&self, key: ObjectKey, obj: Option<Arc<K>>) -> Outcome<E> {
        let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| (self.reconcile)(key, obj))) {
            Ok(fut) => fut,
            Err(payload) => return Outcome::Panicked(panic_message(payload.as_ref())),
        };
        let guarded = AssertUnwindSafe(fut).catch_unwind();
        let result = match self.config.reconcile_timeout {
            Some(d) => match tokio::time::timeout(d, guarded).await {
                Ok(r) => r,
                Err(_elapsed) => return Outcome::TimedOut(d),
            },
            None => guarded.await,
        };
        match result {
            Ok(r) => Outcome::Returned(r),
            Err(payload) => Outcome::Panicked(panic_message(payload.as_ref())),
        }
    }

    fn retries(&self, key: &ObjectKey) -> u32 {
        self.failures.lock().get(key).copied().unwrap_or(0)
    }

    fn reset(&self, key: &ObjectKey) {
        self.failures.lock().remove(key);
        self.queue.forget(key);
    }

    fn retry(
        &self,
        key: &ObjectKey,
        action: ErrorAction,
        retries: u32,
        error: &dyn std::fmt::Display,
    ) {
        let c = &self.metrics.counters;
        let name = &self.config.name;
        let exhausted = self.config.max_retries.is_some_and(|max| retries >= max);
        match action {
            ErrorAction::GiveUp => {
                Counters::inc(&c.gave_up);
                error!(controller = %name, %key, retries, %error, "reconcile failed; the error policy gave up");
                self.reset(key);
            }
            _ if exhausted => {
                Counters::inc(&c.gave_up);
                error!(controller = %name, %key, retries, %error, "reconcile failed; giving up after max_retries");
                self.reset(key);
            }
            ErrorAction::Backoff => {
                Counters::inc(&c.retried);
                *self.failures.lock().entry(key.clone()).or_default() += 1;
                warn!(controller = %name, %key, retries, %error, "reconcile failed; retrying with backoff");
                let _ = self.queue.add_rate_limited(key.clone());
            }
            ErrorAction::RequeueAfter(d) => {
                Counters::inc(&c.retried);
                *self.failures.lock().entry(key.clone()).or_default() += 1;
                warn!(controller = %name, %key, retries, %error, delay = ?d, "reconcile failed; retrying after a delay");
                let _ = self.queue.add_after(key.clone(), d);
            }
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string panic payload>".to_owned())
}
