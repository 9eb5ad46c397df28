//! Sharded controllers: the workers reconcile only the keys of the shards this replica holds.

use std::{
    collections::{BTreeSet, HashMap},
    future::Future,
    sync::Arc,
};

use kube_core::Resource;
use parking_lot::Mutex;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::info;

use super::{Action, Controller, Error, ErrorPolicy, ReconcileError};
use crate::workqueue::Interface as _;
use crate::{
    informer::{DeletedObject, EventHandler, HandlerConfig},
    sharding::{GateGuard, Layout, ShardGate, ShardLeases, ShardManager},
    store::{ObjectKey, meta_namespace_key},
};

/// What the workers of a sharded controller check before each reconcile.
pub(super) struct ShardCheck {
    gate: ShardGate,
    layout: Layout,
    /// The shard of each deleted object not yet reconciled (it is gone from the cache, and
    /// its key alone does not tell its shard).
    deleted: Arc<Mutex<HashMap<ObjectKey, u32>>>,
}

impl ShardCheck {
    /// A guard to reconcile `key` here, or `None` when its shard is not open here (also
    /// when its shard cannot be known: a deleted object seen before this replica ran).
    pub(super) fn admit<K: Resource>(
        &self,
        key: &ObjectKey,
        cached: Option<&K>,
    ) -> Option<GateGuard> {
        let shard = match cached {
            Some(obj) => {
                self.deleted.lock().remove(key);
                self.layout.shard_of(obj.meta())
            }
            None => self.deleted.lock().remove(key)?,
        };
        self.gate.enter(shard)
    }
}

/// Remembers the shard of every deleted primary object.
struct DeletedShards {
    layout: Layout,
    deleted: Arc<Mutex<HashMap<ObjectKey, u32>>>,
}

impl<K: Resource + Send + Sync + 'static> EventHandler<K> for DeletedShards {
    fn on_add(&self, _obj: &Arc<K>, _initial: bool) {}

    fn on_update(&self, _old: &Arc<K>, _new: &Arc<K>) {}

    fn on_delete(&self, obj: &DeletedObject<K>) {
        let obj = obj.object();
        if let Ok(key) = meta_namespace_key(obj.as_ref()) {
            self.deleted
                .lock()
                .insert(key, self.layout.shard_of(obj.meta()));
        }
    }
}

impl<K, P> Controller<K, P>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Runs as one replica of a sharded controller until `cancel` fires.
    ///
    /// `manager` shares the shards with the other replicas (see
    /// [`ShardManager`]); run it only here. Build the informers on
    /// [`manager.selection()`](ShardManager::selection) so that this replica caches only its
    /// shards' objects (informers without it hold everything and still work: the gate filters).
    ///
    /// The workers reconcile a key only while its object's shard is open here: keys of other
    /// shards (including the deletions a relist reports when a shard moves away) are dropped.
    /// When a shard opens here, its cached keys are queued (and the relist with the new
    /// selector adds its objects). A shard is handed over only after its reconciles in flight
    /// have finished. On `cancel` the workers drain first, then `manager` hands every shard
    /// back, so the other replicas take over at once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::controller::{self, Action, Controller};
    /// use kcache::sharding::{Config, FakeLeases, ShardManager};
    /// use kcache::{informer, testing::FakeSource, SharedIndexInformer};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// let manager = ShardManager::new(Config::new("demo", "replica-0"), FakeLeases::new())?;
    /// let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), informer::Config::default());
    /// let cancel = CancellationToken::new();
    /// tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
    /// let stop = cancel.clone();
    /// tokio::spawn(async move { stop.cancel() }); // a real controller runs until shutdown
    /// Controller::new(informer, controller::Config::default())
    ///     .run_sharded(
    ///         &manager,
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
    pub async fn run_sharded<L, F, Fut, E>(
        mut self,
        manager: &ShardManager<L>,
        reconcile: F,
        cancel: CancellationToken,
    ) -> Result<(), Error>
    where
        L: ShardLeases,
        F: Fn(ObjectKey, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: ReconcileError,
        P: ErrorPolicy<E>,
    {
        let layout = manager.layout();
        let deleted = Arc::new(Mutex::new(HashMap::new()));
        if let Ok(reg) = self.primary.add_event_handler_with_config(
            DeletedShards {
                layout,
                deleted: Arc::clone(&deleted),
            },
            HandlerConfig::default()
                .delivery(crate::informer::Delivery::Inline)
                .name(format!("controller {} shards", self.config.name)),
        ) {
            self.registrations.push(reg);
        }
        self.shards = Some(ShardCheck {
            gate: manager.gate().clone(),
            layout,
            deleted,
        });
        let (workers, driver_task) = self.start(reconcile, &cancel).await?;
        let name = workers.config.name.clone();
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        workers.spawn(&tracker, &stop);
        let election = CancellationToken::new();
        let run = manager.run(election.clone());
        tokio::pin!(run);
        let mut open = manager.watch();
        let mut known = BTreeSet::new();
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = &mut run => break,
                r = open.changed() => {
                    if r.is_err() {
                        break;
                    }
                    let now = open.borrow_and_update().clone();
                    let gained: BTreeSet<u32> = now.difference(&known).copied().collect();
                    info!(controller = %name, shards = ?now, "shards changed");
                    if !gained.is_empty() {
                        for obj in workers.primary.indexer().list() {
                            if gained.contains(&layout.shard_of(obj.meta()))
                                && let Ok(key) = meta_namespace_key(obj.as_ref())
                            {
                                let _ = workers.queue.add(key);
                            }
                        }
                    }
                    known = now;
                }
            }
        }
        info!(controller = %name, "stopping: draining the reconcile workers, then handing the shards back");
        stop.cancel();
        tracker.close();
        // Keep renewing the shards while the reconciles in flight finish.
        let drained = tracker.wait();
        tokio::pin!(drained);
        let mut run_done = false;
        loop {
            tokio::select! {
                () = &mut drained => break,
                () = &mut run, if !run_done => run_done = true,
            }
        }
        election.cancel();
        if !run_done {
            run.await;
        }
        workers.shut_down(TaskTracker::new(), driver_task).await;
        Ok(())
    }
}
