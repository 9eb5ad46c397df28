//! [`Config`] and the controller's [`Error`].

use std::{fmt, sync::Arc, time::Duration};

use super::WorkQueueKind;
use crate::{
    store::ObjectKey,
    workqueue::{MetricsProvider, RateLimiter},
};

/// Controller settings.
///
/// ```
/// use std::time::Duration;
/// use kcache::controller;
/// use kcache::workqueue::ItemExponentialFailureRateLimiter;
///
/// let config = controller::Config::default()
///     .name("configmaps")
///     .workers(2)
///     .max_retries(5)
///     .reconcile_timeout(Duration::from_secs(30))
///     .rate_limiter(ItemExponentialFailureRateLimiter::new(
///         Duration::from_millis(10),
///         Duration::from_secs(60),
///     ));
/// assert_eq!(config.max_retries, Some(5));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// Name for logs and queue metrics.
    pub name: String,
    /// Number of concurrent reconcile workers (client-go convention: 1–5).
    pub workers: usize,
    /// Give up on a key after this many failed retries in a row (so after `n + 1` failed
    /// reconciles): the key is forgotten by the rate limiter, the give-up is logged at error
    /// level and counted in [`Metrics::gave_up`](super::Metrics::gave_up).
    /// The next change of the object queues it afresh. Default `None`: retry forever.
    pub max_retries: Option<u32>,
    /// A reconcile that takes longer is cancelled (its future dropped) and counts as a
    /// failure, retried with backoff. Default `None`: no limit.
    pub reconcile_timeout: Option<Duration>,
    /// How long [`Controller::run`](super::Controller::run) waits for the primary informer's
    /// `run` to have been called before it fails with [`Error::InformerNotStarted`]
    /// (default 10 s). It does not bound the initial sync.
    pub informer_start_timeout: Duration,
    /// The queue's rate limiter; `None` is client-go's default controller rate limiter
    /// (per-item exponential 5 ms → 1000 s, max'd with an overall 10 qps / burst 100 bucket).
    pub rate_limiter: Option<Arc<dyn RateLimiter<ObjectKey>>>,
    /// The kind of work queue (default [`WorkQueueKind::RateLimiting`]).
    pub queue: WorkQueueKind,
    /// Where the work queue reports client-go's `workqueue_*` metrics, under the queue's
    /// name, which is [`Config::name`] (e.g. `kcache_metrics::WorkqueueMetrics`). Default
    /// `None`: the queue records no metrics.
    pub metrics_provider: Option<Arc<dyn MetricsProvider>>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("name", &self.name)
            .field("workers", &self.workers)
            .field("max_retries", &self.max_retries)
            .field("reconcile_timeout", &self.reconcile_timeout)
            .field("informer_start_timeout", &self.informer_start_timeout)
            .field(
                "rate_limiter",
                &if self.rate_limiter.is_some() {
                    "custom"
                } else {
                    "default"
                },
            )
            .field("queue", &self.queue)
            .field("metrics_provider", &self.metrics_provider.is_some())
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            name: "controller".to_owned(),
            workers: 1,
            max_retries: None,
            reconcile_timeout: None,
            informer_start_timeout: Duration::from_secs(10),
            rate_limiter: None,
            queue: WorkQueueKind::default(),
            metrics_provider: None,
        }
    }
}

impl Config {
    /// Sets [`Config::name`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets [`Config::workers`] (at least 1).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Sets [`Config::max_retries`].
    #[must_use]
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = Some(retries);
        self
    }

    /// Sets [`Config::reconcile_timeout`].
    #[must_use]
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.reconcile_timeout = Some(timeout);
        self
    }

    /// Sets [`Config::informer_start_timeout`].
    #[must_use]
    pub fn informer_start_timeout(mut self, timeout: Duration) -> Self {
        self.informer_start_timeout = timeout;
        self
    }

    /// Sets [`Config::rate_limiter`], e.g. one from [`crate::workqueue`].
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<ObjectKey> + 'static) -> Self {
        self.rate_limiter = Some(Arc::new(limiter));
        self
    }

    /// Sets [`Config::queue`], e.g. [`WorkQueueKind::Priority`].
    #[must_use]
    pub fn queue(mut self, kind: WorkQueueKind) -> Self {
        self.queue = kind;
        self
    }

    /// Sets [`Config::metrics_provider`]: the work queue's `workqueue_*` metrics go to
    /// `provider`, labelled with the controller's [`name`](Config::name).
    #[must_use]
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics_provider = Some(provider);
        self
    }
}

/// Why a controller could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The primary informer's `run` was not called within
    /// [`Config::informer_start_timeout`]: the controller would wait for its sync
    /// forever. Start the informer (or its factory) before or right after `Controller::run`.
    #[error(
        "controller {controller}: the primary informer was not started within {waited:?}; \
         call SharedIndexInformer::run (or SharedInformerFactory::start)"
    )]
    InformerNotStarted {
        /// The controller's name.
        controller: String,
        /// How long it waited.
        waited: Duration,
    },
    /// The primary informer has already stopped.
    #[error("controller {controller}: the primary informer has stopped")]
    InformerStopped {
        /// The controller's name.
        controller: String,
    },
}
