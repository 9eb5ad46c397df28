//! [`FromSource`]: the origin of an [`informer::Builder`] made by a factory
//! (`factory.informer_builder::<K>(&source)`), its settings over the factory's defaults, and
//! the comparison of those settings with the existing informer's.

use std::collections::BTreeSet;

use kube_core::Resource;

use super::{Error, SharedInformerFactory, Source, Stored, short_type_name, stored::meta_index_fn};
use crate::{
    informer::{self, Extras, Index, SharedIndexInformer, stripping},
    store::Indexers,
};

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
    /// Whether a watch error handler of the caller's was set (closures cannot be compared).
    pub(super) watch_error_handler: bool,
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
        let rows: [(&'static str, String, String); 11] = [
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
                "watch error handler",
                if self.watch_error_handler {
                    "set"
                } else {
                    "none"
                }
                .to_owned(),
                if other.watch_error_handler {
                    "set (a handler cannot be compared with another: set it only on the \
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

/// Where an [`informer::Builder`] from `factory.informer_builder::<K>(&source)`
/// ([`InformerFrom`](super::InformerFrom)) gets its informer: the factory's shared informer of
/// the type `source` stores, its lister-watcher made by `source` for the namespace set on the
/// builder.
///
/// The builder starts from the factory's [`Config`](super::Config): its namespace, its
/// informer configuration (resync period, queue, reflector settings with the selectors) and
/// whether it strips managed fields; every setting of the builder overrides them for this
/// informer, and [`namespace`](informer::Builder::namespace) /
/// [`all_namespaces`](informer::Builder::all_namespaces) choose the namespace.
///
/// The factory keeps one informer per stored type. [`build`](informer::Builder::build) creates
/// it, or returns the existing one when it was made with the same settings, and otherwise fails
/// with [`Error::Conflict`] naming the setting: an option is never silently ignored. (A
/// transform, a watch error handler or a memory sizer cannot be compared, so only the request
/// that creates the informer may set one.)
///
/// What the informer stores is chosen by the source ([`Source::Object`]). Index functions added
/// with [`meta_indexer`](informer::Builder::meta_indexer) read only metadata and never decode;
/// those added with [`indexer`](informer::Builder::indexer) see the typed object, which a lean
/// store (`kcache_client::Client`) decodes each time the index runs (once per add, twice per
/// update, once per delete).
///
/// ```
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::{InformerFrom, SharedInformerFactory, factory, testing::FakeSource};
///
/// let factory = SharedInformerFactory::new(factory::Config::default().namespace("default"));
/// let source = |_namespace: Option<&str>| FakeSource::<ConfigMap>::new();
/// let cms = factory
///     .informer_builder::<ConfigMap>(&source)
///     .namespace("kube-system")
///     .label_selector("app=web")
///     .resync_period(Duration::from_secs(600))
///     .indexer("by-data-key", |cm: &ConfigMap| {
///         cm.data.iter().flat_map(|d| d.keys().cloned()).collect()
///     })
///     .build()?;
/// assert!(!cms.has_started());
///
/// // Another selector for the same type is refused, not ignored.
/// let err = factory
///     .informer_builder::<ConfigMap>(&source)
///     .namespace("kube-system")
///     .label_selector("app=db")
///     .build()
///     .unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "the factory already has an informer for ConfigMap with label selector \"app=web\"; \
///      this request asks for \"app=db\" (one informer per type: use the same settings, or \
///      another factory)"
/// );
/// # Ok::<(), factory::Error>(())
/// ```
pub struct FromSource<'f, S> {
    factory: &'f SharedInformerFactory,
    source: &'f S,
    namespace: Option<String>,
}

impl<S> std::fmt::Debug for FromSource<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FromSource")
            .field("source", &std::any::type_name::<S>())
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The builder of the informer of `K` from `source` in `factory`, with the factory's defaults.
pub(super) fn builder<'f, K, S>(
    factory: &'f SharedInformerFactory,
    source: &'f S,
) -> informer::Builder<K, FromSource<'f, S>>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    let defaults = factory.config();
    let origin = FromSource {
        factory,
        source,
        namespace: defaults.namespace.clone(),
    };
    informer::Builder::with_defaults(
        origin,
        defaults.informer.clone(),
        defaults.strip_managed_fields,
    )
}

/// Why a request was refused: the error, and the existing informer when there is one.
pub(super) type Refused<O> = (Error, Option<SharedIndexInformer<O>>);

impl<K, S> informer::Builder<K, FromSource<'_, S>>
where
    K: Resource + Clone + Send + Sync + 'static,
    S: Source<K>,
{
    /// Watches only this namespace (instead of the factory's).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.origin.namespace = Some(namespace.into());
        self
    }

    /// Watches every namespace, whatever the factory's namespace.
    pub fn all_namespaces(mut self) -> Self {
        self.origin.namespace = None;
        self
    }

    /// The factory's informer for the type the source stores ([`Source::Object`]), with these
    /// settings: the existing one when it was made with the same settings, else a new one (it
    /// starts with the factory's next [`start`](SharedInformerFactory::start)).
    ///
    /// # Errors
    /// [`Error::Conflict`] when the factory already has an informer for the stored type made
    /// with other settings (or this request sets a transform, a watch error handler or a
    /// memory sizer); [`Error::TransformNeedsTypedStorage`] when a transform is set and the
    /// source stores a lean form.
    pub fn build(self) -> Result<SharedIndexInformer<S::Object>, Error> {
        self.build_or_existing().map_err(|(err, _)| err)
    }

    /// [`build`](Self::build), handing back the existing informer with a conflict.
    pub(super) fn build_or_existing(
        self,
    ) -> Result<SharedIndexInformer<S::Object>, Refused<S::Object>> {
        let FromSource {
            factory,
            source,
            namespace,
        } = self.origin;
        let settings = Settings {
            namespace: namespace.clone(),
            config: self.config.clone(),
            indexers: self.indexers.keys().cloned().collect::<BTreeSet<_>>(),
            strip_managed_fields: self.strip_managed_fields,
            transform: self.transform.is_some(),
            watch_error_handler: self.error_handler.is_some(),
            memory: match &self.sizer {
                None => Accounting::Off,
                Some((_, true)) => Accounting::Estimated,
                Some((_, false)) => Accounting::Custom,
            },
        };
        let transform = match self.transform {
            None => None,
            Some(f) => Some(S::Object::transform_fn(f).ok_or((
                Error::TransformNeedsTypedStorage {
                    kind: short_type_name::<K>(),
                },
                None,
            ))?),
        };
        let indexers: Indexers<S::Object> = self
            .indexers
            .into_iter()
            .map(|(name, index)| {
                let f = match index {
                    Index::Meta(f) => meta_index_fn::<S::Object>(f),
                    Index::Typed(f) => S::Object::index_fn(f),
                };
                (name, f)
            })
            .collect();
        let strip = self.strip_managed_fields.then_some(
            <S::Object as Stored<K>>::strip_managed_fields as fn(S::Object) -> S::Object,
        );
        let extras = Extras {
            transform: stripping(strip, transform),
            error_handler: self.error_handler,
            // A lean store sizes its objects its own way ([`Stored::sizer`]).
            sizer: self.sizer.map(|(sizer, _)| S::Object::sizer(sizer)),
        };
        let config = self.config;
        factory
            .get_or_create(settings, || {
                let lw = source.lister_watcher(namespace.as_deref());
                SharedIndexInformer::from_parts(lw, config, indexers, extras)
            })
            .map_err(|(conflict, existing)| (conflict, Some(existing)))
    }
}
