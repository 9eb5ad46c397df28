//! The informer's [`Config`](Config) and the options of one handler registration.

use std::time::Duration;

use super::{BufferMode, Delivery};
use crate::{fifo::QueueKind, reflector};

/// The smallest per-handler resync period (client-go's `minimumResyncPeriod`).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Informer settings. `Default` is client-go's.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// The default resync period for handlers, and the informer's resync check period
    /// (client-go's `defaultEventHandlerResyncPeriod`); zero disables resyncs.
    pub resync_period: Duration,
    /// The queue between the reflector and the indexer.
    pub queue: QueueKind,
    /// The reflector's settings (page size, watch list, selectors, backoff).
    pub reflector: reflector::Config,
    /// The cache's memory budget in bytes: above it the informer logs a warning (once per
    /// crossing) and reports itself over budget
    /// ([`SharedIndexInformer::over_memory_budget`](super::SharedIndexInformer::over_memory_budget),
    /// which kcache-metrics' readiness check reads). Only meaningful when memory is accounted
    /// ([`Builder::account_memory`](super::Builder::account_memory));
    /// `None`, the default, sets no budget.
    pub memory_budget_bytes: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            resync_period: Duration::ZERO,
            queue: QueueKind::default(),
            reflector: reflector::Config::default(),
            memory_budget_bytes: None,
        }
    }
}

impl Config {
    /// Sets [`Config::resync_period`].
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// Sets [`Config::queue`].
    #[must_use]
    pub fn queue(mut self, queue: QueueKind) -> Self {
        self.queue = queue;
        self
    }

    /// Sets [`Config::reflector`].
    #[must_use]
    pub fn reflector(mut self, reflector: reflector::Config) -> Self {
        self.reflector = reflector;
        self
    }

    /// Sets [`Config::memory_budget_bytes`].
    #[must_use]
    pub fn memory_budget_bytes(mut self, bytes: usize) -> Self {
        self.memory_budget_bytes = Some(bytes);
        self
    }
}

/// Settings of one handler registration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandlerConfig {
    /// The handler's name in metrics (`kcache_informer_handler_buffer_depth{handler}`) and
    /// logs; `None` names it `handler-N`, N counting the informer's registrations from 1.
    pub name: Option<String>,
    /// This handler's resync period; `None` takes the informer's default.
    pub resync_period: Option<Duration>,
    /// How pending notifications are buffered.
    pub buffer: BufferMode,
    /// Where the handler is called: by default on the informer's own task while its calls
    /// are quick, on tokio's blocking pool once one is slow ([`Delivery`]).
    pub delivery: Delivery,
}

impl HandlerConfig {
    /// Sets [`HandlerConfig::name`].
    ///
    /// ```
    /// use kcache::informer::HandlerConfig;
    ///
    /// let config = HandlerConfig::default().name("enqueue-pods");
    /// assert_eq!(config.name.as_deref(), Some("enqueue-pods"));
    /// ```
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets [`HandlerConfig::resync_period`].
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Sets [`HandlerConfig::delivery`].
    #[must_use]
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Sets [`HandlerConfig::buffer`].
    #[must_use]
    pub fn buffer(mut self, mode: BufferMode) -> Self {
        self.buffer = mode;
        self
    }
}
