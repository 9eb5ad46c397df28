//! [`SharedInformerFactory`]: one shared informer per resource type.

use std::{
    any::{Any, TypeId},
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use futures::future::BoxFuture;
use kube_core::Resource;
use parking_lot::Mutex;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    informer::{self, SharedIndexInformer},
    lister_watcher::ListerWatcher,
    store::{Indexers, namespace_indexers},
};

/// Settings shared by every informer of a [`SharedInformerFactory`]: client-go's factory
/// options (`WithNamespace`, `WithTweakListOptions`, `WithTransform`, the default resync).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Watch only this namespace (`None`: all namespaces). The factory passes it to the
    /// function that builds each [`ListerWatcher`].
    pub namespace: Option<String>,
    /// The informers' configuration template (default resync period, queue, reflector settings
    /// including label and field selectors).
    pub informer: informer::Config,
    /// Drop `metadata.managedFields` from every object before it is stored (a common
    /// transform: it is often a third of an object's size and rarely read by controllers).
    pub strip_managed_fields: bool,
}

impl Config {
    /// Sets [`Config::namespace`].
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Sets the default resync period of every informer.
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.informer.resync_period = period;
        self
    }

    /// Sets a label selector for every informer's lists and watches.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.informer.reflector.label_selector = Some(selector.into());
        self
    }

    /// Sets a field selector for every informer's lists and watches.
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.informer.reflector.field_selector = Some(selector.into());
        self
    }

    /// Sets [`Config::strip_managed_fields`].
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = on;
        self
    }

    /// Sets the informer configuration template.
    #[must_use]
    pub fn informer_config(mut self, config: informer::Config) -> Self {
        self.informer = config;
        self
    }
}

/// Makes the [`ListerWatcher`] of a `K` informer for one namespace or all of them: what
/// [`SharedInformerFactory::informer`] needs from a client. `kcache_client::Client`
/// implements it for every typed resource (a namespace is ignored for cluster-scoped kinds).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::{SharedInformerFactory, factory, testing::FakeSource};
///
/// /// Hands out clones of one fake collection, whatever the namespace.
/// struct Fake(FakeSource<ConfigMap>);
/// impl factory::Source<ConfigMap> for Fake {
///     type ListerWatcher = FakeSource<ConfigMap>;
///     fn lister_watcher(&self, _namespace: Option<&str>) -> FakeSource<ConfigMap> {
///         self.0.clone()
///     }
/// }
///
/// let factory = SharedInformerFactory::new(factory::Config::default());
/// let cms = factory.informer::<ConfigMap>(&Fake(FakeSource::new()));
/// assert!(!cms.has_started());
/// ```
pub trait Source<K: Clone> {
    /// The lister-watcher it makes.
    type ListerWatcher: ListerWatcher<K>;

    /// A lister-watcher of `K` in `namespace` (`None`: all namespaces).
    fn lister_watcher(&self, namespace: Option<&str>) -> Self::ListerWatcher;
}

/// Type-erased view of one informer.
trait ErasedInformer: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn as_any(&self) -> &dyn Any;
    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, ()>;
    fn has_synced(&self) -> bool;
    fn wait_for_sync(&self) -> BoxFuture<'static, ()>;
}

struct Entry<K> {
    informer: SharedIndexInformer<K>,
}

impl<K: Resource + Clone + Send + Sync + 'static> ErasedInformer for Entry<K> {
    fn type_name(&self) -> &'static str {
        std::any::type_name::<K>()
    }

    fn as_any(&self) -> &dyn Any {
        &self.informer
    }

    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, ()> {
        let i = self.informer.clone();
        Box::pin(async move { i.run(cancel).await })
    }

    fn has_synced(&self) -> bool {
        self.informer.has_synced()
    }

    fn wait_for_sync(&self) -> BoxFuture<'static, ()> {
        let i = self.informer.clone();
        Box::pin(async move { i.wait_for_sync().await })
    }
}

struct State {
    informers: HashMap<TypeId, Arc<dyn ErasedInformer>>,
    started: HashMap<TypeId, bool>,
    shut_down: bool,
}

/// client-go's `SharedInformerFactory`: hands out one [`SharedIndexInformer`] per resource type
/// (keyed by the Rust type), starts them together and waits for their caches.
///
/// - [`start`](Self::start) is idempotent: it starts every informer not yet started, so an
///   informer requested after `start` starts on the next `start`.
/// - [`wait_for_cache_sync`](Self::wait_for_cache_sync) reports per type.
/// - [`shutdown`](Self::shutdown) stops everything the factory started and waits for it.
///
/// ```
/// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
/// use kcache::{SharedInformerFactory, factory, testing::FakeSource};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let factory = SharedInformerFactory::new(factory::Config::default().namespace("default"));
/// let pods = factory.informer_for::<Pod, _, _>(|_opts| FakeSource::<Pod>::new());
/// // A second request returns the same informer; this closure is not called.
/// let _same = factory.informer_for::<Pod, _, _>(|_opts| -> FakeSource<Pod> { unreachable!() });
/// factory.informer_for::<ConfigMap, _, _>(|_opts| FakeSource::<ConfigMap>::new());
/// factory.start();
/// let synced = factory.wait_for_cache_sync().await;
/// assert!(synced.values().all(|ok| *ok));
/// assert!(pods.has_synced());
/// factory.shutdown().await;
/// # }
/// ```
pub struct SharedInformerFactory {
    options: Config,
    state: Mutex<State>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl SharedInformerFactory {
    /// A factory with these options.
    pub fn new(options: Config) -> Self {
        Self {
            options,
            state: Mutex::new(State {
                informers: HashMap::new(),
                started: HashMap::new(),
                shut_down: false,
            }),
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
        }
    }

    /// The factory's options.
    pub fn options(&self) -> &Config {
        &self.options
    }

    /// The shared informer for `K`, created on first request from `source` with the factory's
    /// namespace, selectors, resync period and transform, and the namespace index. No
    /// turbofish beyond the type is needed: `factory.informer::<Pod>(&client)`.
    pub fn informer<K>(&self, source: &impl Source<K>) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + Send + Sync + 'static,
    {
        self.informer_for(|config| source.lister_watcher(config.namespace.as_deref()))
    }

    /// The shared informer for `K`, created on first request with the namespace index and the
    /// [`ListerWatcher`] that `make` builds from the factory's options (`make` must apply
    /// [`Config::namespace`] itself; [`informer`](Self::informer) does it for a [`Source`]). Later requests return
    /// the same informer (and do not call `make`).
    pub fn informer_for<K, F, L>(&self, make: F) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + Send + Sync + 'static,
        F: FnOnce(&Config) -> L,
        L: ListerWatcher<K>,
    {
        self.informer_with_indexers(make, namespace_indexers::<K>())
    }

    /// [`informer_for`](Self::informer_for) with the indexes to create the informer with (when
    /// it already exists, add more with
    /// [`SharedIndexInformer::add_indexers`]).
    pub fn informer_with_indexers<K, F, L>(
        &self,
        make: F,
        indexers: Indexers<K>,
    ) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + Send + Sync + 'static,
        F: FnOnce(&Config) -> L,
        L: ListerWatcher<K>,
    {
        let mut state = self.state.lock();
        let id = TypeId::of::<K>();
        if let Some(existing) = state.informers.get(&id)
            && let Some(informer) = existing.as_any().downcast_ref::<SharedIndexInformer<K>>()
        {
            return informer.clone();
        }
        let informer = SharedIndexInformer::with_indexers(
            make(&self.options),
            self.options.informer.clone(),
            indexers,
        );
        if self.options.strip_managed_fields {
            // Cannot fail: the informer was just created and is not started.
            let _ = informer.set_transform(|mut obj: K| {
                obj.meta_mut().managed_fields = None;
                obj
            });
        }
        state.informers.insert(
            id,
            Arc::new(Entry {
                informer: informer.clone(),
            }),
        );
        informer
    }

    /// Starts every informer that is not running yet; returns how many it started. Calling it
    /// again starts only informers requested since. Does nothing after
    /// [`shutdown`](Self::shutdown).
    ///
    /// # Panics
    /// When called outside a tokio runtime.
    pub fn start(&self) -> usize {
        let mut state = self.state.lock();
        if state.shut_down {
            return 0;
        }
        let to_start: Vec<(TypeId, Arc<dyn ErasedInformer>)> = state
            .informers
            .iter()
            .filter(|(id, _)| !state.started.get(id).copied().unwrap_or(false))
            .map(|(id, i)| (*id, Arc::clone(i)))
            .collect();
        for (id, informer) in &to_start {
            state.started.insert(*id, true);
            self.tasks.spawn(informer.run(self.cancel.child_token()));
        }
        to_start.len()
    }

    /// Waits until every started informer has synced, or the factory shuts down; returns, per
    /// type name, whether it synced.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_for_cache_sync(&self) -> BTreeMap<&'static str, bool> {
        let started: Vec<Arc<dyn ErasedInformer>> = {
            let state = self.state.lock();
            state
                .informers
                .iter()
                .filter(|(id, _)| state.started.get(id).copied().unwrap_or(false))
                .map(|(_, i)| Arc::clone(i))
                .collect()
        };
        let mut result = BTreeMap::new();
        for informer in started {
            tokio::select! {
                () = informer.wait_for_sync() => {}
                () = self.cancel.cancelled() => {}
            }
            result.insert(informer.type_name(), informer.has_synced());
        }
        result
    }

    /// Stops every informer the factory started and waits until they have stopped. Later
    /// [`start`](Self::start) calls do nothing.
    pub async fn shutdown(&self) {
        self.state.lock().shut_down = true;
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

impl std::fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        let names: Vec<_> = state.informers.values().map(|i| i.type_name()).collect();
        f.debug_struct("SharedInformerFactory")
            .field("informers", &names)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube_core::ObjectMeta;

    use super::*;
    use crate::testing::FakeSource;

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                managed_fields: Some(vec![Default::default()]),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn factory_returns_one_informer_per_type_and_starts_each_once() {
        let factory = SharedInformerFactory::new(Config::default());
        let src = FakeSource::new();
        src.upsert(cm("a"));
        let mut made = 0;
        let a = factory.informer_for::<ConfigMap, _, _>(|_| {
            made += 1;
            src.clone()
        });
        let b = factory.informer_for::<ConfigMap, _, _>(|_| {
            made += 1;
            src.clone()
        });
        assert_eq!(made, 1, "the second request reuses the informer");
        assert_eq!(factory.start(), 1);
        assert_eq!(factory.start(), 0, "start is idempotent");
        let synced = factory.wait_for_cache_sync().await;
        assert_eq!(synced.len(), 1);
        assert!(a.has_synced() && b.has_synced());
        assert_eq!(b.indexer().len(), 1, "both handles share one cache");
        assert_eq!(src.calls().len(), 1, "one reflector, one initial list");
        factory.shutdown().await;
        assert!(a.is_stopped());
    }

    #[tokio::test(start_paused = true)]
    async fn informer_requested_after_start_starts_on_the_next_start() {
        let factory = SharedInformerFactory::new(Config::default());
        factory.informer_for::<ConfigMap, _, _>(|_| FakeSource::<ConfigMap>::new());
        assert_eq!(factory.start(), 1);
        let secrets = factory.informer_for::<Secret, _, _>(|_| FakeSource::<Secret>::new());
        assert!(!secrets.has_started());
        assert_eq!(factory.start(), 1);
        let synced = factory.wait_for_cache_sync().await;
        assert_eq!(synced.len(), 2, "{synced:?}");
        assert!(synced.values().all(|s| *s));
        factory.shutdown().await;
        assert!(secrets.is_stopped());
        assert_eq!(factory.start(), 0, "no start after shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_cache_sync_reports_unsynced_types_after_shutdown() {
        let factory = Arc::new(SharedInformerFactory::new(Config::default()));
        let src = FakeSource::<ConfigMap>::new();
        src.stall_lists(true);
        src.set_supports_watch_list(false);
        factory.informer_for::<ConfigMap, _, _>(|_| src.clone());
        factory.start();
        let f = Arc::clone(&factory);
        let waiter = tokio::spawn(async move { f.wait_for_cache_sync().await });
        tokio::time::sleep(Duration::from_secs(5)).await;
        factory.shutdown().await;
        let synced = waiter.await.unwrap();
        assert_eq!(synced.values().copied().collect::<Vec<_>>(), [false]);
    }

    /// Records the namespace each lister-watcher was made for.
    struct Recording(FakeSource<ConfigMap>, std::sync::Mutex<Vec<Option<String>>>);

    impl Source<ConfigMap> for Recording {
        type ListerWatcher = FakeSource<ConfigMap>;
        fn lister_watcher(&self, namespace: Option<&str>) -> FakeSource<ConfigMap> {
            self.1.lock().unwrap().push(namespace.map(str::to_owned));
            self.0.clone()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn informer_from_a_source_gets_the_factory_namespace_once() {
        let factory = SharedInformerFactory::new(Config::default().namespace("ns"));
        let src = Recording(FakeSource::new(), Default::default());
        src.0.upsert(cm("a"));
        let a = factory.informer::<ConfigMap>(&src);
        let b = factory.informer::<ConfigMap>(&src);
        assert_eq!(*src.1.lock().unwrap(), [Some("ns".to_owned())]);
        factory.start();
        factory.wait_for_cache_sync().await;
        assert_eq!(b.indexer().len(), 1);
        assert!(a.indexer().get_by_key("ns/a").is_some());
        factory.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn strip_managed_fields_applies_to_every_informer() {
        let factory = SharedInformerFactory::new(Config::default().strip_managed_fields(true));
        let src = FakeSource::new();
        src.upsert(cm("a"));
        let informer = factory.informer_for::<ConfigMap, _, _>(|_| src.clone());
        factory.start();
        factory.wait_for_cache_sync().await;
        assert!(
            informer
                .indexer()
                .list()
                .iter()
                .all(|o| o.metadata.managed_fields.is_none())
        );
        factory.shutdown().await;
    }
}
