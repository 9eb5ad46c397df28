//! [`Lister`]: typed, namespace-aware reads of an informer's cache with label selectors
//! (client-go's generated listers, once, generically).

use std::sync::Arc;

use kube_core::Resource;

use super::{LabelSelector, NAMESPACE_INDEX, ObjectKey, Reader, selector::matches_labels};

/// Read-only, label-filtered access to a [`ThreadSafeStore`](super::ThreadSafeStore) of
/// Kubernetes objects.
///
/// Cheap to clone; it reads the live store (never a copy). Objects come back as shared
/// `Arc<K>`: treat them as immutable.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::store::{Lister, ThreadSafeStore, parse_label_selector};
///
/// let store = ThreadSafeStore::<ConfigMap>::for_resource();
/// let mut cm = ConfigMap::default();
/// cm.metadata.namespace = Some("prod".into());
/// cm.metadata.name = Some("web".into());
/// cm.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
/// store.add(Arc::new(cm))?;
///
/// let lister = Lister::new(store);
/// let web = parse_label_selector("app=web")?;
/// assert_eq!(lister.list(&web).len(), 1);
/// assert_eq!(lister.namespaced("prod").list(&web).len(), 1);
/// assert!(lister.namespaced("dev").get("web").is_none());
/// assert!(lister.namespaced("prod").get("web").is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Lister<K> {
    store: Reader<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<K> std::fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lister").finish_non_exhaustive()
    }
}

impl<K: Resource + Send + Sync + 'static> Lister<K> {
    /// A lister over `store`, which should be keyed by
    /// [`meta_namespace_key`](super::meta_namespace_key). Namespaced lists use its
    /// [`NAMESPACE_INDEX`] when it has one and scan otherwise.
    pub fn new(store: impl Into<Reader<K>>) -> Self {
        Self {
            store: store.into(),
        }
    }

    /// The underlying store, read-only.
    pub fn store(&self) -> &Reader<K> {
        &self.store
    }

    /// Every object, in any namespace, whose labels match `selector`.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        filter(self.store.list(), selector)
    }

    /// The cluster-scoped object called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.store.get_by_key(name)
    }

    /// Reads restricted to `namespace` (`""` means all namespaces, as in client-go).
    pub fn namespaced(&self, namespace: &str) -> NamespaceLister<K> {
        NamespaceLister {
            store: self.store.clone(),
            namespace: namespace.to_owned(),
        }
    }
}

/// A [`Lister`] restricted to one namespace.
pub struct NamespaceLister<K> {
    store: Reader<K>,
    namespace: String,
}

impl<K> Clone for NamespaceLister<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

impl<K> std::fmt::Debug for NamespaceLister<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceLister")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<K: Resource + Send + Sync + 'static> NamespaceLister<K> {
    /// The objects of this namespace whose labels match `selector`.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        if self.namespace.is_empty() {
            return filter(self.store.list(), selector);
        }
        let candidates = match self.store.by_index(NAMESPACE_INDEX, &self.namespace) {
            Ok(objs) => objs,
            Err(_) => {
                let namespace = Some(self.namespace.as_str());
                let mut all = self.store.list();
                all.retain(|obj| obj.meta().namespace.as_deref() == namespace);
                all
            }
        };
        filter(candidates, selector)
    }

    /// The object called `name` in this namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        let key = ObjectKey::new(Some(&self.namespace), name);
        self.store.get_by_key(&key)
    }
}

fn filter<K: Resource>(mut objs: Vec<Arc<K>>, selector: &LabelSelector) -> Vec<Arc<K>> {
    if !selector.selects_all() {
        objs.retain(|obj| matches_labels(selector, obj.as_ref()));
    }
    objs
}
