//! [`Client`] as a [`factory::Source`]: `factory.informer::<K>(&client)`.

use std::any::TypeId;

use kcache::factory;
use kube_core::{ClusterResourceScope, Resource};
use serde::de::DeserializeOwned;

use crate::{Client, HttpListerWatcher};

/// Typed informers straight from a client: `factory.informer::<Pod>(&client)` lists and watches
/// Pods in the factory's namespace (all namespaces without one). A cluster-scoped kind ignores
/// the namespace, as client-go's factory does.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::{Namespace, Pod};
/// use kcache::{SharedInformerFactory, factory};
/// use kcache_client::Client;
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::infer().await?;
/// let factory = SharedInformerFactory::new(factory::Config::default().namespace("default"));
/// let pods = factory.informer::<Pod>(&client); // Pods in "default"
/// let namespaces = factory.informer::<Namespace>(&client); // cluster-scoped: all of them
/// factory.start();
/// factory.wait_for_cache_sync().await;
/// println!("{} pods, {} namespaces", pods.indexer().len(), namespaces.indexer().len());
/// # Ok(()) }
/// ```
impl<K> factory::Source<K> for Client
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
    K::Scope: 'static,
{
    type ListerWatcher = HttpListerWatcher<K>;

    fn lister_watcher(&self, namespace: Option<&str>) -> HttpListerWatcher<K> {
        let cluster_scoped = TypeId::of::<K::Scope>() == TypeId::of::<ClusterResourceScope>();
        match namespace {
            Some(ns) if !cluster_scoped => {
                HttpListerWatcher::namespaced_with(self.clone(), &(), ns)
            }
            _ => HttpListerWatcher::all(self.clone()),
        }
    }
}
