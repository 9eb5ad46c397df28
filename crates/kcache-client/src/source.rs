//! [`Client`] as a [`factory::Source`]: `factory.informer::<K>(&client)` stores lean
//! [`Compact<K>`] objects; `factory.informer::<K>(&client.typed())` ([`TypedSource`]) stores
//! typed `K`.

use std::any::TypeId;

use kcache::factory;
use kube_core::{ClusterResourceScope, Resource};
use serde::de::DeserializeOwned;

use crate::{Client, Compact, CompactDecoder, HttpListerWatcher};

/// Informers straight from a client: `factory.informer::<Pod>(&client)` lists and watches
/// Pods in the factory's namespace (all namespaces without one) and stores each one lean, as
/// its wire bytes (protobuf for built-in kinds) plus its parsed metadata ([`Compact<Pod>`]).
/// Handlers and listers get an [`Object<Pod>`](crate::Object) view whose metadata is free and
/// whose typed `Pod` is decoded on first access. A cluster-scoped kind ignores the namespace,
/// as client-go's factory does.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
/// use kcache::{InformerFrom, SharedInformerFactory, factory};
/// use kcache_client::Client;
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::infer().await?;
/// let factory = SharedInformerFactory::new(factory::Config::default().namespace("default"));
/// let pods = factory.informer::<Pod>(&client); // Pods in "default", stored lean
/// let namespaces = factory.informer::<Namespace>(&client.typed()); // all of them, typed
/// // One informer's own settings: the same builder as every informer's.
/// let configmaps = factory
///     .informer_builder::<ConfigMap>(&client)
///     .label_selector("app=web")
///     .strip_managed_fields(true)
///     .build()?;
/// factory.start();
/// factory.wait_for_cache_sync().await;
/// println!("{} pods, {} namespaces", pods.indexer().len(), namespaces.indexer().len());
/// println!("{} web configmaps", configmaps.indexer().len());
/// # Ok(()) }
/// ```
impl<K> factory::Source<K> for Client
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
    K::Scope: 'static,
{
    type Object = Compact<K>;
    type ListerWatcher = HttpListerWatcher<Compact<K>, CompactDecoder>;

    fn lister_watcher(&self, namespace: Option<&str>) -> Self::ListerWatcher {
        lister_watcher::<K, Compact<K>, CompactDecoder>(self, namespace)
    }
}

/// A [`Client`] as a [`factory::Source`] with typed storage: the informer's cache holds
/// `Arc<K>` (k8s-openapi objects), shared with handlers and listers. Made by
/// [`Client::typed`].
///
/// Choose it for a kind whose every object is read in full often (a reconcile that reads
/// each pod's spec on every event, a lister scanned per request): each access is then free,
/// at the price of the decoded objects' memory, which for Pods is about 7× the lean storage
/// (see `BENCHMARKS.md`). The default ([`Client`] itself) is lean.
#[derive(Clone, Debug)]
pub struct TypedSource(Client);

impl Client {
    /// This client as a source of informers with typed storage (`Arc<K>` in the cache):
    /// `factory.informer::<Pod>(&client.typed())`. See [`TypedSource`] for when to choose it.
    pub fn typed(&self) -> TypedSource {
        TypedSource(self.clone())
    }
}

impl<K> factory::Source<K> for TypedSource
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
    K::Scope: 'static,
{
    type Object = K;
    type ListerWatcher = HttpListerWatcher<K>;

    fn lister_watcher(&self, namespace: Option<&str>) -> HttpListerWatcher<K> {
        lister_watcher::<K, K, crate::Typed>(&self.0, namespace)
    }
}

/// The lister-watcher of `O` (stored form of `K`) for `namespace`, or for all namespaces when
/// `K` is cluster-scoped.
fn lister_watcher<K, O, D>(client: &Client, namespace: Option<&str>) -> HttpListerWatcher<O, D>
where
    K: Resource,
    K::Scope: 'static,
    O: Resource<DynamicType = ()>,
    D: Default,
{
    let cluster_scoped = TypeId::of::<K::Scope>() == TypeId::of::<ClusterResourceScope>();
    match namespace {
        Some(ns) if !cluster_scoped => HttpListerWatcher::namespaced_with(client.clone(), &(), ns),
        _ => HttpListerWatcher::all(client.clone()),
    }
}
