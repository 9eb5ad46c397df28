//! [`ControllerBuilder`]: a controller of the [`Manager`](crate::Manager), declared as
//! controller-runtime's builder declares one (`For`, `Owns`, `Watches`, `WithEventFilter`,
//! options, `Complete`), on kcache's [`Controller`].

mod context;
pub mod filter;
mod own_writes;
mod primary_set;
mod reconciler;

use std::{future::Future, sync::Arc, time::Duration};

use futures::{FutureExt, future::BoxFuture};
use kcache::{
    controller::{
        self as kcontroller, Action, Controller, DefaultErrorPolicy, ErrorPolicy, ReconcileError,
        UpdateFilter, WorkQueueKind,
    },
    store::ObjectKey,
    workqueue::RateLimiter,
};
use kcache_client::{
    Compact,
    events::{Recorder, Reporter},
};
use kube_core::Resource;

pub use context::Context;
pub(crate) use context::Shared;
use own_writes::OwnWrites;
use reconciler::{Policy, reconcile_key};

use crate::{
    ApiObject, Manager,
    expectations::Expectations,
    manager::{Cached, Error, Runnable},
};

/// The kcache controller being built, on the primary cache's stored form.
enum Primary<K> {
    Typed(Controller<K>),
    Lean(Controller<Compact<K>>),
}

/// Adds a relation (owns, watches) to the kcache controller being built.
type Relation<K> = Box<dyn FnOnce(Primary<K>) -> Primary<K> + Send>;

/// Resolves once an informer the controller reads has synced.
type Synced = BoxFuture<'static, ()>;

fn synced<C: ApiObject>(cache: &Cached<C>) -> Synced {
    let cache = cache.clone();
    async move { cache.wait_for_sync().await }.boxed()
}

/// `controller` also reconciles the owners of the objects of `cache` (of each informer of a
/// namespace set).
fn owns_on<P, C>(mut controller: Controller<P>, cache: &Cached<C>) -> Controller<P>
where
    P: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    C: ApiObject,
{
    for informer in cache.typed_informers() {
        controller = controller.owns(informer);
    }
    for informer in cache.lean_informers() {
        controller = controller.owns(informer);
    }
    controller
}

/// `controller` also reconciles the keys `map` derives from the objects of `cache` (of each
/// informer of a namespace set; decoded when stored lean).
fn watches_on<P, W>(mut controller: Controller<P>, cache: &Cached<W>, map: Map<W>) -> Controller<P>
where
    P: Resource + Clone + Send + Sync + 'static,
    W: ApiObject,
{
    for informer in cache.typed_informers() {
        let map = Arc::clone(&map);
        controller = controller.watches(informer, move |w: &W| map(w));
    }
    for informer in cache.lean_informers() {
        let map = Arc::clone(&map);
        controller = controller.watches(informer, move |w: &Compact<W>| {
            w.typed().map(|w| map(&w)).unwrap_or_else(|error| {
                tracing::warn!(%error, "a watched object does not decode; it queues nothing");
                Vec::new()
            })
        });
    }
    controller
}

/// The map of a [`ControllerBuilder::watches`].
type Map<W> = Arc<dyn Fn(&W) -> Vec<ObjectKey> + Send + Sync>;

/// A controller of primary type `K`, being declared on a [`Manager`]
/// ([`Manager::controller`]); [`build`](Self::build) hands it to the manager with its
/// reconcile function, and [`Manager::run`] runs it.
///
/// The defaults are kcache's [`Controller`]'s (one worker, client-go's rate limiter, retries
/// with backoff for ever); the name defaults to `K`'s plural resource name (`websites`) and
/// names the controller's metrics, its work queue's `workqueue_*` series, and by default its
/// Events' reporter and its field manager (`MANAGER/NAME`; see
/// [`field_manager`](Self::field_manager), [`event_reporter`](Self::event_reporter)).
///
/// ```no_run
/// use std::{sync::Arc, time::Duration};
/// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
/// use kcache_runtime::{Action, Context, Manager, api, filter, manager};
///
/// async fn reconcile(_dep: Arc<Deployment>, ctx: Context<Deployment>) -> Result<Action, api::Error> {
///     let _settings = ctx.get::<ConfigMap>("settings");
///     Ok(Action::RequeueAfter(Duration::from_secs(300)))
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kcache_client::Client::infer().await?;
/// let manager = Manager::new(client, manager::Config::new("demo"))?;
/// manager
///     .controller::<Deployment>()
///     .owns::<ConfigMap>()
///     .with_event_filter(filter::generation_changed)
///     .workers(2)
///     .reconcile_timeout(Duration::from_secs(60))
///     .build(reconcile)?;
/// manager.run().await?;
/// # Ok(()) }
/// ```
#[must_use = "a controller is added to the manager by `build`"]
pub struct ControllerBuilder<'m, K, P = DefaultErrorPolicy> {
    manager: &'m Manager,
    config: kcontroller::Config,
    field_manager: Option<String>,
    event_reporter: Option<String>,
    filters: Vec<UpdateFilter<K>>,
    relations: Vec<Relation<K>>,
    /// The owned and watched informers: reconciles start once they have synced.
    synced: Vec<Synced>,
    policy: P,
}

impl<K, P> std::fmt::Debug for ControllerBuilder<'_, K, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerBuilder")
            .field("config", &self.config)
            .field("filters", &self.filters.len())
            .field("relations", &self.relations.len())
            .finish_non_exhaustive()
    }
}

impl<'m, K: ApiObject> ControllerBuilder<'m, K> {
    pub(crate) fn new(manager: &'m Manager) -> Self {
        Self {
            manager,
            config: kcontroller::Config::default().name(K::plural(&()).into_owned()),
            field_manager: None,
            event_reporter: None,
            filters: Vec::new(),
            relations: Vec::new(),
            synced: Vec::new(),
            policy: DefaultErrorPolicy,
        }
    }
}

impl<'m, K: ApiObject, P> ControllerBuilder<'m, K, P> {
    /// Names the controller (default: `K`'s plural resource name). Names are unique within
    /// a manager.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config = self.config.name(name);
        self
    }

    /// The field manager of this controller's writes (default: the manager's
    /// [`field_manager`](crate::manager::Config::field_manager), else `MANAGER/NAME`).
    pub fn field_manager(mut self, manager: impl Into<String>) -> Self {
        self.field_manager = Some(manager.into());
        self
    }

    /// The reporting controller of this controller's Events (default: the manager's
    /// [`event_reporter`](crate::manager::Config::event_reporter), else `MANAGER/NAME`).
    pub fn event_reporter(mut self, reporter: impl Into<String>) -> Self {
        self.event_reporter = Some(reporter.into());
        self
    }

    /// Concurrent reconciles (default 1; controller-runtime's `MaxConcurrentReconciles`).
    pub fn workers(mut self, workers: usize) -> Self {
        self.config = self.config.workers(workers);
        self
    }

    /// Gives up on a key after this many failed retries in a row (default: never).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.config = self.config.max_retries(retries);
        self
    }

    /// Cancels a reconcile that takes longer, and retries it with backoff (default: no
    /// limit). The wait for the caches (read-your-own-writes) counts towards it.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.reconcile_timeout(timeout);
        self
    }

    /// Paces retries with `limiter` (default: client-go's controller rate limiter).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<ObjectKey> + 'static) -> Self {
        self.config = self.config.rate_limiter(limiter);
        self
    }

    /// The kind of work queue (default [`WorkQueueKind::RateLimiting`];
    /// [`WorkQueueKind::Priority`] reconciles new changes before a relist's).
    pub fn queue(mut self, kind: WorkQueueKind) -> Self {
        self.config = self.config.queue(kind);
        self
    }

    /// Also reconciles the owner of every `C` whose controller owner reference points to a
    /// `K` (what [`Context::apply_owned`] writes). The manager caches `C`, and reconciles
    /// read it with [`Context::get`] or [`Context::lister`].
    pub fn owns<C: ApiObject>(mut self) -> Self {
        let cache = self.manager.informer::<C>();
        self.synced.push(synced(&cache));
        self.relations
            .push(Box::new(move |controller| match controller {
                Primary::Typed(c) => Primary::Typed(owns_on(c, &cache)),
                Primary::Lean(c) => Primary::Lean(owns_on(c, &cache)),
            }));
        self
    }

    /// Also reconciles the keys `map` derives from each change of a `W` (controller-runtime's
    /// `Watches` with an `EnqueueRequestsFromMapFunc`). The manager caches `W`; a `W`
    /// stored lean is decoded for `map` on each change (watch `PartialObjectMeta<W>`, see
    /// [`Manager::metadata_cache`], when `map` reads only metadata).
    pub fn watches<W: ApiObject>(
        mut self,
        map: impl Fn(&W) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let cache = self.manager.informer::<W>();
        self.synced.push(synced(&cache));
        let map: Map<W> = Arc::new(map);
        self.relations
            .push(Box::new(move |controller| match controller {
                Primary::Typed(c) => Primary::Typed(watches_on(c, &cache, map)),
                Primary::Lean(c) => Primary::Lean(watches_on(c, &cache, map)),
            }));
        self
    }

    /// An update of a primary object queues its key only when `filter(old, new)` passes;
    /// see [`filter`] (e.g. [`filter::generation_changed`]: spec changes only). Several
    /// filters must all pass. Adds and deletes always queue; owned and watched types are
    /// not filtered. With the primary type stored lean, an update with filters decodes the
    /// old and the new object.
    pub fn with_event_filter(
        mut self,
        filter: impl Fn(&K, &K) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.filters.push(Arc::new(filter));
        self
    }

    /// Decides what happens after a failed reconcile (see [`ErrorPolicy`]; a closure
    /// `|key: &ObjectKey, err: &E, retries: u32| ErrorAction` is one). Default: retry with
    /// the queue's backoff. A reconcile not run because the caches had not caught up is
    /// always retried with backoff.
    pub fn error_policy<P2>(self, policy: P2) -> ControllerBuilder<'m, K, P2> {
        ControllerBuilder {
            manager: self.manager,
            config: self.config,
            field_manager: self.field_manager,
            event_reporter: self.event_reporter,
            filters: self.filters,
            relations: self.relations,
            synced: self.synced,
            policy,
        }
    }

    /// Builds the controller and adds it to the manager, which runs it in [`Manager::run`]
    /// (building starts nothing; controller-runtime's `Builder.Build`):
    /// `reconcile(object, context)` for every queued key whose object is in the cache,
    /// once the caches show this controller's earlier writes of that key. Reconciles start
    /// once the primary, owned and watched informers have all synced. `Ok(action)` says
    /// what next ([`Action`]); `Err` goes to the error policy.
    ///
    /// An object gone from the cache is not reconciled: what it owns is garbage collected,
    /// and what must be released before it goes belongs in a [finalizer](Context::finalizer).
    ///
    /// The update events of the primary objects this controller wrote itself through its
    /// [`Context`] (status, annotations, finalizers) do not queue them again: the reconcile
    /// that wrote saw what it wrote and said with its [`Action`] what comes next (a failed
    /// one is retried with the queue's backoff instead of at once, on its own event). Other
    /// writers' updates, adds and deletes queue as usual. (controller-runtime queues on every
    /// event; its users filter their own status writes out with
    /// `GenerationChangedPredicate`.)
    ///
    /// # Errors
    /// [`Error::DuplicateController`] when the manager already has a controller of this
    /// name.
    pub fn build<F, Fut, E>(self, reconcile: F) -> Result<(), Error>
    where
        F: Fn(Arc<K>, Context<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: ReconcileError,
        P: ErrorPolicy<E>,
    {
        let Self {
            manager,
            config,
            field_manager,
            event_reporter,
            filters,
            relations,
            synced,
            policy,
        } = self;
        let name = config.name.clone();
        manager.reserve_controller(&name)?;
        let m = Arc::clone(&manager.shared);
        let primary = manager.informer::<K>();
        let config = config.metrics_provider(m.workqueue_metrics.clone());
        let workers = config.workers;
        let own_writes = Arc::new(OwnWrites::new(m.config.expectations_ttl));
        let own = Arc::clone(&own_writes);
        let filtered = !filters.is_empty();
        let passes = move |old: &K, new: &K| filters.iter().all(|f| f(old, new));
        // The update events of this controller's own writes queue nothing: the reconcile
        // that wrote knew what it wrote, and returned what comes next. The primary
        // informer is the only one, or the first of a namespace set (the others queue
        // through `primary_set`, with the same filter).
        let mut more = None;
        let mut controller = match (primary.typed_informers(), primary.lean_informers()) {
            ([first, rest @ ..], _) => {
                let filter: UpdateFilter<K> =
                    Arc::new(move |old: &K, new: &K| !own.take(new) && passes(old, new));
                let f = Arc::clone(&filter);
                let c =
                    Controller::new_with_update_filter(first.clone(), config, move |o, n| f(o, n));
                if !rest.is_empty() {
                    more = Some(primary_set::register(rest, c.queue(), &filter, &name));
                }
                Primary::Typed(c)
            }
            (_, [first, rest @ ..]) => {
                let filter: UpdateFilter<Compact<K>> =
                    Arc::new(move |old: &Compact<K>, new: &Compact<K>| {
                        !own.take(new)
                            && (!filtered
                                || match (old.typed(), new.typed()) {
                                    (Ok(old), Ok(new)) => passes(&old, &new),
                                    // Not decodable: the reconcile reads it as absent.
                                    _ => true,
                                })
                    });
                let f = Arc::clone(&filter);
                let c =
                    Controller::new_with_update_filter(first.clone(), config, move |o, n| f(o, n));
                if !rest.is_empty() {
                    more = Some(primary_set::register(rest, c.queue(), &filter, &name));
                }
                Primary::Lean(c)
            }
            _ => unreachable!("a cache is typed or lean, with one informer at least"),
        };
        let mut synced = synced;
        if more.is_some() {
            // The first informer's sync is awaited by the controller itself; the others'
            // here.
            synced.push(self::synced(&primary));
        }
        for relation in relations {
            controller = relation(controller);
        }
        let metrics = m.runtime_metrics.controller(&name);
        let default = || format!("{}/{name}", m.config.name);
        let reporter = Reporter {
            controller: event_reporter
                .or_else(|| m.config.event_reporter.clone())
                .unwrap_or_else(default),
            instance: Some(m.identity.clone()),
        };
        let shared = Arc::new(Shared {
            field_manager: field_manager
                .or_else(|| m.config.field_manager.clone())
                .unwrap_or_else(default),
            recorder: Recorder::new(&m.client, reporter),
            expectations: Arc::new(Expectations::new(
                name.clone(),
                Arc::clone(&m.wake),
                m.config.expectations_ttl,
                metrics.clone(),
            )),
            metrics,
            manager: Arc::clone(&m),
            primary,
            own_writes,
            name: name.clone(),
        });
        let reconcile = Arc::new(reconcile);
        let run_one =
            move |key: ObjectKey| reconcile_key(Arc::clone(&shared), Arc::clone(&reconcile), key);
        let (registrations, keys) = more.unzip();
        let parts = Parts {
            synced,
            more: keys,
            registrations: registrations.unwrap_or_default(),
        };
        let runnable = match controller {
            Primary::Typed(c) => runnable(c, Policy(policy), parts, run_one, &m, &name, workers),
            Primary::Lean(c) => runnable(c, Policy(policy), parts, run_one, &m, &name, workers),
        };
        manager.add_controller(name, runnable);
        Ok(())
    }
}

/// What the manager's run of a controller needs besides the kcache controller.
struct Parts {
    /// The owned and watched caches (and a primary set's), awaited before any reconcile.
    synced: Vec<Synced>,
    /// The keys of a primary set's informers beyond the first, queued on each start of
    /// leading.
    more: Option<primary_set::Keys>,
    /// The handlers of those informers, removed when the controller stops.
    registrations: Vec<kcache::HandlerRegistration>,
}

/// The controller, with its error policy and metrics, as the manager runs it: once the
/// owned and watched caches have synced, `run_one` for every key, while leading.
fn runnable<S, P, F, Fut, E>(
    controller: Controller<S>,
    policy: P,
    parts: Parts,
    run_one: F,
    m: &crate::manager::Shared,
    name: &str,
    workers: usize,
) -> Runnable
where
    S: Resource + Clone + Send + Sync + 'static,
    P: ErrorPolicy<E>,
    F: Fn(ObjectKey) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: ReconcileError,
{
    let controller = controller.with_error_policy(policy);
    m.controller_metrics
        .register_controller(name.to_owned(), workers, controller.metrics());
    let run_one = move |key: ObjectKey, _cached: Option<Arc<S>>| run_one(key);
    let Parts {
        synced,
        more,
        registrations,
    } = parts;
    Box::new(move |leading, cancel| {
        async move {
            // The primary's sync is awaited by the controller itself; the owned and
            // watched caches must be complete too before a reconcile reads them.
            tokio::select! {
                _ = futures::future::join_all(synced) => {}
                () = cancel.cancelled() => {}
            }
            let result = match leading {
                Some(leading) => {
                    let requeue = more.map(|keys| {
                        primary_set::requeue_while_leading(
                            leading.clone(),
                            controller.queue().clone(),
                            keys,
                            cancel.clone(),
                        )
                    });
                    let run = controller.run_while_leading(leading, run_one, cancel);
                    match requeue {
                        None => run.await,
                        Some(requeue) => {
                            tokio::pin!(run);
                            tokio::select! {
                                result = &mut run => result,
                                () = requeue => run.await,
                            }
                        }
                    }
                }
                None => controller.run(run_one, cancel).await,
            };
            for registration in &registrations {
                registration.remove();
            }
            result
        }
        .boxed()
    })
}
