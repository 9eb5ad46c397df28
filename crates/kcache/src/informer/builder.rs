//! [`Builder`]: the one way to make a [`SharedIndexInformer`] with more than a configuration —
//! indexes, a transform, a watch error handler — all set before the informer exists, so none
//! can be changed once it runs.

use std::sync::Arc;

use kube_core::Resource;

use super::{Config, SharedIndexInformer};
use crate::{
    lister_watcher::ListerWatcher,
    memory::Sizer,
    reflector::{self, TransformFunc, WatchErrorHandler},
    store::{Indexers, namespace_indexers},
};

/// Builds a [`SharedIndexInformer`]; from [`SharedIndexInformer::builder`].
///
/// Defaults: [`Config::default`], the namespace index, no transform, errors logged with
/// `tracing`, memory not accounted. (A [`SharedInformerFactory`](crate::SharedInformerFactory) has its own builder,
/// `informer_builder`, which fills these in from the factory.)
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::informer::{self, SharedIndexInformer};
/// use kcache::store::namespace_indexers;
/// use kcache::testing::FakeSource;
///
/// let informer = SharedIndexInformer::builder(FakeSource::<ConfigMap>::new())
///     .config(informer::Config::default())
///     .indexers(namespace_indexers::<ConfigMap>())
///     .transform(|mut cm: ConfigMap| {
///         cm.metadata.managed_fields = None;
///         cm
///     })
///     .watch_error_handler(|err| eprintln!("watch error: {err}"))
///     .memory_sizer(|cm: &ConfigMap| std::mem::size_of_val(cm))
///     .build();
/// assert!(!informer.has_started());
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder<K, L> {
    lw: L,
    config: Config,
    indexers: Indexers<K>,
    transform: Option<TransformFunc<K>>,
    error_handler: Option<WatchErrorHandler>,
    sizer: Option<Sizer<K>>,
}

impl<K, L> std::fmt::Debug for Builder<K, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("config", &self.config)
            .field("indexes", &self.indexers.len())
            .field("transform", &self.transform.is_some())
            .field("watch_error_handler", &self.error_handler.is_some())
            .field("memory_sizer", &self.sizer.is_some())
            .finish_non_exhaustive()
    }
}

impl<K, L> Builder<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    pub(super) fn new(lw: L) -> Self {
        Self {
            lw,
            config: Config::default(),
            indexers: namespace_indexers::<K>(),
            transform: None,
            error_handler: None,
            sizer: None,
        }
    }

    /// The informer's settings (queue, resync period, reflector). Default [`Config::default`].
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// The indexes the cache starts with, replacing the default namespace index (more can be
    /// added later with [`SharedIndexInformer::add_indexers`]).
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers = indexers;
        self
    }

    /// A transform applied to every object before it is stored (e.g. to drop `managedFields`).
    /// It runs once per received object; it must be idempotent, since a streaming list may
    /// hand the same object twice.
    pub fn transform(mut self, transform: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// Like [`transform`](Self::transform), for a transform already shared.
    pub fn shared_transform(mut self, transform: TransformFunc<K>) -> Self {
        self.transform = Some(transform);
        self
    }

    /// The handler of every error the reflector recovers from (default: logged with
    /// `tracing` at warn level).
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&reflector::Error) + Send + Sync + 'static,
    ) -> Self {
        self.error_handler = Some(Arc::new(handler));
        self
    }

    /// Accounts the cache's memory with `sizer`, the bytes one object holds (inline and heap;
    /// the store adds [`store::entry_overhead`](crate::store::entry_overhead) per entry): for
    /// compact storage, `kcache_client::compact::Compact::heap_size`. See
    /// [`account_memory`](Self::account_memory). Default: not accounted.
    pub fn memory_sizer(mut self, sizer: impl Fn(&K) -> usize + Send + Sync + 'static) -> Self {
        self.sizer = Some(Arc::new(sizer));
        self
    }

    /// Like [`memory_sizer`](Self::memory_sizer), for a sizer already shared.
    pub fn shared_memory_sizer(mut self, sizer: Sizer<K>) -> Self {
        self.sizer = Some(sizer);
        self
    }

    /// The informer; it does nothing until [`run`](SharedIndexInformer::run).
    pub fn build(self) -> SharedIndexInformer<K> {
        SharedIndexInformer::from_parts(
            self.lw,
            self.config,
            self.indexers,
            Extras {
                transform: self.transform,
                error_handler: self.error_handler,
                sizer: self.sizer,
            },
        )
    }
}

impl<K, L> Builder<K, L>
where
    K: Resource + Clone + Send + Sync + serde::Serialize + 'static,
    L: ListerWatcher<K>,
{
    /// Accounts the cache's memory with [`memory::estimate`](crate::memory::estimate) (a
    /// deep-size estimate of any `serde::Serialize` type):
    /// [`memory`](SharedIndexInformer::memory) then reports the objects and bytes held, kept
    /// up to date as objects come and go (never by walking the cache), and
    /// [`Config::memory_budget_bytes`] takes effect.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::{SharedIndexInformer, informer, testing::{FakeSource, config_map}};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let source = FakeSource::<ConfigMap>::new();
    /// source.upsert(config_map("a"));
    /// let informer = SharedIndexInformer::builder(source)
    ///     .config(informer::Config::default().memory_budget_bytes(64 << 20))
    ///     .account_memory()
    ///     .build();
    /// let cancel = CancellationToken::new();
    /// tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
    /// informer.wait_for_sync().await;
    /// let usage = informer.memory().expect("accounted");
    /// assert_eq!(usage.objects, 1);
    /// assert!(usage.bytes > std::mem::size_of::<ConfigMap>());
    /// assert!(!informer.over_memory_budget());
    /// cancel.cancel();
    /// # }
    /// ```
    pub fn account_memory(self) -> Self {
        self.shared_memory_sizer(crate::memory::estimator())
    }
}

/// What the builder hands the informer besides its lister-watcher, configuration and indexes.
pub(super) struct Extras<K> {
    pub(super) transform: Option<TransformFunc<K>>,
    pub(super) error_handler: Option<WatchErrorHandler>,
    pub(super) sizer: Option<Sizer<K>>,
}
