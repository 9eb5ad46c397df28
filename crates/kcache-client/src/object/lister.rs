//! [`ObjectLister`]: a lean informer's [`Lister`] handing out [`Object`] views.

use kcache::store::LabelSelector;
use kcache::store::Lister;
use kube_core::Resource;

use super::Object;
use crate::Compact;

/// Label-filtered reads of a lean informer's cache that hand out [`Object<K>`] views: each
/// read gets its own view, which decodes its typed `K` at most once, and the cache keeps only
/// the lean object. Cheap to clone; reads the live store.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::store::{Lister, ThreadSafeStore, parse_label_selector};
/// use kcache_client::{Compact, ObjectLister};
///
/// let store = ThreadSafeStore::<Compact<ConfigMap>>::for_resource();
/// let json = br#"{"metadata":{"name":"web","namespace":"prod","labels":{"app":"web"}},
///                 "data":{"port":"80"}}"#;
/// store.add(Arc::new(Compact::from_json(json, false)?))?;
///
/// let lister = ObjectLister::from(Lister::new(store)); // or `informer.lister()`
/// let web = lister.namespaced("prod").list(&parse_label_selector("app=web")?);
/// assert_eq!(web[0].metadata().name.as_deref(), Some("web"));
/// assert_eq!(web[0].typed()?.data.as_ref().unwrap()["port"], "80");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ObjectLister<K> {
    inner: Lister<Compact<K>>,
}

impl<K> Clone for ObjectLister<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K> std::fmt::Debug for ObjectLister<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectLister").finish_non_exhaustive()
    }
}

impl<K> From<Lister<Compact<K>>> for ObjectLister<K> {
    fn from(inner: Lister<Compact<K>>) -> Self {
        Self { inner }
    }
}

impl<K: Resource + Send + Sync + 'static> ObjectLister<K> {
    /// The lister of stored objects it reads through.
    pub fn stored(&self) -> &Lister<Compact<K>> {
        &self.inner
    }

    /// Every object, in any namespace, whose labels match `selector`.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Object<K>> {
        views(self.inner.list(selector))
    }

    /// The cluster-scoped object called `name`.
    pub fn get(&self, name: &str) -> Option<Object<K>> {
        self.inner.get(name).map(Object::new)
    }

    /// Reads restricted to `namespace` (`""` means all namespaces, as in client-go).
    pub fn namespaced(&self, namespace: &str) -> ObjectNamespaceLister<K> {
        ObjectNamespaceLister {
            inner: self.inner.namespaced(namespace),
        }
    }
}

/// An [`ObjectLister`] restricted to one namespace.
pub struct ObjectNamespaceLister<K> {
    inner: kcache::store::NamespaceLister<Compact<K>>,
}

impl<K> Clone for ObjectNamespaceLister<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K> std::fmt::Debug for ObjectNamespaceLister<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectNamespaceLister")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> ObjectNamespaceLister<K> {
    /// The objects of this namespace whose labels match `selector`.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Object<K>> {
        views(self.inner.list(selector))
    }

    /// The object called `name` in this namespace.
    pub fn get(&self, name: &str) -> Option<Object<K>> {
        self.inner.get(name).map(Object::new)
    }
}

fn views<K>(stored: Vec<std::sync::Arc<Compact<K>>>) -> Vec<Object<K>> {
    stored.into_iter().map(Object::new).collect()
}
