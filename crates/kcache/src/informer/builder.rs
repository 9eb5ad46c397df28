//! [`Builder`]: the one way to make a [`SharedIndexInformer`] with more than a configuration —
//! indexes, a transform, a watch error handler — all set before the informer exists, so none
//! can be changed once it runs.

use std::sync::Arc;

use kube_core::Resource;

use super::{Config, SharedIndexInformer};
use crate::{
    lister_watcher::ListerWatcher,
    reflector::{self, TransformFunc, WatchErrorHandler},
    store::{Indexers, namespace_indexers},
};

/// Builds a [`SharedIndexInformer`]; from [`SharedIndexInformer::builder`].
///
/// Defaults: [`Config::default`], the namespace index, no transform, errors logged with
/// `tracing`. (A [`SharedInformerFactory`](crate::SharedInformerFactory) has its own builder,
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
}

impl<K, L> std::fmt::Debug for Builder<K, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("config", &self.config)
            .field("indexes", &self.indexers.len())
            .field("transform", &self.transform.is_some())
            .field("watch_error_handler", &self.error_handler.is_some())
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

    /// The informer; it does nothing until [`run`](SharedIndexInformer::run).
    pub fn build(self) -> SharedIndexInformer<K> {
        SharedIndexInformer::from_parts(
            self.lw,
            self.config,
            self.indexers,
            self.transform,
            self.error_handler,
        )
    }
}
