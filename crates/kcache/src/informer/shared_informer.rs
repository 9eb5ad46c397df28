//! [`SharedIndexInformer`]: reflector → FIFO → indexer + handlers.

use std::{
    sync::{Arc, atomic::AtomicBool},
    time::Duration,
};

use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::task::TaskTracker;
use tracing::{Instrument as _, warn};

use super::{
    Builder, Config, Error, Extras, FromListerWatcher, HandlerConfig, MINIMUM_RESYNC_PERIOD,
    handler::EventHandler,
    listener::{Listener, Notification, determine_resync_period},
    processor::Processor,
    registration::HandlerRegistration,
    starter::{Hooks, ReflectorStarter},
};
use crate::{
    fifo::{AnyFifo, Fifo},
    lister_watcher::ListerWatcher,
    reflector::{self, Reflector, ReflectorHandle, TransformFunc, WatchErrorHandler},
    store::{Indexers, Lister, Reader, ThreadSafeStore, meta_namespace_key_func},
};

/// What [`run`](SharedIndexInformer::run) needs to start, and whether it has.
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

/// What [`Inner::begin_run`] hands `run`: the reflector's starter, hooks and settings, and the
/// tracker of the listener tasks it spawned.
pub(super) struct Begun<K> {
    pub(super) starter: ReflectorStarter<K>,
    pub(super) hooks: Hooks<K>,
    pub(super) reflector_config: reflector::Config,
    pub(super) tasks: TaskTracker,
}

/// The informer's shared state; [`SharedIndexInformer`] is an `Arc` of it. The start state,
/// the reflector handle and the sync signal are private to this file (`run` goes through
/// [`begin_run`](Self::begin_run) and [`end_run`](Self::end_run)); the cache, FIFO and
/// processor are shared with the files that apply deltas (`deltas.rs`) and account memory
/// (`memory.rs`).
pub(crate) struct Inner<K> {
    pub(super) indexer: ThreadSafeStore<K>,
    /// The read-only view of `indexer` that readers get.
    reader: Reader<K>,
    pub(super) processor: Processor<K>,
    pub(super) queue: AnyFifo<K>,
    pub(super) config: Config,
    /// Held while a popped batch is applied and distributed, and while a late handler gets its
    /// synthetic adds (client-go's `blockDeltas`).
    pub(super) block_deltas: Mutex<()>,
    /// Held while the FIFO is drained (see `run.rs`): one consumer at a time.
    pub(super) drain_lock: Mutex<()>,
    start: Mutex<StartState<K>>,
    /// Raised by the FIFO when it turns synced, and by listeners as they finish their initial
    /// adds: what `wait_for_sync` and the registrations' `synced` wait on.
    sync_notify: Arc<Notify>,
    reflector: Mutex<Option<ReflectorHandle>>,
    /// `informer{resource}`: the span of the FIFO's drain (on the reflector's task) and of every handler task.
    pub(super) span: tracing::Span,
    /// Whether the cache was over its memory budget at the last check.
    pub(super) over_budget: AtomicBool,
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
/// use kcache::informer::{self, HandlerFns, SharedIndexInformer};
/// use kcache::testing::FakeSource;
/// use tokio_util::sync::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let source = FakeSource::<ConfigMap>::new();
/// let informer = SharedIndexInformer::new(source, informer::Config::default());
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
    pub(super) inner: Arc<Inner<K>>,
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
    /// client-go's constructor, as a shorthand: an informer for `K` fed by `lw` with `config`,
    /// keyed by `namespace/name`, with the namespace index. Exactly
    /// `SharedIndexInformer::builder(lw).config(config).build()`; every other setting is made
    /// on the [`Builder`].
    pub fn new<L: ListerWatcher<K>>(lw: L, config: Config) -> Self {
        Self::builder(lw).config(config).build()
    }

    /// A [`Builder`] for an informer of its own fed by `lw`: its configuration, indexes,
    /// transform, watch error handler and memory accounting are set there, before the informer
    /// exists. (A factory's shared informer comes from the same builder:
    /// `factory.informer_builder::<K>(&source)`, see [`InformerFrom`](crate::InformerFrom).)
    pub fn builder<L: ListerWatcher<K>>(lw: L) -> Builder<K, FromListerWatcher<L>> {
        Builder::new(lw)
    }

    pub(crate) fn from_parts<L: ListerWatcher<K>>(
        lw: L,
        config: Config,
        indexers: Indexers<K>,
        extras: Extras<K>,
    ) -> Self {
        let Extras {
            transform,
            error_handler,
            sizer,
        } = extras;
        let key_func = meta_namespace_key_func::<K>();
        // The reflector's name (its span carries it too): the handler tasks and the process
        // loop log under it, so every line names the resource.
        let resource = if config.reflector.name.is_empty() {
            lw.describe()
        } else {
            config.reflector.name.clone()
        };
        let span = tracing::info_span!("informer", resource = %resource);
        // Reads each object's resourceVersion, as every store of Kubernetes objects does.
        let indexer = ThreadSafeStore::with_indexers(Arc::clone(&key_func), indexers);
        if let Some(sizer) = sizer {
            // A new store has no sizer yet: this cannot be refused.
            indexer.set_sizer(sizer);
        }
        let queue = AnyFifo::new(
            config.queue,
            Arc::clone(&key_func),
            Arc::new(indexer.clone()),
        );
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
        let sync_notify = Arc::new(Notify::new());
        queue.set_synced_signal(Arc::clone(&sync_notify));
        let inner = Inner {
            reader: Reader::from(indexer.clone()),
            indexer,
            processor: Processor::new(),
            queue,
            config,
            block_deltas: Mutex::new(()),
            drain_lock: Mutex::new(()),
            start: Mutex::new(StartState {
                started: false,
                stopped: false,
                check_period,
                starter: Some(starter),
                transform,
                error_handler,
                tasks: None,
            }),
            sync_notify,
            reflector: Mutex::new(None),
            span,
            over_budget: AtomicBool::new(false),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Registers a handler with the informer's default resync period.
    ///
    /// # Errors
    /// [`Error::Stopped`] after the informer has stopped.
    pub fn add_event_handler(
        &self,
        handler: impl EventHandler<K>,
    ) -> Result<HandlerRegistration, Error> {
        self.add_event_handler_with_config(handler, HandlerConfig::default())
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
    /// [`Error::Stopped`] after the informer has stopped.
    pub fn add_event_handler_with_config(
        &self,
        handler: impl EventHandler<K>,
        handler_config: HandlerConfig,
    ) -> Result<HandlerRegistration, Error> {
        let inner = &self.inner;
        let mut start = inner.start.lock();
        if start.stopped {
            return Err(Error::Stopped);
        }
        let mut period = handler_config
            .resync_period
            .unwrap_or(inner.config.resync_period);
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
            handler_config.name,
            Box::new(handler),
            handler_config.buffer,
            handler_config.delivery,
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
                tasks.spawn_on(
                    Arc::clone(&listener).run().instrument(inner.span.clone()),
                    runtime,
                );
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

    /// Adds indexes; existing objects are indexed at once.
    ///
    /// # Errors
    /// [`Error::Index`] when an index name exists already.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        Ok(self.inner.indexer.add_indexers(indexers)?)
    }

    /// The cache, read-only: the informer is its one writer. Reads never wait long behind
    /// the informer's writes.
    pub fn indexer(&self) -> &Reader<K> {
        &self.inner.reader
    }

    /// A lister over the cache (read-only, like [`indexer`](Self::indexer)).
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.reader.clone())
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

    /// How often the informer asks whether a handler's resync is due (client-go's
    /// `resyncCheckPeriod`): [`Config::resync_period`], lowered before start by any handler
    /// registered with a shorter (non-zero) period; zero when the informer does not resync.
    ///
    /// ```
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::informer::{self, HandlerConfig, HandlerFns, SharedIndexInformer};
    /// use kcache::testing::FakeSource;
    ///
    /// let config = informer::Config::default().resync_period(Duration::from_secs(60));
    /// let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), config);
    /// assert_eq!(informer.resync_check_period(), Duration::from_secs(60));
    /// let often = HandlerConfig::default().resync_period(Duration::from_secs(5));
    /// informer.add_event_handler_with_config(HandlerFns::new(), often)?;
    /// assert_eq!(informer.resync_check_period(), Duration::from_secs(5));
    /// # Ok::<(), kcache::informer::Error>(())
    /// ```
    pub fn resync_check_period(&self) -> Duration {
        self.inner.start.lock().check_period
    }

    /// Whether [`run`](Self::run) was called.
    pub fn has_started(&self) -> bool {
        self.inner.start.lock().started
    }

    /// Whether the informer has stopped.
    pub fn is_stopped(&self) -> bool {
        self.inner.start.lock().stopped
    }
}

impl<K> Inner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Marks the informer started and spawns the listener tasks; `None` when it had started
    /// or stopped already (a second `run`).
    pub(super) fn begin_run(self: &Arc<Self>) -> Option<Begun<K>> {
        let mut start = self.start.lock();
        if start.started || start.stopped {
            return None;
        }
        let starter = start.starter.take()?;
        start.started = true;
        let tasks = TaskTracker::new();
        start.tasks = Some((tasks.clone(), tokio::runtime::Handle::current()));
        let weak = Arc::downgrade(self);
        let hooks = Hooks {
            transform: start.transform.clone(),
            error_handler: start.error_handler.clone(),
            should_resync: Arc::new(move || {
                weak.upgrade().is_some_and(|i| i.processor.should_resync())
            }),
        };
        // Listener tasks, under the start lock so that none is spawned twice.
        for l in self.processor.listeners() {
            tasks.spawn(l.run().instrument(self.span.clone()));
        }
        let reflector_config = self
            .config
            .reflector
            .clone()
            .resync_period(start.check_period);
        Some(Begun {
            starter,
            hooks,
            reflector_config,
            tasks,
        })
    }

    /// Records the running reflector's handle.
    pub(super) fn set_reflector(&self, handle: ReflectorHandle) {
        *self.reflector.lock() = Some(handle);
    }

    /// After the reflector stopped: closes the FIFO, marks the informer stopped (no handler
    /// can be added any more) and closes the listeners' buffers.
    pub(super) fn end_run(&self) {
        self.queue.close();
        self.start.lock().stopped = true;
        self.processor.close_all();
    }

    /// Wakes every `wait_until` (once the listener tasks have ended).
    pub(super) fn wake_waiters(&self) {
        self.sync_notify.notify_waiters();
    }

    /// The reflector's name, or the type's before `run`: what logs name the informer by.
    pub(super) fn resource_name(&self) -> String {
        self.reflector.lock().as_ref().map_or_else(
            || std::any::type_name::<K>().to_owned(),
            |r| r.name().to_owned(),
        )
    }

    /// Whether the FIFO has handed out (and the informer processed) its initial list.
    pub(crate) fn upstream_synced(&self) -> bool {
        self.queue.has_synced()
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
