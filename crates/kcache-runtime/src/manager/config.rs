//! [`Config`] of a [`Manager`](super::Manager) and its [`LeaderElection`].

use std::{net::SocketAddr, time::Duration};

use super::{Storage, namespaces::Scope};

/// How a [`Manager`](super::Manager) runs: controller-runtime's manager options
/// (`Cache.DefaultNamespaces`, `LeaderElection*`, `Metrics.BindAddress` and
/// `HealthProbeBindAddress` on one address, `GracefulShutdownTimeout`) plus the
/// read-your-own-writes bounds.
///
/// controller-runtime's `Cache.DefaultTransform` has no manager-wide twin here: its common use,
/// dropping `managedFields`, is [`strip_managed_fields`](Self::strip_managed_fields), which
/// lean storage honours; any other transform works on decoded objects, so it is set per type
/// ([`Cache::transform`](super::Cache::transform)) and makes that type's storage typed. A
/// type-erased transform over every cache would make every cache typed and give up the lean
/// storage the manager defaults to.
///
/// ```
/// use std::time::Duration;
/// use kcache_runtime::manager::{Config, LeaderElection};
///
/// let config = Config::new("website-operator")
///     .namespace("mon")
///     .leader_election(LeaderElection::new("website-operator"))
///     .metrics_addr("0.0.0.0:8080".parse().unwrap())
///     .graceful_shutdown_timeout(Duration::from_secs(20));
/// assert_eq!(config.cache_wait_timeout, Duration::from_secs(5));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The manager's name: the prefix of its controllers' field managers and Events'
    /// reporting controller (`NAME/CONTROLLER`, unless [`field_manager`](Self::field_manager)
    /// or [`event_reporter`](Self::event_reporter) say otherwise), e.g. `website-operator`.
    pub name: String,
    /// The field manager of every write of the manager's controllers (server-side apply's
    /// owner of the fields they set). Default `None`: `NAME/CONTROLLER` per controller. Set
    /// it to keep the field manager of an operator migrated with live objects;
    /// [`ControllerBuilder::field_manager`](crate::ControllerBuilder::field_manager) sets one
    /// per controller.
    pub field_manager: Option<String>,
    /// The reporting controller of the Events the manager's controllers publish
    /// (`reportingController`, `source.component`). Default `None`: `NAME/CONTROLLER` per
    /// controller; [`ControllerBuilder::event_reporter`](crate::ControllerBuilder::event_reporter)
    /// sets one per controller.
    pub event_reporter: Option<String>,
    /// Cache (and so reconcile) only this namespace; `None`: every namespace (unless
    /// [`namespaces`](Self::namespaces) names some). A cluster-scoped kind is cached
    /// cluster-wide either way. Also the default namespace of the leader election's Lease.
    pub namespace: Option<String>,
    /// Cache (and so reconcile) only these namespaces, one informer per namespace and type
    /// (controller-runtime's `Cache.DefaultNamespaces`); when not empty, it takes precedence
    /// over [`namespace`](Self::namespace). Default empty. Set it with
    /// [`Config::namespaces`], which keeps one namespace in [`namespace`](Self::namespace)
    /// (one informer per type) and a set sorted, each namespace once.
    pub namespaces: Vec<String>,
    /// Elect a leader among the replicas; `None`: this replica always reconciles.
    pub leader_election: Option<LeaderElection>,
    /// Serve `/metrics`, `/healthz` (`/livez`) and `/readyz` on this address (bound by
    /// [`Manager::new`](super::Manager::new); port 0 picks one, see
    /// [`Manager::metrics_addr`](super::Manager::metrics_addr)). `None`: no server (unless
    /// [`Manager::with_metrics_listener`](super::Manager::with_metrics_listener) gives one a
    /// listener bound beforehand).
    pub metrics_addr: Option<SocketAddr>,
    /// On shutdown, how long the reconciles in flight may take to finish; past it they are
    /// aborted (their futures dropped) and [`Manager::run`](super::Manager::run) reports
    /// [`Error::DrainTimeout`](super::Error::DrainTimeout). Default 30 s
    /// (controller-runtime's).
    pub graceful_shutdown_timeout: Duration,
    /// How long a reconcile waits for the caches to show its controller's earlier writes of
    /// the same key before it is retried later instead (default 5 s); see
    /// [read-your-own-writes](crate#read-your-own-writes).
    pub cache_wait_timeout: Duration,
    /// After this long, a write the caches never showed is no longer waited for (default
    /// 5 min, kube-controller-manager's `ExpectationsTimeout`).
    pub expectations_ttl: Duration,
    /// Drop `metadata.managedFields` from cached objects (default true: a third of an
    /// object's size, rarely read by a controller).
    pub strip_managed_fields: bool,
    /// This replica's identity: the lease holder it writes and its Events' reporting
    /// instance. Default: `$POD_NAME`, else the host name, with a random suffix
    /// (controller-runtime's `hostname_uuid`).
    pub identity: Option<String>,
    /// How every cache stores its objects unless its [`Cache`](super::Cache) says otherwise
    /// (default [`Storage::Lean`]: wire bytes plus parsed metadata, decoded on read).
    pub storage: Storage,
    /// List, watch and cache only the objects matching this label selector, for every type
    /// whose [`Cache`](super::Cache) sets none (controller-runtime's
    /// `Cache.DefaultLabelSelector`). Default `None`: every object.
    pub default_label_selector: Option<String>,
    /// As [`default_label_selector`](Self::default_label_selector), a field selector
    /// (controller-runtime's `Cache.DefaultFieldSelector`).
    pub default_field_selector: Option<String>,
}

impl Config {
    /// The defaults, for a manager named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            field_manager: None,
            event_reporter: None,
            namespace: None,
            namespaces: Vec::new(),
            leader_election: None,
            metrics_addr: None,
            graceful_shutdown_timeout: Duration::from_secs(30),
            cache_wait_timeout: Duration::from_secs(5),
            expectations_ttl: Duration::from_secs(5 * 60),
            strip_managed_fields: true,
            identity: None,
            storage: Storage::Lean,
            default_label_selector: None,
            default_field_selector: None,
        }
    }

    /// Sets [`Config::namespace`] (and clears [`Config::namespaces`]).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self.namespaces.clear();
        self
    }

    /// Caches (and so reconciles) only these namespaces (controller-runtime's
    /// `Cache.DefaultNamespaces`), for every type whose [`Cache`](super::Cache) names none.
    ///
    /// A set of two or more namespaces is one informer per namespace and type, with the same
    /// settings; reads merge them, controllers see the events of each, and a read in a
    /// namespace outside the set is an error naming it (see
    /// [`Cache::namespaces`](super::Cache::namespaces)). One namespace is
    /// [`namespace`](Self::namespace) (one informer per type); no namespace is every
    /// namespace. Sets [`Config::namespaces`] (sorted, each once) or, for one namespace,
    /// [`Config::namespace`].
    ///
    /// ```
    /// use kcache_runtime::manager::Config;
    ///
    /// let two = Config::new("demo").namespaces(["team-b", "team-a", "team-b"]);
    /// assert_eq!(two.namespaces, ["team-a", "team-b"]);
    /// assert_eq!(two.namespace, None);
    /// let one = Config::new("demo").namespaces(["team-a"]);
    /// assert_eq!(one.namespace.as_deref(), Some("team-a"));
    /// assert!(one.namespaces.is_empty());
    /// ```
    #[must_use]
    pub fn namespaces(mut self, namespaces: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.namespace = None;
        self.namespaces.clear();
        match Scope::of(namespaces) {
            Scope::All => {}
            Scope::Set(mut set) if set.len() == 1 => self.namespace = set.pop(),
            Scope::Set(set) => self.namespaces = set,
        }
        self
    }

    /// The namespaces every cache covers unless its own [`Cache`](super::Cache) says.
    pub(crate) fn scope(&self) -> Scope {
        if self.namespaces.is_empty() {
            Scope::of(self.namespace.clone())
        } else {
            Scope::of(self.namespaces.iter().cloned())
        }
    }

    /// Sets [`Config::leader_election`].
    #[must_use]
    pub fn leader_election(mut self, election: LeaderElection) -> Self {
        self.leader_election = Some(election);
        self
    }

    /// Sets [`Config::metrics_addr`].
    #[must_use]
    pub fn metrics_addr(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Sets [`Config::graceful_shutdown_timeout`].
    #[must_use]
    pub fn graceful_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.graceful_shutdown_timeout = timeout;
        self
    }

    /// Sets [`Config::cache_wait_timeout`].
    #[must_use]
    pub fn cache_wait_timeout(mut self, timeout: Duration) -> Self {
        self.cache_wait_timeout = timeout;
        self
    }

    /// Sets [`Config::expectations_ttl`].
    #[must_use]
    pub fn expectations_ttl(mut self, ttl: Duration) -> Self {
        self.expectations_ttl = ttl;
        self
    }

    /// Sets [`Config::strip_managed_fields`].
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = on;
        self
    }

    /// Sets [`Config::field_manager`].
    #[must_use]
    pub fn field_manager(mut self, manager: impl Into<String>) -> Self {
        self.field_manager = Some(manager.into());
        self
    }

    /// Sets [`Config::event_reporter`].
    #[must_use]
    pub fn event_reporter(mut self, reporter: impl Into<String>) -> Self {
        self.event_reporter = Some(reporter.into());
        self
    }

    /// Sets [`Config::identity`].
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// Sets [`Config::storage`].
    ///
    /// ```
    /// use kcache_runtime::manager::{Config, Storage};
    ///
    /// assert_eq!(Config::new("demo").storage, Storage::Lean);
    /// let typed = Config::new("demo").storage(Storage::Typed);
    /// assert_eq!(typed.storage, Storage::Typed);
    /// ```
    #[must_use]
    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }

    /// Sets [`Config::default_label_selector`].
    #[must_use]
    pub fn default_label_selector(mut self, selector: impl Into<String>) -> Self {
        self.default_label_selector = Some(selector.into());
        self
    }

    /// Sets [`Config::default_field_selector`].
    #[must_use]
    pub fn default_field_selector(mut self, selector: impl Into<String>) -> Self {
        self.default_field_selector = Some(selector.into());
        self
    }
}

/// Leader election over a `coordination.k8s.io/v1` Lease, with warm standby: every replica
/// runs its informers and keeps its caches synced; only the leader's workers reconcile. A
/// replica that loses the lease stops its workers (the reconciles in flight finish) and
/// competes again, without restarting. The timings are client-go's (15 s / 10 s / 2 s).
///
/// ```
/// use std::time::Duration;
/// use kcache_runtime::manager::LeaderElection;
///
/// let election = LeaderElection::new("website-operator")
///     .lease_namespace("operators")
///     .timings(Duration::from_secs(15), Duration::from_secs(10), Duration::from_secs(2));
/// assert_eq!(election.lease_name, "website-operator");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderElection {
    /// The Lease's name (controller-runtime's `LeaderElectionID`).
    pub lease_name: String,
    /// The Lease's namespace. Default: the manager's namespace, else the pod's (the service
    /// account's namespace file), else `default`.
    pub lease_namespace: Option<String>,
    /// How long a standby waits without seeing the lease renewed before it takes over.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failing renewal before it steps down.
    pub renew_deadline: Duration,
    /// The pause between renewals and between acquire attempts.
    pub retry_period: Duration,
}

impl LeaderElection {
    /// An election on the Lease `lease_name`, with client-go's timings.
    pub fn new(lease_name: impl Into<String>) -> Self {
        Self {
            lease_name: lease_name.into(),
            lease_namespace: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Sets [`LeaderElection::lease_namespace`].
    #[must_use]
    pub fn lease_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.lease_namespace = Some(namespace.into());
        self
    }

    /// Sets the lease duration, renew deadline and retry period (validated by
    /// [`Manager::new`](super::Manager::new) as client-go validates them).
    #[must_use]
    pub fn timings(mut self, lease: Duration, renew_deadline: Duration, retry: Duration) -> Self {
        self.lease_duration = lease;
        self.renew_deadline = renew_deadline;
        self.retry_period = retry;
        self
    }
}
