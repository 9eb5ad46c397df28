//! [`SharedIndexInformer`]: reflector → FIFO → indexer + handlers.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::future::BoxFuture;
use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{debug, warn};

use super::{
    handler::{DeletedObject, EventHandler},
    listener::{BufferMode, Listener, Notification, determine_resync_period},
    processor::Processor,
    registration::HandlerRegistration,
};
use crate::{
    fifo::{
        DeltaFifo, DeltaFifoOptions, DeltaObject, DeltaType, Deltas, PopError, Queue, RealFifo,
    },
    lister_watcher::ListerWatcher,
    reflector::{
        self, Reflector, ReflectorHandle, ReflectorStore, TransformFunc, WatchErrorHandler,
    },
    store::{
        IndexError, Indexers, Lister, ObjectKey, ThreadSafeStore, Transaction,
        meta_namespace_key_func,
    },
};

/// The smallest per-handler resync period (client-go's `minimumResyncPeriod`).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Which queue sits between the reflector and the indexer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueKind {
    /// client-go 1.36's informer queue: an atomic [`RealFifo`] (one `ReplacedAll` per relist,
    /// batched pops, lock released while processing).
    #[default]
    RealFifo,
    /// A non-atomic [`RealFifo`] (tombstones + `Replaced` per object on relist).
    RealFifoNonAtomic,
    /// The legacy [`DeltaFifo`] (one entry per key).
    DeltaFifo,
}

/// Informer settings. `Default` is client-go's.
#[derive(Clone)]
pub struct InformerConfig {
    /// The default resync period for handlers, and the informer's resync check period
    /// (client-go's `defaultEventHandlerResyncPeriod`); zero disables resyncs.
    pub resync_period: Duration,
    /// The queue between the reflector and the indexer.
    pub queue: QueueKind,
    /// The reflector's settings (page size, watch list, selectors, backoff).
    pub reflector: reflector::Config,
}

impl Default for InformerConfig {
    fn default() -> Self {
        Self {
            resync_period: Duration::ZERO,
            queue: QueueKind::default(),
            reflector: reflector::Config::default(),
        }
    }
}

impl InformerConfig {
    /// Sets [`InformerConfig::resync_period`].
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// Sets [`InformerConfig::queue`].
    #[must_use]
    pub fn queue(mut self, queue: QueueKind) -> Self {
        self.queue = queue;
        self
    }

    /// Sets [`InformerConfig::reflector`].
    #[must_use]
    pub fn reflector(mut self, reflector: reflector::Config) -> Self {
        self.reflector = reflector;
        self
    }
}

/// Options of one handler registration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandlerOptions {
    /// This handler's resync period; `None` takes the informer's default.
    pub resync_period: Option<Duration>,
    /// How pending notifications are buffered.
    pub buffer: BufferMode,
    /// Deliver on the listener's async task instead of tokio's blocking pool. Only for
    /// handlers that never block (e.g. one that adds keys to a work queue); saves a thread hop
    /// per batch.
    pub inline: bool,
}

impl HandlerOptions {
    /// Sets [`HandlerOptions::resync_period`].
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Sets [`HandlerOptions::inline`].
    #[must_use]
    pub fn inline(mut self, inline: bool) -> Self {
        self.inline = inline;
        self
    }

    /// Sets [`HandlerOptions::buffer`].
    #[must_use]
    pub fn buffer(mut self, mode: BufferMode) -> Self {
        self.buffer = mode;
        self
    }
}

/// Errors of informer set-up calls.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// The informer has already started; the call only works before.
    #[error("the informer has already started")]
    AlreadyStarted,
    /// The informer has stopped; no handler can be added.
    #[error("the informer has stopped")]
    Stopped,
    /// Adding indexers failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}

enum AnyQueue<K> {
    Real(RealFifo<K>),
    Delta(DeltaFifo<K>),
}

impl<K: Send + Sync + 'static> AnyQueue<K> {
    fn as_store(&self) -> Arc<dyn ReflectorStore<K>> {
        match self {
            Self::Real(q) => Arc::new(q.clone()),
            Self::Delta(q) => Arc::new(q.clone()),
        }
    }

    fn has_synced(&self) -> bool {
        match self {
            Self::Real(q) => q.has_synced(),
            Self::Delta(q) => q.has_synced(),
        }
    }

    fn close(&self) {
        match self {
            Self::Real(q) => q.close(),
            Self::Delta(q) => q.close(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Real(q) => q.len(),
            Self::Delta(q) => q.len(),
        }
    }
}

type ReflectorStarter<K> = Box<
    dyn FnOnce(
            Arc<dyn ReflectorStore<K>>,
            reflector::Config,
            Hooks<K>,
            CancellationToken,
        ) -> (ReflectorHandle, BoxFuture<'static, ()>)
        + Send,
>;

struct Hooks<K> {
    transform: Option<TransformFunc<K>>,
    error_handler: Option<WatchErrorHandler>,
    should_resync: reflector::ShouldResyncFunc,
}

struct StartState<K> {
    started: bool,
    stopped: bool,
    check_period: Duration,
    starter: Option<ReflectorStarter<K>>,
    transform: Option<TransformFunc<K>>,
    error_handler: Option<WatchErrorHandler>,
    /// The tracker of the listener tasks and the runtime they run on (captured by `run`, so
    /// that handlers added later from any thread start there).
    tasks: Option<(TaskTracker, tokio::runtime::Handle)>,
}

pub(crate) struct Inner<K> {
    indexer: ThreadSafeStore<K>,
    processor: Processor<K>,
    queue: AnyQueue<K>,
    config: InformerConfig,
    /// Held while a popped batch is applied and distributed, and while a late handler gets its
    /// synthetic adds (client-go's `blockDeltas`).
    block_deltas: Mutex<()>,
    start: Mutex<StartState<K>>,
    synced_flag: AtomicBool,
    pub(crate) sync_notify: Arc<Notify>,
    reflector: Mutex<Option<ReflectorHandle>>,
}

/// client-go's `SharedIndexInformer`: one reflector and one cache shared by many handlers.
///
/// The reflector keeps a FIFO fed from the API server; the informer pops it, applies each batch
/// to its [`indexer`](Self::indexer) and then notifies every registered handler, each through
/// its own buffer and task. A cheap-`Clone` handle.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::informer::{HandlerFns, InformerConfig, SharedIndexInformer};
/// use kcache::testing::FakeSource;
/// use tokio_util::sync::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let source = FakeSource::<ConfigMap>::new();
/// let informer = SharedIndexInformer::new(source, InformerConfig::default());
/// let reg = informer.add_event_handler(HandlerFns::new().on_add(|cm: &Arc<ConfigMap>, _| {
///     println!("added {:?}", cm.metadata.name);
/// }))?;
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
/// reg.synced().await;
/// println!("{} objects cached", informer.indexer().len());
/// cancel.cancel();
/// # Ok(()) }
/// ```
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// An informer for `K` fed by `lw`, keyed by `namespace/name`, with the namespace index.
    pub fn new<L: ListerWatcher<K>>(lw: L, config: InformerConfig) -> Self {
        Self::with_indexers(lw, config, crate::store::namespace_indexers::<K>())
    }

    /// An informer with the given indexes (keyed by `namespace/name`).
    pub fn with_indexers<L: ListerWatcher<K>>(
        lw: L,
        config: InformerConfig,
        indexers: Indexers<K>,
    ) -> Self {
        let key_func = meta_namespace_key_func::<K>();
        let indexer = ThreadSafeStore::with_indexers(Arc::clone(&key_func), indexers);
        let queue = match config.queue {
            QueueKind::RealFifo => AnyQueue::Real(RealFifo::atomic(Arc::clone(&key_func))),
            QueueKind::RealFifoNonAtomic => AnyQueue::Real(RealFifo::non_atomic(
                Arc::clone(&key_func),
                Arc::new(indexer.clone()),
            )),
            QueueKind::DeltaFifo => AnyQueue::Delta(DeltaFifo::new(
                Arc::clone(&key_func),
                DeltaFifoOptions {
                    known_objects: Some(Arc::new(indexer.clone())),
                    emit_replaced: true,
                },
            )),
        };
        let known: Arc<dyn crate::store::KeyListerGetter<K>> = Arc::new(indexer.clone());
        let starter: ReflectorStarter<K> = Box::new(move |store, rconfig, hooks, cancel| {
            let mut r = Reflector::new(lw, store, rconfig)
                .with_should_resync(hooks.should_resync)
                .with_known_objects(known);
            if let Some(t) = hooks.transform {
                r = r.with_transform(t);
            }
            if let Some(h) = hooks.error_handler {
                r = r.with_error_handler(h);
            }
            let handle = r.handle();
            (handle, Box::pin(r.run(cancel)))
        });
        let check_period = config.resync_period;
        let inner = Inner {
            indexer,
            processor: Processor::new(),
            queue,
            config,
            block_deltas: Mutex::new(()),
            start: Mutex::new(StartState {
                started: false,
                stopped: false,
                check_period,
                starter: Some(starter),
                transform: None,
                error_handler: None,
                tasks: None,
            }),
            synced_flag: AtomicBool::new(false),
            sync_notify: Arc::new(Notify::new()),
            reflector: Mutex::new(None),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Registers a handler with the informer's default resync period.
    ///
    /// # Errors
    /// [`InformerError::Stopped`] after the informer has stopped.
    pub fn add_event_handler(
        &self,
        handler: impl EventHandler<K>,
    ) -> Result<HandlerRegistration, InformerError> {
        self.add_event_handler_with_options(handler, HandlerOptions::default())
    }

    /// Registers a handler. Before start it will see the initial list as adds with
    /// `is_in_initial_list = true`; after start it first receives a synthetic add (flagged the
    /// same way) for every cached object, then live notifications.
    ///
    /// Per-handler resync: 0 stays 0 (and is 0 if the informer's is 0); otherwise at least
    /// [`MINIMUM_RESYNC_PERIOD`] and at least the informer's check period. Before start, a
    /// shorter period lowers the informer's check period instead.
    ///
    /// # Errors
    /// [`InformerError::Stopped`] after the informer has stopped.
    pub fn add_event_handler_with_options(
        &self,
        handler: impl EventHandler<K>,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration, InformerError> {
        let inner = &self.inner;
        let mut start = inner.start.lock();
        if start.stopped {
            return Err(InformerError::Stopped);
        }
        let mut period = options.resync_period.unwrap_or(inner.config.resync_period);
        if !period.is_zero() {
            if period < MINIMUM_RESYNC_PERIOD {
                warn!(?period, "resync period too small, using the minimum of 1 s");
                period = MINIMUM_RESYNC_PERIOD;
            }
            if period < start.check_period {
                if start.started {
                    warn!(?period, check = ?start.check_period, "informer already started: resync period raised to its check period");
                    period = start.check_period;
                } else {
                    start.check_period = period;
                    inner.processor.resync_check_period_changed(period);
                }
            }
        }
        let resync = determine_resync_period(period, start.check_period);
        let listener = Arc::new(Listener::new(
            inner.processor.next_id(),
            Box::new(handler),
            options.buffer,
            options.inline,
            period,
            resync,
            Arc::clone(&inner.sync_notify),
        ));
        if start.started {
            let _block = inner.block_deltas.lock();
            inner.processor.add(Arc::clone(&listener));
            for (key, obj) in crate::store::KeyListerGetter::list_keyed(&inner.indexer) {
                listener.add(Notification::Add {
                    key,
                    obj,
                    initial: true,
                });
            }
            if let Some((tasks, runtime)) = &start.tasks {
                tasks.spawn_on(Arc::clone(&listener).run(), runtime);
            }
        } else {
            inner.processor.add(Arc::clone(&listener));
        }
        drop(start);
        Ok(HandlerRegistration::new(
            Arc::clone(inner) as Arc<dyn super::registration::InformerOps>,
            listener,
        ))
    }

    /// Sets a transform applied to every object before it is stored (e.g. to drop
    /// `managedFields`). It runs exactly once per received object.
    ///
    /// # Errors
    /// [`InformerError::AlreadyStarted`] once the informer runs.
    pub fn set_transform(
        &self,
        transform: impl Fn(K) -> K + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let mut start = self.inner.start.lock();
        if start.started {
            return Err(InformerError::AlreadyStarted);
        }
        start.transform = Some(Arc::new(transform));
        Ok(())
    }

    /// Sets the handler of every error the reflector recovers from.
    ///
    /// # Errors
    /// [`InformerError::AlreadyStarted`] once the informer runs.
    pub fn set_watch_error_handler(
        &self,
        handler: impl Fn(&reflector::Error) + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let mut start = self.inner.start.lock();
        if start.started {
            return Err(InformerError::AlreadyStarted);
        }
        start.error_handler = Some(Arc::new(handler));
        Ok(())
    }

    /// Adds indexes; existing objects are indexed at once.
    ///
    /// # Errors
    /// [`InformerError::Index`] when an index name exists already.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        Ok(self.inner.indexer.add_indexers(indexers)?)
    }

    /// The cache. Reads never wait long behind the informer's writes.
    pub fn indexer(&self) -> &ThreadSafeStore<K> {
        &self.inner.indexer
    }

    /// A lister over the cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.indexer.clone())
    }

    /// Whether the initial list has been applied to the cache (client-go `HasSynced`).
    pub fn has_synced(&self) -> bool {
        self.inner.upstream_synced()
    }

    /// Waits until [`has_synced`](Self::has_synced).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_for_sync(&self) {
        self.inner.wait_until(|| self.inner.upstream_synced()).await;
    }

    /// The resourceVersion of the last list or event the reflector saw.
    pub fn last_sync_resource_version(&self) -> String {
        self.inner
            .reflector
            .lock()
            .as_ref()
            .map(ReflectorHandle::last_sync_resource_version)
            .unwrap_or_default()
    }

    /// The reflector's health (consecutive failures, last error) for readiness checks; `None`
    /// before [`run`](Self::run).
    pub fn health(&self) -> Option<reflector::Health> {
        self.inner
            .reflector
            .lock()
            .as_ref()
            .map(ReflectorHandle::health)
    }

    /// A handle on the running reflector (its name, resourceVersion, counters and health);
    /// `None` before [`run`](Self::run).
    pub fn reflector(&self) -> Option<ReflectorHandle> {
        self.inner.reflector.lock().clone()
    }

    /// The reflector's counters; `None` before [`run`](Self::run).
    pub fn reflector_metrics(&self) -> Option<reflector::Metrics> {
        self.inner
            .reflector
            .lock()
            .as_ref()
            .map(ReflectorHandle::metrics)
    }

    /// Deltas waiting in the FIFO.
    pub fn queue_len(&self) -> usize {
        self.inner.queue.len()
    }

    /// Whether [`run`](Self::run) was called.
    pub fn has_started(&self) -> bool {
        self.inner.start.lock().started
    }

    /// Whether the informer has stopped.
    pub fn is_stopped(&self) -> bool {
        self.inner.start.lock().stopped
    }

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
                tasks.spawn(l.run());
            }
            (starter, hooks, tasks)
        };
        let check_period = inner.start.lock().check_period;
        let rconfig = inner.config.reflector.clone().resync_period(check_period);
        let reflector_cancel = cancel.child_token();
        let sink = Arc::new(super::sink::QueueSink::new(inner.queue.as_store(), &inner));
        let (handle, reflector_fut) = starter(sink, rconfig, hooks, reflector_cancel.clone());
        *inner.reflector.lock() = Some(handle);
        let reflector_task = tokio::spawn(reflector_fut);
        let process = Arc::clone(&inner).process_loop();
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
    pub(crate) fn upstream_synced(&self) -> bool {
        self.synced_flag.load(Ordering::Acquire)
    }

    pub(crate) async fn wait_until(&self, mut cond: impl FnMut() -> bool) {
        loop {
            let notified = self.sync_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if cond() {
                return;
            }
            notified.await;
        }
    }

    async fn process_loop(self: Arc<Self>) {
        loop {
            let this = Arc::clone(&self);
            let popped = match &self.queue {
                AnyQueue::Real(q) => {
                    q.pop_batch(move |d, initial| this.handle_deltas(d, initial, false))
                        .await
                }
                AnyQueue::Delta(q) => {
                    q.pop_batch(move |d, initial| this.handle_deltas(d, initial, true))
                        .await
                }
            };
            match popped {
                Ok(()) => {}
                Err(PopError::Closed) => return,
            }
            self.note_synced();
        }
    }

    /// Publishes `has_synced` once the queue says the initial list has been processed.
    pub(crate) fn note_synced(&self) {
        if !self.synced_flag.load(Ordering::Acquire) && self.queue.has_synced() {
            self.synced_flag.store(true, Ordering::Release);
            self.sync_notify.notify_waiters();
        }
    }

    /// client-go's `processDeltas`/`processDeltasInBatch`: update the indexer first, then
    /// notify. `one_key` says the deltas all concern one key (a `DeltaFifo` pop), so they must
    /// be applied one by one.
    fn handle_deltas(&self, deltas: Deltas<K>, initial: bool, one_key: bool) {
        let _block = self.block_deltas.lock();
        let mut chunk: Vec<(DeltaType, DeltaObject<K>)> = Vec::with_capacity(deltas.len());
        for d in deltas {
            match d.object {
                DeltaObject::Object { .. } | DeltaObject::DeletedFinalStateUnknown { .. } => {
                    chunk.push((d.kind, d.object));
                    if one_key {
                        self.apply_chunk(&mut chunk, initial);
                    }
                }
                DeltaObject::ReplacedAll {
                    objects,
                    resource_version,
                } => {
                    self.apply_chunk(&mut chunk, initial);
                    self.replace_all(objects, resource_version, initial);
                }
                DeltaObject::SyncAll => {
                    self.apply_chunk(&mut chunk, initial);
                    for (key, obj) in crate::store::KeyListerGetter::list_keyed(&self.indexer) {
                        self.processor.distribute(
                            Notification::Update {
                                key,
                                old: Arc::clone(&obj),
                                new: obj,
                            },
                            true,
                        );
                    }
                }
                DeltaObject::Bookmark { resource_version } => {
                    self.apply_chunk(&mut chunk, initial);
                    self.indexer.set_resource_version(resource_version);
                }
            }
        }
        self.apply_chunk(&mut chunk, initial);
    }

    fn apply_chunk(&self, chunk: &mut Vec<(DeltaType, DeltaObject<K>)>, initial: bool) {
        if chunk.is_empty() {
            return;
        }
        let txns = chunk
            .iter()
            .filter_map(|(kind, object)| match object {
                DeltaObject::Object { key, obj } if *kind != DeltaType::Deleted => {
                    Some(Transaction::Upsert(key.clone(), Arc::clone(obj)))
                }
                DeltaObject::Object { key, .. }
                | DeltaObject::DeletedFinalStateUnknown { key, .. } => {
                    Some(Transaction::Delete(key.clone()))
                }
                _ => None,
            })
            .collect();
        // client-go's store records the resourceVersion of each object it adds, updates or
        // deletes (tombstones carry none).
        let resource_version = chunk.iter().rev().find_map(|(_, object)| match object {
            DeltaObject::Object { obj, .. } => obj.meta().resource_version.clone(),
            _ => None,
        });
        let previous = self.indexer.apply_at(txns, resource_version);
        for ((kind, object), old) in chunk.drain(..).zip(previous) {
            match object {
                DeltaObject::Object { key, obj } if kind == DeltaType::Deleted => {
                    self.processor.distribute(
                        Notification::Delete {
                            key,
                            obj: DeletedObject::Final(obj),
                        },
                        false,
                    );
                }
                DeltaObject::DeletedFinalStateUnknown { key, obj } => {
                    self.processor.distribute(
                        Notification::Delete {
                            key: key.clone(),
                            obj: DeletedObject::FinalStateUnknown { key, obj },
                        },
                        false,
                    );
                }
                DeltaObject::Object { key, obj } => self.notify_upsert(key, old, obj, initial),
                _ => {}
            }
        }
    }

    fn notify_upsert(&self, key: ObjectKey, old: Option<Arc<K>>, new: Arc<K>, initial: bool) {
        match old {
            Some(old) => {
                let is_sync = old.meta().resource_version == new.meta().resource_version;
                self.processor
                    .distribute(Notification::Update { key, old, new }, is_sync);
            }
            None => self.processor.distribute(
                Notification::Add {
                    key,
                    obj: new,
                    initial,
                },
                false,
            ),
        }
    }

    /// client-go's `processReplacedAllInfo`: replace the indexer's content, then notify the
    /// deletions (tombstones with the last known state) and then the adds/updates in list order.
    fn replace_all(
        &self,
        objects: Vec<(ObjectKey, Arc<K>)>,
        resource_version: String,
        initial: bool,
    ) {
        let mut previous = self
            .indexer
            .replace_keyed(objects.clone(), resource_version);
        let mut upserts = Vec::with_capacity(objects.len());
        for (key, obj) in objects {
            let old = previous.remove(&key);
            upserts.push((key, old, obj));
        }
        for (key, obj) in previous {
            self.processor.distribute(
                Notification::Delete {
                    key: key.clone(),
                    obj: DeletedObject::FinalStateUnknown { key, obj },
                },
                false,
            );
        }
        for (key, old, obj) in upserts {
            self.notify_upsert(key, old, obj, initial);
        }
    }
}

impl<K> super::registration::InformerOps for Inner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    fn upstream_synced(&self) -> bool {
        Inner::upstream_synced(self)
    }

    fn sync_notify(&self) -> &Notify {
        &self.sync_notify
    }

    fn remove_listener(&self, id: u64) -> bool {
        self.processor.remove(id)
    }
}

impl<K: Send + Sync + 'static> std::fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("cached", &self.inner.indexer.len())
            .finish()
    }
}
