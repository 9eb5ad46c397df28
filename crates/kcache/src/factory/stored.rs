//! [`Stored`]: what an informer of `K` keeps in its cache — `K` itself, or a lean form of it
//! whose typed view is decoded on demand (`kcache_client::Compact<K>`).

use std::sync::Arc;

use kube_core::{ObjectMeta, Resource};

use crate::{memory::Sizer, reflector::TransformFunc, store::IndexFunc};

/// An index function over the typed object `K`, before it is fitted to the stored form.
pub type TypedIndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// An index function over an object's metadata: it works on every stored form without
/// decoding anything.
pub type MetaIndexFunc = Arc<dyn Fn(&ObjectMeta) -> Vec<String> + Send + Sync>;

/// The form in which an informer of `K` stores its objects, chosen by the
/// [`Source`](super::Source) (its `Object` type).
///
/// Every `K` is its own stored form (typed storage: `Arc<K>` in the cache, shared with the
/// handlers). A lean form (kcache-client's `Compact<K>`: wire bytes plus parsed metadata)
/// implements `Stored<K>` by decoding: its index functions over `K` decode the object each time the
/// store runs them (once per add, twice per update — old and new — and once per delete, per
/// index); a transform over `K` cannot be applied to it (it would decode and
/// re-encode every object), so [`informer::Builder::transform`](crate::informer::Builder::transform)
/// is refused for it. Index functions over metadata
/// ([`informer::Builder::meta_indexer`](crate::informer::Builder::meta_indexer)) never decode.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::factory::Stored;
///
/// // Typed storage: the index function runs on the object itself.
/// let by_key_count = <ConfigMap as Stored<ConfigMap>>::index_fn(Arc::new(|cm: &ConfigMap| {
///     vec![cm.data.as_ref().map_or(0, |d| d.len()).to_string()]
/// }));
/// assert_eq!(by_key_count(&ConfigMap::default()), vec!["0".to_string()]);
/// ```
pub trait Stored<K>: Resource + Clone + Send + Sync + Sized + 'static {
    /// `index` over `K`, applied to the stored form.
    fn index_fn(index: TypedIndexFunc<K>) -> IndexFunc<Self>;

    /// `transform` over `K`, applied to the stored form; `None` when this form cannot take a
    /// typed transform.
    fn transform_fn(transform: TransformFunc<K>) -> Option<TransformFunc<Self>>;

    /// The object without `metadata.managedFields` (for
    /// [`Config::strip_managed_fields`](super::Config::strip_managed_fields)); a lean form
    /// drops them from its bytes too.
    fn strip_managed_fields(obj: Self) -> Self;

    /// The memory sizer of the stored form, from one of `K` (memory accounting,
    /// [`crate::memory`]): `K` itself uses it; a lean form sizes its own bytes instead.
    fn sizer(sizer: Sizer<K>) -> Sizer<Self>;
}

impl<K: Resource + Clone + Send + Sync + 'static> Stored<K> for K {
    fn index_fn(index: TypedIndexFunc<K>) -> IndexFunc<K> {
        index
    }

    fn transform_fn(transform: TransformFunc<K>) -> Option<TransformFunc<K>> {
        Some(transform)
    }

    fn strip_managed_fields(mut obj: K) -> K {
        obj.meta_mut().managed_fields = None;
        obj
    }

    fn sizer(sizer: Sizer<K>) -> Sizer<K> {
        sizer
    }
}

/// `index` over metadata as an index function over any stored form.
pub(super) fn meta_index_fn<S: Resource + 'static>(index: MetaIndexFunc) -> IndexFunc<S> {
    Arc::new(move |obj: &S| index(obj.meta()))
}
