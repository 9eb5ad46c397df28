//! [`SharedInformerFactory`]: one shared informer per resource type, made from a [`Source`]
//! with the factory's defaults ([`InformerFrom::informer`]) or with settings of its own
//! ([`InformerFrom::informer_builder`], which hands out the [`informer::Builder`] every informer
//! is made with). The [`Source`] chooses what the cache stores
//! ([`Stored`]): `kcache_client::Client` stores lean objects (wire bytes plus parsed metadata,
//! typed view decoded on demand), `client.typed()` and closures store typed objects.

mod builder;
mod source;
mod stored;

pub use builder::FromSource;
use builder::Settings;
pub use source::{InformerFrom, Source};
pub use stored::{MetaIndexFunc, Stored, TypedIndexFunc};

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

use crate::informer::{self, SharedIndexInformer};

/// Settings shared by every informer of a [`SharedInformerFactory`]: client-go's factory
/// options (`WithNamespace`, `WithTweakListOptions`, `WithTransform`, the default resync).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Config {
    /// Watch only this namespace (`None`: all namespaces). The factory passes it to the
    /// function that builds each [`ListerWatcher`](crate::ListerWatcher).
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

/// Why the factory could not hand out an informer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The factory already has an informer for this type, made with other settings.
    #[error(
        "the factory already has an informer for {kind} with {setting} {existing}; \
         this request asks for {requested} (one informer per type: use the same settings, \
         or another factory)"
    )]
    Conflict {
        /// The Rust type of the objects, without its path.
        kind: &'static str,
        /// The setting that differs (`namespace`, `label selector`, …).
        setting: &'static str,
        /// Its value on the existing informer.
        existing: String,
        /// Its value in the request.
        requested: String,
    },
    /// The source stores a lean form of the objects, which cannot take a transform over the
    /// typed object.
    #[error(
        "the informer for {kind} stores lean objects, which cannot take a typed transform \
         (use a source with typed storage, such as `client.typed()`, or transform metadata \
         through `strip_managed_fields`)"
    )]
    TransformNeedsTypedStorage {
        /// The Rust type of the objects, without its path.
        kind: &'static str,
    },
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
    settings: Settings,
}

impl<K: Resource + Clone + Send + Sync + 'static> ErasedInformer for Entry<K> {
    fn type_name(&self) -> &'static str {
        std::any::type_name::<K>()
    }

    fn as_any(&self) -> &dyn Any {
        self
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
/// use kcache::{InformerFrom, SharedInformerFactory, factory, testing::FakeSource};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let factory = SharedInformerFactory::new(factory::Config::default().namespace("default"));
/// let pods = factory.informer::<Pod>(&|_ns: Option<&str>| FakeSource::<Pod>::new());
/// // A second request returns the same informer; this source is not asked.
/// let _same = factory.informer::<Pod>(&|_ns: Option<&str>| -> FakeSource<Pod> { unreachable!() });
/// factory.informer::<ConfigMap>(&|_ns: Option<&str>| FakeSource::<ConfigMap>::new());
/// factory.start();
/// let synced = factory.wait_for_cache_sync().await;
/// assert!(synced.values().all(|ok| *ok));
/// assert!(pods.has_synced());
/// factory.shutdown().await;
/// # }
/// ```
pub struct SharedInformerFactory {
    config: Config,
    state: Mutex<State>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl SharedInformerFactory {
    /// A factory with this configuration.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            state: Mutex::new(State {
                informers: HashMap::new(),
                started: HashMap::new(),
                shut_down: false,
            }),
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
        }
    }

    /// The factory's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The informer for `K`: the existing one when its settings are `settings` (else `Err`
    /// with the conflict and the existing informer), or a new one from `make`.
    fn get_or_create<K>(
        &self,
        settings: Settings,
        make: impl FnOnce() -> SharedIndexInformer<K>,
    ) -> Result<SharedIndexInformer<K>, (Error, SharedIndexInformer<K>)>
    where
        K: Resource + Clone + Send + Sync + 'static,
    {
        let mut state = self.state.lock();
        let id = TypeId::of::<K>();
        if let Some(existing) = state.informers.get(&id)
            && let Some(entry) = existing.as_any().downcast_ref::<Entry<K>>()
        {
            return match entry.settings.first_difference(&settings) {
                None => Ok(entry.informer.clone()),
                Some((setting, existing, requested)) => Err((
                    Error::Conflict {
                        kind: short_type_name::<K>(),
                        setting,
                        existing,
                        requested,
                    },
                    entry.informer.clone(),
                )),
            };
        }
        let informer = make();
        state.informers.insert(
            id,
            Arc::new(Entry {
                informer: informer.clone(),
                settings,
            }),
        );
        Ok(informer)
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

/// `K`'s type name without its path (`ConfigMap`, not `k8s_openapi::…::ConfigMap`).
fn short_type_name<K>() -> &'static str {
    let name = std::any::type_name::<K>();
    let generic = name.find('<').unwrap_or(name.len());
    let start = name[..generic].rfind("::").map_or(0, |i| i + 2);
    &name[start..]
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
mod tests;
