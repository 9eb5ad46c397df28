//! [`InformerBuilder`]: one informer's own settings, over the factory's defaults.

use std::{
    collections::BTreeMap, collections::BTreeSet, marker::PhantomData, sync::Arc, time::Duration,
};

use kube_core::{ObjectMeta, Resource};

use super::{
    Error, MetaIndexFunc, SharedInformerFactory, Source, Stored, TypedIndexFunc, short_type_name,
    stored::meta_index_fn,
};
use crate::{
    fifo::QueueKind,
    informer::{self, SharedIndexInformer},
    memory::{self, Sizer},
    reflector::{self, TransformFunc},
    store::{Indexers, NAMESPACE_INDEX, namespace_indexers},
};

/// An index added to the builder: over metadata (never decodes) or over the typed object.
enum Index<K> {
    Meta(MetaIndexFunc),
    Typed(TypedIndexFunc<K>),
}

/// What an informer was made with, compared when another request asks for the same type.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Settings {
    /// The namespace it watches (`None`: all).
    pub(super) namespace: Option<String>,
    /// Its informer configuration (resync, queue, reflector settings with the selectors).
    pub(super) config: informer::Config,
    /// The names of its indexes.
    pub(super) indexers: BTreeSet<String>,
    /// Whether `metadata.managedFields` is dropped.
    pub(super) strip_managed_fields: bool,
    /// Whether a transform of the caller's was set (closures cannot be compared).
    pub(super) transform: bool,
    /// How the cache's memory is accounted.
    pub(super) memory: Accounting,
}

/// How an informer's cache memory is accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Accounting {
    /// Not at all.
    Off,
    /// With [`memory::estimate`].
    Estimated,
    /// With the caller's sizer (closures cannot be compared).
    Custom,
}

impl Accounting {
    fn existing(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Estimated => "estimated",
            Self::Custom => "a custom sizer",
        }
    }

    fn requested(self) -> &'static str {
        match self {
            Self::Custom => {
                "a custom sizer (a sizer cannot be compared with another: set it only on the \
                 request that creates the informer)"
            }
            other => other.existing(),
        }
    }
}

impl Settings {
    /// The first setting on which `self` (the existing informer) and `other` (a request)
    /// differ, with both values, for [`Error::Conflict`].
    pub(super) fn first_difference(&self, other: &Self) -> Option<(&'static str, String, String)> {
        let (a, b) = (&self.config.reflector, &other.config.reflector);
        let rows: [(&'static str, String, String); 10] = [
            (
                "namespace",
                show(&self.namespace, "all namespaces"),
                show(&other.namespace, "all namespaces"),
            ),
            (
                "label selector",
                show(&a.label_selector, "none"),
                show(&b.label_selector, "none"),
            ),
            (
                "field selector",
                show(&a.field_selector, "none"),
                show(&b.field_selector, "none"),
            ),
            (
                "resync period",
                format!("{:?}", self.config.resync_period),
                format!("{:?}", other.config.resync_period),
            ),
            (
                "queue",
                format!("{:?}", self.config.queue),
                format!("{:?}", other.config.queue),
            ),
            (
                "indexers",
                format!("{:?}", self.indexers),
                format!("{:?}", other.indexers),
            ),
            (
                "strip managed fields",
                self.strip_managed_fields.to_string(),
                other.strip_managed_fields.to_string(),
            ),
            (
                "transform",
                if self.transform { "set" } else { "none" }.to_owned(),
                if other.transform {
                    "set (a transform cannot be compared with another: set it only on the \
                     request that creates the informer)"
                } else {
                    "none"
                }
                .to_owned(),
            ),
            (
                "memory accounting",
                self.memory.existing().to_owned(),
                other.memory.requested().to_owned(),
            ),
            (
                "memory budget",
                show_bytes(self.config.memory_budget_bytes),
                show_bytes(other.config.memory_budget_bytes),
            ),
        ];
        if let Some(row) = rows.into_iter().find(|(_, x, y)| x != y) {
            return Some(row);
        }
        (self.config != other.config).then(|| {
            (
                "informer settings",
                format!("{:?}", self.config),
                format!("{:?}", other.config),
            )
        })
    }
}

fn show_bytes(budget: Option<usize>) -> String {
    budget.map_or_else(|| "none".to_owned(), |b| format!("{b} bytes"))
}

fn show(value: &Option<String>, none: &str) -> String {
    value
        .as_deref()
        .map_or_else(|| none.to_owned(), |v| format!("{v:?}"))
}

/// One informer's settings, starting from the factory's [`Config`](super::Config) and
/// overriding what is set here: namespace, label and field selectors, resync period, queue,
/// indexes, transform. Made by [`SharedInformerFactory::informer_builder`]; finished by
/// [`build`](Self::build).
///
/// The factory keeps one informer per type. `build` creates it, or returns the existing one
/// when it was made with the same settings, and otherwise fails with [`Error::Conflict`]
/// naming the setting: an option is never silently ignored. (A transform cannot be compared,
/// so only the request that creates the informer may set one.)
///
/// What the informer stores is chosen by the source given to [`build`](Self::build)
/// ([`Source::Object`]). Index functions added with [`meta_indexer`](Self::meta_indexer) read
/// only metadata and never decode; those added with [`indexer`](Self::indexer) see the typed
/// object, which a lean store (`kcache_client::Client`) decodes each time the index runs (once
/// per add, twice per update, once per delete).
///
/// ```
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::{SharedInformerFactory, factory, testing::FakeSource};
///
/// let factory = SharedInformerFactory::new(factory::Config::default().namespace("default"));
/// let source = |_namespace: Option<&str>| FakeSource::<ConfigMap>::new();
/// let cms = factory
///     .informer_builder::<ConfigMap>()
///     .namespace("kube-system")
///     .label_selector("app=web")
///     .resync_period(Duration::from_secs(600))
///     .indexer("by-data-key", |cm: &ConfigMap| {
///         cm.data.iter().flat_map(|d| d.keys().cloned()).collect()
///     })
///     .build(&source)?;
/// assert!(!cms.has_started());
///
/// // Another selector for the same type is refused, not ignored.
/// let err = factory
///     .informer_builder::<ConfigMap>()
///     .namespace("kube-system")
///     .label_selector("app=db")
///     .build(&source)
///     .unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "the factory already has an informer for ConfigMap with label selector \"app=web\"; \
///      this request asks for \"app=db\" (one informer per type: use the same settings, or \
///      another factory)"
/// );
/// # Ok::<(), factory::Error>(())
/// ```
#[must_use = "an informer builder does nothing until `build`"]
pub struct InformerBuilder<'f, K> {
    factory: &'f SharedInformerFactory,
    namespace: Option<String>,
    config: informer::Config,
    indexers: BTreeMap<String, Index<K>>,
    strip_managed_fields: bool,
    transform: Option<TransformFunc<K>>,
    sizer: Option<(Accounting, Sizer<K>)>,
    _kind: PhantomData<fn() -> K>,
}

impl<'f, K> InformerBuilder<'f, K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    pub(super) fn new(factory: &'f SharedInformerFactory) -> Self {
        let defaults = factory.config();
        Self {
            factory,
            namespace: defaults.namespace.clone(),
            config: defaults.informer.clone(),
            indexers: BTreeMap::new(),
            strip_managed_fields: defaults.strip_managed_fields,
            transform: None,
            sizer: None,
            _kind: PhantomData,
        }
    }

    /// Watches only this namespace (instead of the factory's).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Watches every namespace, whatever the factory's namespace.
    pub fn all_namespaces(mut self) -> Self {
        self.namespace = None;
        self
    }

    /// Lists and watches only objects matching this label selector.
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.config.reflector.label_selector = Some(selector.into());
        self
    }

    /// Lists and watches only objects matching this field selector.
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
    /// on this builder before are replaced by the ones in `reflector`.
    pub fn reflector(mut self, reflector: reflector::Config) -> Self {
        self.config.reflector = reflector;
        self
    }

    /// Adds an index named `name` over the typed object (the namespace index is always
    /// there). With lean storage the object is decoded each time this index runs (once per
    /// add, twice per update — the old and the new object — once per delete); an
    /// object that does not decode is in no value of it (and the error is logged).
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
    /// use kcache::{SharedInformerFactory, factory, testing::FakeSource};
    ///
    /// let factory = SharedInformerFactory::new(factory::Config::default());
    /// let cms = factory
    ///     .informer_builder::<ConfigMap>()
    ///     .meta_indexer("owner", |meta| {
    ///         let owners = meta.owner_references.iter().flatten();
    ///         owners.map(|o| o.uid.clone()).collect()
    ///     })
    ///     .build(&|_namespace: Option<&str>| FakeSource::<ConfigMap>::new())?;
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

    /// Drops `metadata.managedFields` before objects are stored (instead of the factory's
    /// choice).
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = on;
        self
    }

    /// Applies `transform` to every object before it is stored (after managed fields are
    /// stripped, when they are). Only the request that creates the informer may set one, and
    /// only with typed storage: [`build`](Self::build) refuses it for a lean store.
    pub fn transform(mut self, transform: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// Accounts the cache's memory with `sizer` (the bytes one object holds), e.g.
    /// `kcache_client::compact::Compact::heap_size` for compact storage; see
    /// [`account_memory`](Self::account_memory). Only the request that creates the informer
    /// may set one.
    pub fn memory_sizer(mut self, sizer: impl Fn(&K) -> usize + Send + Sync + 'static) -> Self {
        self.sizer = Some((Accounting::Custom, Arc::new(sizer)));
        self
    }

    /// The cache's memory budget in bytes
    /// ([`informer::Config::memory_budget_bytes`]): over it the informer warns and reports
    /// itself over budget (kcache-metrics' readiness fails). Needs memory accounting.
    pub fn memory_budget_bytes(mut self, bytes: usize) -> Self {
        self.config.memory_budget_bytes = Some(bytes);
        self
    }

    /// The factory's informer for `K` with these settings, its lister-watcher made by `source`
    /// for the namespace set here, storing what `source` chooses ([`Source::Object`]).
    ///
    /// # Errors
    /// [`Error::Conflict`] when the factory already has an informer for the stored type made
    /// with other settings (or this request sets a transform);
    /// [`Error::TransformNeedsTypedStorage`] when a transform is set and the source stores a
    /// lean form.
    pub fn build<S: Source<K>>(self, source: &S) -> Result<SharedIndexInformer<S::Object>, Error> {
        let mut names: BTreeSet<String> = self.indexers.keys().cloned().collect();
        names.insert(NAMESPACE_INDEX.to_owned());
        let settings = Settings {
            namespace: self.namespace.clone(),
            config: self.config.clone(),
            indexers: names,
            strip_managed_fields: self.strip_managed_fields,
            transform: self.transform.is_some(),
            memory: self.sizer.as_ref().map_or(Accounting::Off, |(a, _)| *a),
        };
        let transform = match self.transform {
            None => None,
            Some(f) => Some(S::Object::transform_fn(f).ok_or(
                Error::TransformNeedsTypedStorage {
                    kind: short_type_name::<K>(),
                },
            )?),
        };
        let mut indexers: Indexers<S::Object> = namespace_indexers::<S::Object>();
        for (name, index) in self.indexers {
            let index = match index {
                Index::Meta(f) => meta_index_fn::<S::Object>(f),
                Index::Typed(f) => S::Object::index_fn(f),
            };
            indexers.insert(name, index);
        }
        let (namespace, strip, config) = (self.namespace, self.strip_managed_fields, self.config);
        // A lean store sizes its objects its own way ([`Stored::sizer`]).
        let sizer = self.sizer.map(|(_, sizer)| S::Object::sizer(sizer));
        self.factory
            .get_or_create(settings, || {
                let mut builder =
                    SharedIndexInformer::builder(source.lister_watcher(namespace.as_deref()))
                        .config(config)
                        .indexers(indexers);
                if strip || transform.is_some() {
                    builder = builder.transform(move |mut obj: S::Object| {
                        if strip {
                            obj = S::Object::strip_managed_fields(obj);
                        }
                        match &transform {
                            Some(f) => f(obj),
                            None => obj,
                        }
                    });
                }
                if let Some(sizer) = sizer {
                    builder = builder.shared_memory_sizer(sizer);
                }
                builder.build()
            })
            .map_err(|(conflict, _existing)| conflict)
    }
}

impl<K> InformerBuilder<'_, K>
where
    K: Resource + Clone + Send + Sync + serde::Serialize + 'static,
{
    /// Accounts the cache's memory with [`memory::estimate`]:
    /// [`SharedIndexInformer::memory`] reports the objects and bytes held, kept up to date
    /// incrementally, kcache-metrics exports them (`kcache_informer_cache_bytes`), and a
    /// [`memory_budget_bytes`](Self::memory_budget_bytes) takes effect.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcache::{SharedInformerFactory, factory, testing::FakeSource};
    ///
    /// let factory = SharedInformerFactory::new(factory::Config::default());
    /// let pods = factory
    ///     .informer_builder::<Pod>()
    ///     .strip_managed_fields(true)
    ///     .account_memory()
    ///     .memory_budget_bytes(512 << 20)
    ///     .build(&|_: Option<&str>| FakeSource::<Pod>::new())?;
    /// assert_eq!(pods.memory().map(|m| m.bytes), Some(0));
    /// assert_eq!(pods.memory_budget(), Some(512 << 20));
    ///
    /// // The same type without accounting is refused, not silently accounted.
    /// let err = factory
    ///     .informer_builder::<Pod>()
    ///     .strip_managed_fields(true)
    ///     .memory_budget_bytes(512 << 20)
    ///     .build(&|_: Option<&str>| FakeSource::<Pod>::new())
    ///     .unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "the factory already has an informer for Pod with memory accounting estimated; this \
    ///      request asks for off (one informer per type: use the same settings, or another \
    ///      factory)"
    /// );
    /// # Ok::<(), factory::Error>(())
    /// ```
    pub fn account_memory(mut self) -> Self {
        self.sizer = Some((Accounting::Estimated, memory::estimator()));
        self
    }
}

impl<K> std::fmt::Debug for InformerBuilder<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let indexers: Vec<_> = self.indexers.keys().collect();
        f.debug_struct("InformerBuilder")
            .field("kind", &std::any::type_name::<K>())
            .field("namespace", &self.namespace)
            .field("config", &self.config)
            .field("indexers", &indexers)
            .field("strip_managed_fields", &self.strip_managed_fields)
            .field("transform", &self.transform.is_some())
            .field("memory", &self.sizer.as_ref().map(|(a, _)| *a))
            .finish()
    }
}
