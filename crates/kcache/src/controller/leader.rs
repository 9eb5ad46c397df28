//! Warm standby: the informers run on every replica, the workers only while leading.

use std::{future::Future, sync::Arc};

use kube_core::Resource;
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::info;

use super::{Action, Controller, Error, ErrorPolicy, ReconcileError};
use crate::workqueue::Interface as _;
use crate::{
    leaderelection::{LeaderElector, LeaderState, LeaseLock},
    store::ObjectKey,
};

impl<K, P> Controller<K, P>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Runs as a warm standby under `elector` until `cancel` fires.
    ///
    /// Every replica runs its informers and keeps its cache synced, and its work queue
    /// collects the keys of every change; the reconcile workers run only while `elector`
    /// leads. When this replica starts leading, every key in the primary cache is queued
    /// (so the new leader reconciles everything, like a fresh controller, without a new
    /// list) and the workers start. When leadership is lost, the workers stop taking keys
    /// and the reconciles in flight finish (they are not aborted; bound them with
    /// [`Config::reconcile_timeout`](super::Config::reconcile_timeout)),
    /// then the replica competes again. On `cancel`, the workers are drained *before* the
    /// election is cancelled, so with `release_on_cancel` the lease is released only once no
    /// reconcile runs here any more.
    ///
    /// Run the elector only here (not also with [`LeaderElector::run`] elsewhere). Like
    /// client-go this is not fencing: around a lost lease two replicas may briefly both
    /// reconcile.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::controller::{self, Action, Controller};
    /// use kcache::leaderelection::{self, FakeLock, LeaderElector};
    /// use kcache::{informer, testing::FakeSource, SharedIndexInformer};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), informer::Config::default());
    /// let mut config = leaderelection::Config::new("replica-0");
    /// config.release_on_cancel = true;
    /// let elector = LeaderElector::new(config, FakeLock::new())?;
    /// let cancel = CancellationToken::new();
    /// tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
    /// let stop = cancel.clone();
    /// tokio::spawn(async move { stop.cancel() }); // a real controller runs until shutdown
    /// Controller::new(informer, controller::Config::default())
    ///     .run_with_leader_election(
    ///         &elector,
    ///         |_key, _cm: Option<Arc<ConfigMap>>| async { Ok::<_, String>(Action::Done) },
    ///         cancel,
    ///     )
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`run`](Self::run): the primary informer was not started, or has stopped.
    pub async fn run_with_leader_election<L, F, Fut, E>(
        self,
        elector: &LeaderElector<L>,
        reconcile: F,
        cancel: CancellationToken,
    ) -> Result<(), Error>
    where
        L: LeaseLock,
        F: Fn(ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: ReconcileError,
        P: ErrorPolicy<E>,
    {
        let (workers, driver_task) = self.start(reconcile, &cancel).await?;
        let name = workers.config.name.clone();
        let mut state = elector.watch();
        while !cancel.is_cancelled() {
            // Cancelled by us, after the workers have drained.
            let election = CancellationToken::new();
            let run = elector.run(election.clone());
            tokio::pin!(run);
            let mut run_done = false;
            let leading = tokio::select! {
                biased;
                () = cancel.cancelled() => false,
                () = &mut run => {
                    run_done = true;
                    false
                }
                r = state.wait_for(LeaderState::is_leading) => r.is_ok(),
            };
            if leading {
                for key in workers.primary.indexer().list_keys() {
                    let _ = workers.queue.add(key);
                }
                info!(controller = %name, "leading: starting the reconcile workers");
                let stop = CancellationToken::new();
                let round = TaskTracker::new();
                workers.spawn_while(&round, &stop, Some(&state));
                if !run_done {
                    tokio::select! {
                        () = cancel.cancelled() => {}
                        () = &mut run => run_done = true,
                        _ = state.wait_for(|s| !s.is_leading()) => {}
                    }
                }
                info!(controller = %name, "not leading any more: stopping the reconcile workers");
                stop.cancel();
                round.close();
                // Keep renewing (if still leading) while the reconciles in flight finish.
                let drained = round.wait();
                tokio::pin!(drained);
                loop {
                    tokio::select! {
                        () = &mut drained => break,
                        () = &mut run, if !run_done => run_done = true,
                    }
                }
            }
            election.cancel();
            if !run_done {
                run.await;
            }
        }
        workers.shut_down(TaskTracker::new(), driver_task).await;
        Ok(())
    }

    /// Runs as a warm standby that follows a leader state someone else drives, until
    /// `cancel` fires: what [`run_with_leader_election`](Self::run_with_leader_election)
    /// does, for several controllers under one [`LeaderElector`] (a manager runs the elector
    /// once and gives each controller its [`watch`](LeaderElector::watch)).
    ///
    /// The informers run and the queue collects keys whatever the state; the workers run
    /// while `leading` says [`LeaderState::Leading`]. On each start of leading every key in
    /// the primary cache is queued; when leading ends, the workers stop taking keys and the
    /// reconciles in flight finish. On `cancel`, the workers drain and `run_while_leading`
    /// returns: with `release_on_cancel`, cancel the election only after it has returned,
    /// so that the lease is released once no reconcile runs here. If the state's sender is
    /// dropped, the workers stop and the controller waits for `cancel`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::controller::{self, Action, Controller};
    /// use kcache::leaderelection::LeaderState;
    /// use kcache::{informer, testing::FakeSource, SharedIndexInformer};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), informer::Config::default());
    /// // Usually `elector.watch()`, with the elector run by the caller.
    /// let (_state, leading) = tokio::sync::watch::channel(LeaderState::Leading);
    /// let cancel = CancellationToken::new();
    /// tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
    /// let stop = cancel.clone();
    /// tokio::spawn(async move { stop.cancel() }); // a real controller runs until shutdown
    /// Controller::new(informer, controller::Config::default())
    ///     .run_while_leading(
    ///         leading,
    ///         |_key, _cm: Option<Arc<ConfigMap>>| async { Ok::<_, String>(Action::Done) },
    ///         cancel,
    ///     )
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`run`](Self::run): the primary informer was not started, or has stopped.
    pub async fn run_while_leading<F, Fut, E>(
        self,
        mut leading: watch::Receiver<LeaderState>,
        reconcile: F,
        cancel: CancellationToken,
    ) -> Result<(), Error>
    where
        F: Fn(ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: ReconcileError,
        P: ErrorPolicy<E>,
    {
        let (workers, driver_task) = self.start(reconcile, &cancel).await?;
        let name = workers.config.name.clone();
        while !cancel.is_cancelled() {
            let lead = tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                r = leading.wait_for(LeaderState::is_leading) => r.is_ok(),
            };
            if !lead {
                // No one drives the state any more: never leading again.
                cancel.cancelled().await;
                break;
            }
            for key in workers.primary.indexer().list_keys() {
                let _ = workers.queue.add(key);
            }
            info!(controller = %name, "leading: starting the reconcile workers");
            let stop = CancellationToken::new();
            let round = TaskTracker::new();
            workers.spawn_while(&round, &stop, Some(&leading));
            tokio::select! {
                () = cancel.cancelled() => {
                    info!(controller = %name, "shutting down: draining the reconcile workers");
                }
                _ = leading.wait_for(|s| !s.is_leading()) => {
                    info!(controller = %name, "not leading any more: stopping the reconcile workers");
                }
            }
            stop.cancel();
            round.close();
            round.wait().await;
        }
        workers.shut_down(TaskTracker::new(), driver_task).await;
        Ok(())
    }
}
