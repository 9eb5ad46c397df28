//! [`Manager`]: the client, the shared informers, the controllers, leader election, one
//! Prometheus registry with the probes server, signals and a graceful shutdown, in one
//! value configured by [`Config`] and run by one call.
//!
//! Each cached type is one informer, of every namespace or of one, or, for a set of
//! namespaces ([`Config::namespaces`], [`Cache::namespaces`]), one informer per namespace
//! whose reads [`Cached`] merges (controller-runtime's multi-namespace cache).

mod cache;
mod cached;
mod config;
mod error;
mod informers;
mod namespaces;
mod run;

use std::{
    any::{Any, TypeId},
    collections::{HashMap, HashSet},
    net::SocketAddr,
    sync::Arc,
};

use futures::future::BoxFuture;
use kcache::{
    EventHandler, SharedInformerFactory, factory,
    informer::DeletedObject,
    leaderelection::{self, LeaderElector, LeaderState},
};
use kcache_client::{HttpLeaseLock, LeaseClient};
use kcache_metrics::{Check, ControllerMetrics, InformerMetrics, WorkqueueMetrics};
use kube_core::metadata::PartialObjectMeta;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

pub use cache::Cache;
pub use cached::{Cached, Lister, Storage};
pub use config::{Config, LeaderElection};
pub use error::Error;

use namespaces::SetFactories;

use crate::{ApiObject, ControllerBuilder, metrics::RuntimeMetrics};

/// A controller ready to run: given the leader state to follow (`None`: always leading) and
/// the shutdown token.
pub(crate) type Runnable = Box<
    dyn FnOnce(
            Option<watch::Receiver<LeaderState>>,
            CancellationToken,
        ) -> BoxFuture<'static, Result<(), kcache::controller::Error>>
        + Send,
>;

/// A [`Cached<C>`], type-erased.
type AnyInformer = Box<dyn Any + Send + Sync>;

/// What the manager shares with its controllers and their reconciles.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) client: kcache_client::Client,
    /// The one kube client for writes (kube's retries of 429/503/504).
    pub(crate) kube: kube_client::Client,
    pub(crate) identity: String,
    factory: SharedInformerFactory,
    /// The factories of the namespaces of sets (one informer per namespace and type).
    sets: SetFactories,
    /// `Cached<C>` by `TypeId::of::<C>()`, with its selectors described.
    informers: Mutex<HashMap<TypeId, (AnyInformer, String)>>,
    /// Notified after every change any informer applied to its cache.
    pub(crate) wake: Arc<Notify>,
    /// Cancelled when the controllers start draining.
    pub(crate) stopping: CancellationToken,
    pub(crate) informer_metrics: InformerMetrics,
    pub(crate) controller_metrics: ControllerMetrics,
    pub(crate) workqueue_metrics: Arc<WorkqueueMetrics>,
    pub(crate) runtime_metrics: RuntimeMetrics,
}

impl Shared {
    /// The cached `C`, if the manager caches it.
    pub(crate) fn cached<C: ApiObject>(&self) -> Option<Cached<C>> {
        self.informers
            .lock()
            .get(&TypeId::of::<C>())
            .and_then(|(i, _)| i.downcast_ref::<Cached<C>>())
            .cloned()
    }

    /// The selectors of the cache of `C` (`no selector` when whole), if the manager caches it.
    pub(crate) fn selectors<C: ApiObject>(&self) -> Option<String> {
        self.informers
            .lock()
            .get(&TypeId::of::<C>())
            .map(|(_, s)| s.clone())
    }
}

/// Wakes the reconciles waiting for a cache (read-your-own-writes) after each change.
struct Wake(Arc<Notify>);

impl<C: Send + Sync + 'static> EventHandler<C> for Wake {
    fn on_add(&self, _obj: &Arc<C>, _initial: bool) {
        self.0.notify_waiters();
    }
    fn on_update(&self, _old: &Arc<C>, _new: &Arc<C>) {
        self.0.notify_waiters();
    }
    fn on_delete(&self, _obj: &DeletedObject<C>) {
        self.0.notify_waiters();
    }
}

/// Runs controllers as one process: the client, the shared informers (one per type, lean
/// storage unless [`Config::storage`] or a type's [`Cache`] say otherwise), the controllers declared with [`controller`](Self::controller), leader
/// election with warm standby, one Prometheus registry with every family registered, the
/// `/metrics` `/healthz` `/readyz` server, SIGTERM/SIGINT and a graceful shutdown.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_runtime::{Action, Context, Manager, api, manager};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kcache_client::Client::infer().await?;
/// let config = manager::Config::new("demo")
///     .leader_election(manager::LeaderElection::new("demo"))
///     .metrics_addr("0.0.0.0:8080".parse()?);
/// let manager = Manager::new(client, config)?;
/// manager
///     .controller::<ConfigMap>()
///     .build(|cm: Arc<ConfigMap>, _ctx: Context<ConfigMap>| async move {
///         println!("{:?}", cm.metadata.name);
///         Ok::<_, api::Error>(Action::Done)
///     })?;
/// manager.run().await?; // until SIGTERM or SIGINT
/// # Ok(()) }
/// ```
pub struct Manager {
    pub(crate) shared: Arc<Shared>,
    registry: Arc<Registry>,
    elector: Option<Arc<LeaderElector<HttpLeaseLock>>>,
    lease_name: Option<String>,
    listener: Mutex<Option<std::net::TcpListener>>,
    metrics_addr: Option<SocketAddr>,
    controllers: Mutex<Vec<(String, Runnable)>>,
    names: Mutex<HashSet<String>>,
    checks: Mutex<kcache_metrics::Checks>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("name", &self.shared.config.name)
            .field("identity", &self.shared.identity)
            .field("controllers", &self.names.lock().len())
            .field("leader_election", &self.lease_name)
            .field("metrics_addr", &self.metrics_addr)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A manager on `client` (whose lists and watches go without retries, and whose writes
    /// go through its `kube_for_writes` client with kube's), with an empty registry.
    ///
    /// # Errors
    /// [`Error::LeaderElection`] when the election's timings are invalid, [`Error::Bind`]
    /// when the metrics address cannot be bound.
    pub fn new(client: kcache_client::Client, config: Config) -> Result<Self, Error> {
        Self::with_registry(client, config, Registry::default())
    }

    /// [`new`](Self::new), serving `registry` (with the application's own families) with
    /// the manager's families added to it.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_registry(
        client: kcache_client::Client,
        config: Config,
        mut registry: Registry,
    ) -> Result<Self, Error> {
        let identity = config.identity.clone().unwrap_or_else(default_identity);
        let (elector, lease_name) = match &config.leader_election {
            None => (None, None),
            Some(election) => {
                let namespace = election
                    .lease_namespace
                    .clone()
                    .or_else(|| config.namespace.clone())
                    .unwrap_or_else(pod_namespace);
                let mut le = leaderelection::Config::new(identity.clone());
                le.lease_duration = election.lease_duration;
                le.renew_deadline = election.renew_deadline;
                le.retry_period = election.retry_period;
                // The workers have drained (or were aborted) before the election is cancelled.
                le.release_on_cancel = true;
                let lock = HttpLeaseLock::new(LeaseClient::new(
                    client.clone(),
                    &namespace,
                    &election.lease_name,
                ));
                let elector =
                    LeaderElector::new(le, lock).map_err(|source| Error::LeaderElection {
                        manager: config.name.clone(),
                        source,
                    })?;
                (Some(Arc::new(elector)), Some(election.lease_name.clone()))
            }
        };
        let (listener, metrics_addr) = match config.metrics_addr {
            None => (None, None),
            Some(addr) => {
                let bind = |e| Error::Bind {
                    manager: config.name.clone(),
                    addr,
                    source: e,
                };
                let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
                let local = listener.local_addr().map_err(bind)?;
                (Some(listener), Some(local))
            }
        };
        let informer_metrics = InformerMetrics::new(&mut registry);
        let controller_metrics = ControllerMetrics::new(&mut registry);
        let workqueue_metrics = Arc::new(WorkqueueMetrics::with_controller_label(&mut registry));
        let runtime_metrics = RuntimeMetrics::new(&mut registry);
        let mut checks = kcache_metrics::Checks::new().with_informers(informer_metrics.clone());
        if let (Some(elector), Some(lease)) = (&elector, &lease_name) {
            let state = elector.watch();
            controller_metrics.register_leader(lease.clone(), move || state.borrow().is_leading());
            // client-go's HealthzAdaptor tolerance in controller-runtime's manager: 20 s.
            checks = checks.live(
                "leaderElection",
                kcache_metrics::leader_election_check(
                    Arc::clone(elector),
                    std::time::Duration::from_secs(20),
                ),
            );
        }
        let mut factory_config =
            factory::Config::default().strip_managed_fields(config.strip_managed_fields);
        if let Some(ns) = &config.namespace {
            factory_config = factory_config.namespace(ns.clone());
        }
        let shared = Shared {
            kube: client.kube_for_writes().clone(),
            client,
            identity,
            sets: SetFactories::new(factory_config.clone()),
            factory: SharedInformerFactory::new(factory_config),
            informers: Mutex::new(HashMap::new()),
            wake: Arc::new(Notify::new()),
            stopping: CancellationToken::new(),
            informer_metrics,
            controller_metrics,
            workqueue_metrics,
            runtime_metrics,
            config,
        };
        Ok(Self {
            shared: Arc::new(shared),
            registry: Arc::new(registry),
            elector,
            lease_name,
            listener: Mutex::new(listener),
            metrics_addr,
            controllers: Mutex::new(Vec::new()),
            names: Mutex::new(HashSet::new()),
            checks: Mutex::new(checks),
        })
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on `listener`, already bound (a test's
    /// port picked in advance, a socket handed over by systemd), instead of
    /// [`Config::metrics_addr`] (whose listener, if bound, is closed).
    ///
    /// A tokio listener converts with `into_std()`:
    ///
    /// ```no_run
    /// use kcache_runtime::{Manager, manager};
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let addr = listener.local_addr()?;
    /// let client = kcache_client::Client::infer().await?;
    /// let manager = Manager::new(client, manager::Config::new("demo"))?
    ///     .with_metrics_listener(listener.into_std()?)?;
    /// assert_eq!(manager.metrics_addr(), Some(addr));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Bind`] when the listener's address cannot be read.
    pub fn with_metrics_listener(mut self, listener: std::net::TcpListener) -> Result<Self, Error> {
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            manager: self.shared.config.name.clone(),
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            source,
        })?;
        self.listener = Mutex::new(Some(listener));
        self.metrics_addr = Some(addr);
        Ok(self)
    }

    /// Declares a controller of primary type `K`; see [`ControllerBuilder`].
    pub fn controller<K: ApiObject>(&self) -> ControllerBuilder<'_, K> {
        ControllerBuilder::new(self)
    }

    /// The manager's cache of `C` (lean storage unless [`Config::storage`] or its
    /// [`cache`](Self::cache) say otherwise, in the manager's namespace or namespaces (one
    /// informer per namespace of a set, see [`Config::namespaces`]), with the settings of
    /// its [`cache`](Self::cache) if one was declared, else the manager's defaults), created
    /// on first request: it starts when the manager runs, on every replica; its metrics are
    /// exported, readiness waits for its sync, and reconciles read it, typed, with
    /// [`Context::lister`](crate::Context::lister) and [`Context::get`](crate::Context::get).
    /// [`owns`](ControllerBuilder::owns) and [`watches`](ControllerBuilder::watches) call
    /// it; call it for a type the reconciles read without being triggered by it.
    pub fn informer<C: ApiObject>(&self) -> Cached<C> {
        if let Some(existing) = self.shared.cached::<C>() {
            return existing;
        }
        self.make_informer(Cache::new())
            .expect("no settings of its own: the factory's, which cannot conflict")
    }

    /// The manager's metadata-only cache of `C` (controller-runtime's
    /// `PartialObjectMetadata`): its lists and watches ask the server for
    /// `PartialObjectMetadata`, so only names, labels, annotations, owner references and
    /// the like are transferred and kept. Reconciles read it as
    /// `ctx.get::<PartialObjectMeta<C>>(name)`; [`owns`](ControllerBuilder::owns) and
    /// [`watches`](ControllerBuilder::watches) take `PartialObjectMeta<C>` too. Declare its
    /// selectors with `manager.cache::<PartialObjectMeta<C>>(..)`.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Secret;
    /// use kcache_runtime::{Manager, manager};
    /// use kube_core::metadata::PartialObjectMeta;
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = kcache_client::Client::infer().await?;
    /// let manager = Manager::new(client, manager::Config::new("demo"))?;
    /// // Which Secrets exist, without their data.
    /// let secrets = manager.metadata_cache::<Secret>();
    /// let _same: manager::Cached<PartialObjectMeta<Secret>> = secrets;
    /// # Ok(()) }
    /// ```
    pub fn metadata_cache<C: ApiObject>(&self) -> Cached<PartialObjectMeta<C>> {
        self.informer::<PartialObjectMeta<C>>()
    }

    /// Declares how the manager caches `C` (controller-runtime's `cache.ByObject`): label
    /// and field selectors, storage, managed-fields stripping, a transform, memory
    /// accounting, namespaces; see [`Cache`]. Call it before any controller,
    /// [`owns`](ControllerBuilder::owns), [`watches`](ControllerBuilder::watches) or
    /// [`informer`](Self::informer) uses `C`.
    ///
    /// # Errors
    /// [`Error::CacheExists`] when `C` is already cached.
    pub fn cache<C: ApiObject>(&self, cache: Cache<C>) -> Result<Cached<C>, Error> {
        if let Some(existing) = self.shared.selectors::<C>() {
            return Err(Error::CacheExists {
                manager: self.shared.config.name.clone(),
                kind: C::kind(&()).into_owned(),
                existing,
            });
        }
        self.make_informer(cache)
    }

    /// The client the manager was made with (the informers list and watch through it).
    pub fn client(&self) -> &kcache_client::Client {
        &self.shared.client
    }

    /// The one kube client for writes, with kube's retries of 429/503/504 (see
    /// [`api`](crate::api#retries)); what reconciles write through.
    pub fn kube(&self) -> &kube_client::Client {
        &self.shared.kube
    }

    /// This replica's identity (lease holder, Events' reporting instance).
    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    /// The address `/metrics`, `/healthz` and `/readyz` are served on (with port 0
    /// resolved), when [`Config::metrics_addr`] is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The leader state, when the manager elects a leader.
    pub fn leader_state(&self) -> Option<watch::Receiver<LeaderState>> {
        self.elector.as_ref().map(|e| e.watch())
    }

    /// Adds a readiness check to `/readyz` (next to "every informer synced and healthy").
    pub fn add_readiness_check(&self, name: impl Into<String>, check: Check) {
        let mut checks = self.checks.lock();
        *checks = std::mem::take(&mut *checks).ready(name, check);
    }

    /// Adds a liveness check to `/healthz` (next to the leader election's, when elected).
    pub fn add_liveness_check(&self, name: impl Into<String>, check: Check) {
        let mut checks = self.checks.lock();
        *checks = std::mem::take(&mut *checks).live(name, check);
    }

    /// Reserves a controller name.
    pub(crate) fn reserve_controller(&self, name: &str) -> Result<(), Error> {
        if !self.names.lock().insert(name.to_owned()) {
            return Err(Error::DuplicateController {
                manager: self.shared.config.name.clone(),
                controller: name.to_owned(),
            });
        }
        Ok(())
    }

    pub(crate) fn add_controller(&self, name: String, runnable: Runnable) {
        self.controllers.lock().push((name, runnable));
    }
}

/// `$POD_NAME` or the host name, `_` and a random UUID (controller-runtime's identity).
fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kcache".to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// The pod's namespace (in a cluster), else `default`.
fn pod_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|ns| ns.trim().to_owned())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}
