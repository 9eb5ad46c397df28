//! [`Builder`]: the one way to make a [`SharedIndexInformer`] with more than a configuration —
//! indexes, a transform, a watch error handler, memory accounting — all set before the informer
//! exists, so none can be changed once it runs. Where the informer comes from is the builder's
//! second type parameter: a lister-watcher of its own ([`FromListerWatcher`], from
//! [`SharedIndexInformer::builder`]) or a factory's source (`factory::FromSource`, from
//! `factory.informer_builder::<K>(&source)`).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use kube_core::{ObjectMeta, Resource};

use super::{Config, SharedIndexInformer};
use crate::{
    fifo::QueueKind,
    lister_watcher::ListerWatcher,
    memory::{self, Sizer},
    reflector::{self, TransformFunc, WatchErrorHandler},
    store::{IndexFunc, Indexers, NAMESPACE_INDEX},
};

/// An index function over an object's metadata (the same type as `factory::MetaIndexFunc`).
pub(crate) type MetaIndex = Arc<dyn Fn(&ObjectMeta) -> Vec<String> + Send + Sync>;

/// An index given to the builder: over metadata (never decodes a lean object) or over the
/// typed object.
pub(crate) enum Index<K> {
    Meta(MetaIndex),
    Typed(IndexFunc<K>),
}

/// Builds a [`SharedIndexInformer`]: every setting is given here, before the informer exists.
///
/// `K` is the typed object the settings see (index functions, transform, memory sizer), and
/// `S` says where the informer comes from:
///
/// - [`FromListerWatcher`]: an informer of its own, fed by a lister-watcher, from
///   [`SharedIndexInformer::builder`]; [`build`](Builder::build) returns it.
/// - `factory::FromSource`: the factory's shared informer of `K`, from
///   `factory.informer_builder::<K>(&source)` ([`InformerFrom`](crate::InformerFrom)); it starts
///   from the factory's settings, adds [`namespace`](Builder::namespace) and
///   [`all_namespaces`](Builder::all_namespaces), and its `build` returns a `Result`, refusing a
///   request whose settings differ from the existing informer's.
///
/// Like every builder of the workspace it ends with `build()`, which returns a `Result` only
/// when building can fail; the informer does nothing until it is run
/// ([`run`](SharedIndexInformer::run), or the factory's `start`).
///
/// Defaults: [`Config::default`] (a factory's: its own), the namespace index, managed fields
/// kept (a factory's: its [`strip_managed_fields`](crate::factory::Config::strip_managed_fields)),
/// no transform, errors logged with `tracing`, memory not accounted.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::informer::{self, SharedIndexInformer};
/// use kcache::testing::FakeSource;
///
/// let informer = SharedIndexInformer::builder(FakeSource::<ConfigMap>::new())
///     .config(informer::Config::default())
///     .indexer("by-data-key", |cm: &ConfigMap| {
///         cm.data.iter().flat_map(|d| d.keys().cloned()).collect()
///     })
///     .strip_managed_fields(true)
///     .transform(|mut cm: ConfigMap| {
///         cm.metadata.annotations = None;
///         cm
///     })
///     .watch_error_handler(|err| eprintln!("watch error: {err}"))
///     .memory_sizer(|cm: &ConfigMap| std::mem::size_of_val(cm))
///     .build();
/// assert!(!informer.has_started());
/// assert!(informer.indexer().index_keys("by-data-key", "x").unwrap().is_empty());
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder<K, S> {
    pub(crate) origin: S,
    pub(crate) config: Config,
    pub(crate) indexers: BTreeMap<String, Index<K>>,
    pub(crate) strip_managed_fields: bool,
    pub(crate) transform: Option<TransformFunc<K>>,
    pub(crate) error_handler: Option<WatchErrorHandler>,
    /// The sizer, and whether it is [`memory::estimator`] (the factory compares it).
    pub(crate) sizer: Option<(Sizer<K>, bool)>,
}

/// Where a [`Builder`] from [`SharedIndexInformer::builder`] gets its objects: the
/// lister-watcher `L`, which the informer owns.
pub struct FromListerWatcher<L>(L);

impl<L> std::fmt::Debug for FromListerWatcher<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FromListerWatcher")
            .field(&std::any::type_name::<L>())
            .finish()
    }
}

impl<K, S: std::fmt::Debug> std::fmt::Debug for Builder<K, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let indexers: Vec<_> = self.indexers.keys().collect();
        f.debug_struct("Builder")
            .field("kind", &std::any::type_name::<K>())
            .field("origin", &self.origin)
            .field("config", &self.config)
            .field("indexers", &indexers)
            .field("strip_managed_fields", &self.strip_managed_fields)
            .field("transform", &self.transform.is_some())
            .field("watch_error_handler", &self.error_handler.is_some())
            .field("memory_sizer", &self.sizer.is_some())
            .finish()
    }
}

/// The namespace index, over metadata.
fn namespace_index() -> MetaIndex {
    Arc::new(|meta: &ObjectMeta| vec![meta.namespace.clone().unwrap_or_default()])
}

impl<K, S> Builder<K, S>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// A builder from `origin` starting from `config`, the namespace index and `strip`.
    pub(crate) fn with_defaults(origin: S, config: Config, strip_managed_fields: bool) -> Self {
        Self {
            origin,
            config,
            indexers: BTreeMap::from([(
                NAMESPACE_INDEX.to_owned(),
                Index::Meta(namespace_index()),
            )]),
            strip_managed_fields,
            transform: None,
            error_handler: None,
            sizer: None,
        }
    }

    /// The informer's settings (queue, resync period, reflector with its selectors, memory
    /// budget), replacing the defaults and any of them set before.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Lists and watches only objects matching this label selector
    /// ([`reflector::Config::label_selector`]).
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.config.reflector.label_selector = Some(selector.into());
        self
    }

    /// Lists and watches only objects matching this field selector
    /// ([`reflector::Config::field_selector`]).
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.config.reflector.field_selector = Some(selector.into());
        self
    }

    /// The handlers' default resync period (zero: no resync).
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.config.resync_period = period;
        self
    }

    /// The queue between the reflector and the cache.
    pub fn queue(mut self, queue: QueueKind) -> Self {
        self.config.queue = queue;
        self
    }

    /// The reflector's settings (page size, streaming list, deadlines, backoff). Selectors set
    /// before are replaced by the ones in `reflector`.
    pub fn reflector(mut self, reflector: reflector::Config) -> Self {
        self.config.reflector = reflector;
        self
    }

    /// The cache's memory budget in bytes ([`Config::memory_budget_bytes`]): over it the
    /// informer warns and reports itself over budget. Needs memory accounting
    /// ([`account_memory`](Self::account_memory) or [`memory_sizer`](Self::memory_sizer)).
    pub fn memory_budget_bytes(mut self, bytes: usize) -> Self {
        self.config.memory_budget_bytes = Some(bytes);
        self
    }

    /// The indexes the cache starts with, over the typed object, replacing the ones set before
    /// (the default namespace index included; more can be added once the informer exists with
    /// [`SharedIndexInformer::add_indexers`]).
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers = indexers
            .into_iter()
            .map(|(name, f)| (name, Index::Typed(f)))
            .collect();
        self
    }

    /// Adds an index named `name` over the typed object. With lean storage (a factory source
    /// such as `kcache_client::Client`) the object is decoded each time this index runs (once
    /// per add, twice per update — the old and the new object — once per delete); an object
    /// that does not decode is in no value of it (and the error is logged).
    pub fn indexer(
        mut self,
        name: impl Into<String>,
        index: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.indexers
            .insert(name.into(), Index::Typed(Arc::new(index)));
        self
    }

    /// Adds an index named `name` over the object's metadata (labels, owner references,
    /// annotations…): it never decodes the object, whatever the storage.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::{InformerFrom, SharedInformerFactory, factory, testing::FakeSource};
    ///
    /// let factory = SharedInformerFactory::new(factory::Config::default());
    /// let source = |_namespace: Option<&str>| FakeSource::<ConfigMap>::new();
    /// let cms = factory
    ///     .informer_builder::<ConfigMap>(&source)
    ///     .meta_indexer("owner", |meta| {
    ///         let owners = meta.owner_references.iter().flatten();
    ///         owners.map(|o| o.uid.clone()).collect()
    ///     })
    ///     .build()?;
    /// assert!(cms.indexer().index_keys("owner", "some-uid").unwrap().is_empty());
    /// # Ok::<(), factory::Error>(())
    /// ```
    pub fn meta_indexer(
        mut self,
        name: impl Into<String>,
        index: impl Fn(&ObjectMeta) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.indexers
            .insert(name.into(), Index::Meta(Arc::new(index)));
        self
    }

    /// Drops `metadata.managedFields` from every object before it is stored (before the
    /// [`transform`](Self::transform), when there is one); a lean store drops them from its
    /// bytes too.
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = on;
        self
    }

    /// A transform applied to every object before it is stored. It runs once per received
    /// object; it must be idempotent, since a streaming list may hand the same object twice.
    /// A factory refuses it for a lean store, and lets only the request that creates the
    /// informer set one (a transform cannot be compared with another).
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
    /// `tracing` at warn level). In a factory, only the request that creates the informer may
    /// set one.
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&reflector::Error) + Send + Sync + 'static,
    ) -> Self {
        self.error_handler = Some(Arc::new(handler));
        self
    }

    /// Accounts the cache's memory with `sizer`, the bytes one object holds (inline and heap;
    /// the store adds [`store::entry_overhead`](crate::store::entry_overhead) per entry): for
    /// compact storage, `kcache_client::compact::Compact::heap_size` (a lean store sizes its
    /// own bytes). See [`account_memory`](Self::account_memory). Default: not accounted. In a
    /// factory, only the request that creates the informer may set one.
    pub fn memory_sizer(mut self, sizer: impl Fn(&K) -> usize + Send + Sync + 'static) -> Self {
        self.sizer = Some((Arc::new(sizer), false));
        self
    }

    /// Like [`memory_sizer`](Self::memory_sizer), for a sizer already shared.
    pub fn shared_memory_sizer(mut self, sizer: Sizer<K>) -> Self {
        self.sizer = Some((sizer, false));
        self
    }
}

impl<K, S> Builder<K, S>
where
    K: Resource + Clone + Send + Sync + serde::Serialize + 'static,
{
    /// Accounts the cache's memory with [`memory::estimate`] (a deep-size estimate of any
    /// `serde::Serialize` type): [`memory`](SharedIndexInformer::memory) then reports the
    /// objects and bytes held, kept up to date as objects come and go (never by walking the
    /// cache), kcache-metrics exports them (`kcache_informer_cache_bytes`), and
    /// [`Config::memory_budget_bytes`] takes effect.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::{SharedIndexInformer, testing::{FakeSource, config_map}};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let source = FakeSource::<ConfigMap>::new();
    /// source.upsert(config_map("a"));
    /// let informer = SharedIndexInformer::builder(source)
    ///     .account_memory()
    ///     .memory_budget_bytes(64 << 20)
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
    pub fn account_memory(mut self) -> Self {
        self.sizer = Some((memory::estimator(), true));
        self
    }
}

impl<K, L> Builder<K, FromListerWatcher<L>>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    pub(super) fn new(lw: L) -> Self {
        Self::with_defaults(FromListerWatcher(lw), Config::default(), false)
    }

    /// The informer; it does nothing until [`run`](SharedIndexInformer::run).
    pub fn build(self) -> SharedIndexInformer<K> {
        let indexers = self
            .indexers
            .into_iter()
            .map(|(name, index)| {
                let f: IndexFunc<K> = match index {
                    Index::Typed(f) => f,
                    Index::Meta(f) => Arc::new(move |obj: &K| f(obj.meta())),
                };
                (name, f)
            })
            .collect();
        let strip = self
            .strip_managed_fields
            .then_some(strip_managed_fields::<K> as fn(K) -> K);
        SharedIndexInformer::from_parts(
            self.origin.0,
            self.config,
            indexers,
            Extras {
                transform: stripping(strip, self.transform),
                error_handler: self.error_handler,
                sizer: self.sizer.map(|(sizer, _)| sizer),
            },
        )
    }
}

/// `obj` without `metadata.managedFields`.
fn strip_managed_fields<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

/// The transform of an informer that drops managed fields with `strip` (when set), then
/// applies `transform` (when set).
pub(crate) fn stripping<K: 'static>(
    strip: Option<fn(K) -> K>,
    transform: Option<TransformFunc<K>>,
) -> Option<TransformFunc<K>> {
    match (strip, transform) {
        (None, transform) => transform,
        (Some(strip), None) => Some(Arc::new(strip)),
        (Some(strip), Some(f)) => Some(Arc::new(move |obj: K| f(strip(obj)))),
    }
}

/// What the builder hands the informer besides its lister-watcher, configuration and indexes.
pub(crate) struct Extras<K> {
    pub(crate) transform: Option<TransformFunc<K>>,
    pub(crate) error_handler: Option<WatchErrorHandler>,
    pub(crate) sizer: Option<Sizer<K>>,
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::testing::{FakeSource, config_map};

    #[tokio::test(start_paused = true)]
    async fn strip_managed_fields_runs_before_the_transform_and_meta_indexes_see_the_object() {
        let src = FakeSource::new();
        let mut obj = config_map("a");
        obj.metadata.managed_fields = Some(vec![Default::default()]);
        obj.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
        src.upsert(obj);
        let informer = SharedIndexInformer::builder(src)
            .strip_managed_fields(true)
            .transform(|mut cm: ConfigMap| {
                // Sees the object already stripped.
                let stripped = cm.metadata.managed_fields.is_none().to_string();
                cm.data = Some([("stripped".to_owned(), stripped)].into());
                cm
            })
            .meta_indexer("app", |meta| {
                meta.labels
                    .iter()
                    .flatten()
                    .filter(|(k, _)| *k == "app")
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .build();
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let (i, c) = (informer.clone(), cancel.clone());
            async move { i.run(c).await }
        });
        informer.wait_for_sync().await;
        let cached = informer.indexer().by_index("app", "web").unwrap();
        assert_eq!(cached.len(), 1, "the metadata index holds the object");
        assert!(cached[0].metadata.managed_fields.is_none());
        assert_eq!(cached[0].data.as_ref().unwrap()["stripped"], "true");
        assert!(
            informer.indexer().by_index(NAMESPACE_INDEX, "ns").is_ok(),
            "the namespace index is there by default"
        );
        cancel.cancel();
        run.await.unwrap();
    }

    #[test]
    fn indexers_replace_every_index_set_before() {
        let informer = SharedIndexInformer::builder(FakeSource::<ConfigMap>::new())
            .meta_indexer("gone", |_| Vec::new())
            .indexers(Indexers::from([(
                "only".to_owned(),
                Arc::new(|_: &ConfigMap| Vec::new()) as IndexFunc<ConfigMap>,
            )]))
            .build();
        assert!(informer.indexer().by_index("only", "x").is_ok());
        assert!(informer.indexer().by_index("gone", "x").is_err());
        assert!(informer.indexer().by_index(NAMESPACE_INDEX, "x").is_err());
    }
}
