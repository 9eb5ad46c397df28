//! Making the manager's cache of one type: its settings over the manager's defaults, one
//! informer (of every namespace, or one), or one per namespace of a set.

use std::{any::TypeId, sync::Arc};

use kcache::{
    InformerFrom, SharedIndexInformer, SharedInformerFactory, factory,
    informer::{self, HandlerConfig},
};
use kcache_metrics::ResourceLabels;

use super::{Cache, Cached, Error, Manager, Storage, Wake, cache::CacheIndex, namespaces::Scope};
use crate::{ApiObject, api::is_cluster_scoped};

/// Where an informer lists and watches.
#[derive(Clone, Copy)]
enum Placement<'a> {
    /// In the factory's namespace (the manager's, or every namespace).
    Factory,
    /// In every namespace.
    All,
    /// In this namespace.
    One(&'a str),
}

impl Manager {
    /// Makes the cache of `C` as `cache` says, over the manager's defaults, and records it.
    pub(super) fn make_informer<C: ApiObject>(
        &self,
        mut cache: Cache<C>,
    ) -> Result<Cached<C>, Error> {
        let s = &self.shared;
        if cache.label_selector.is_none() {
            cache
                .label_selector
                .clone_from(&s.config.default_label_selector);
        }
        if cache.field_selector.is_none() {
            cache
                .field_selector
                .clone_from(&s.config.default_field_selector);
        }
        // Metadata-only objects are small already, and their requests are not lean ones.
        let storage = if C::metadata_api() {
            Storage::Typed
        } else {
            cache.effective_storage(s.config.storage)
        };
        let scope = if is_cluster_scoped::<C>() {
            Scope::All
        } else {
            cache.namespace.clone().unwrap_or_else(|| s.config.scope())
        };
        // A set of the manager's is named in messages, as a cache's own namespaces are.
        let describe = cache.describe(scope.several().map(|_| &scope));
        let namespaces = match &scope {
            Scope::All => None,
            Scope::Set(set) => Some(set.clone()),
        };
        // One informer per namespace of a set, each from its namespace's factory; else one
        // from the main factory, placed as today: as the cache says, or the factory's.
        let placements: Vec<Placement<'_>> = match scope.several() {
            Some(set) => set.iter().map(|ns| Placement::One(ns)).collect(),
            None => vec![match &cache.namespace {
                None => Placement::Factory,
                Some(Scope::Set(set)) if set.len() == 1 && !is_cluster_scoped::<C>() => {
                    Placement::One(&set[0])
                }
                Some(_) => Placement::All,
            }],
        };
        let several = scope.several().is_some();
        let conflict = |e: factory::Error| Error::CacheExists {
            manager: s.config.name.clone(),
            kind: C::kind(&()).into_owned(),
            existing: e.to_string(),
        };
        let labels = |placement: Placement<'_>| {
            let namespace = match placement {
                Placement::One(ns) => Some(ns),
                Placement::All => None,
                Placement::Factory => s.config.namespace.as_deref(),
            }
            .filter(|_| !is_cluster_scoped::<C>());
            let mut labels = ResourceLabels::of::<C>(namespace, cache.label_selector.as_deref());
            labels.field_selector = cache.field_selector.clone().unwrap_or_default();
            labels
        };
        let cached = match storage {
            Storage::Lean => {
                let mut informers = Vec::with_capacity(placements.len());
                for &placement in &placements {
                    let informer = if several {
                        let factory = s.sets.of(namespace_of(placement));
                        build(&factory, &s.client, &cache, placement)
                    } else {
                        build(&s.factory, &s.client, &cache, placement)
                    }
                    .map_err(conflict)?;
                    self.register(&informer, labels(placement));
                    informers.push(informer);
                }
                Cached::lean(informers, namespaces)
            }
            _ => {
                let typed = s.client.typed();
                let mut informers = Vec::with_capacity(placements.len());
                for &placement in &placements {
                    let informer = if several {
                        let factory = s.sets.of(namespace_of(placement));
                        build(&factory, &typed, &cache, placement)
                    } else {
                        build(&s.factory, &typed, &cache, placement)
                    }
                    .map_err(conflict)?;
                    self.register(&informer, labels(placement));
                    informers.push(informer);
                }
                Cached::typed(informers, namespaces)
            }
        };
        s.informers
            .lock()
            .insert(TypeId::of::<C>(), (Box::new(cached.clone()), describe));
        Ok(cached)
    }

    /// Wakes the reconciles waiting for the caches on each change of `informer`; exports
    /// its metrics.
    fn register<S>(&self, informer: &SharedIndexInformer<S>, labels: ResourceLabels)
    where
        S: kube_core::Resource + Clone + Send + Sync + 'static,
    {
        let s = &self.shared;
        let _ = informer.add_event_handler_with_config(
            Wake(Arc::clone(&s.wake)),
            HandlerConfig::default()
                .delivery(kcache::informer::Delivery::Inline)
                .name("read-your-writes"),
        );
        s.informer_metrics.register_with_labels(informer, labels);
    }
}

/// The namespace of an informer of a set.
fn namespace_of(placement: Placement<'_>) -> &'_ str {
    match placement {
        Placement::One(ns) => ns,
        Placement::Factory | Placement::All => {
            unreachable!("a set's informers are in one namespace each")
        }
    }
}

/// The informer of `C` from `source` in `factory`, with what `cache` declares: selectors,
/// managed-fields stripping, memory accounting, transform (a cache with one is typed),
/// indexes, placed as `placement` says.
fn build<C, S>(
    factory: &SharedInformerFactory,
    source: &S,
    cache: &Cache<C>,
    placement: Placement<'_>,
) -> Result<SharedIndexInformer<S::Object>, factory::Error>
where
    C: ApiObject,
    S: factory::Source<C>,
{
    let mut builder: informer::Builder<C, factory::FromSource<'_, S>> =
        factory.informer_builder::<C>(source);
    if let Some(selector) = &cache.label_selector {
        builder = builder.label_selector(selector.clone());
    }
    if let Some(selector) = &cache.field_selector {
        builder = builder.field_selector(selector.clone());
    }
    if let Some(on) = cache.strip_managed_fields {
        builder = builder.strip_managed_fields(on);
    }
    if cache.account_memory {
        builder = builder.account_memory();
    }
    if let Some(transform) = &cache.transform {
        builder = builder.shared_transform(Arc::clone(transform));
    }
    for (name, index) in &cache.indexes {
        builder = match index {
            CacheIndex::Typed(f) => {
                let f = Arc::clone(f);
                builder.indexer(name.clone(), move |o: &C| f(o))
            }
            CacheIndex::Meta(f) => {
                let f = Arc::clone(f);
                builder.meta_indexer(name.clone(), move |m| f(m))
            }
        };
    }
    match placement {
        Placement::Factory => builder,
        Placement::All => builder.all_namespaces(),
        Placement::One(ns) => builder.namespace(ns),
    }
    .build()
}
