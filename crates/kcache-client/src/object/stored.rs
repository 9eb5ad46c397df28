//! [`Compact<K>`] as a [`Stored`] form of `K`: index functions over `K` decode when they run,
//! typed transforms are refused, managed fields are dropped from the bytes.

use std::sync::Arc;

use kcache::{
    factory::{Stored, TypedIndexFunc},
    reflector::TransformFunc,
    store::IndexFunc,
};
use kube_core::Resource;
use serde::de::DeserializeOwned;

use crate::Compact;

/// Lean storage. An index function over `K` decodes the object each time the store computes
/// its values and drops the decoded copy: once per add, twice per update (the stored old
/// object and the new one: the store recomputes the old values to move the key) and once per
/// delete, for each such index; an object that does not decode is in no value of
/// the index and the error is logged at warn level. Index functions over metadata
/// ([`informer::Builder::meta_indexer`](kcache::informer::Builder::meta_indexer), the
/// namespace index) never decode. A transform over `K` cannot apply (it would decode and
/// re-encode every object): [`transform_fn`](Stored::transform_fn) is `None`.
impl<K> Stored<K> for Compact<K>
where
    K: Resource + DeserializeOwned + Clone + Send + Sync + 'static,
    K::DynamicType: 'static,
{
    fn index_fn(index: TypedIndexFunc<K>) -> IndexFunc<Self> {
        Arc::new(move |obj: &Compact<K>| match obj.typed() {
            Ok(typed) => index(&typed),
            Err(error) => {
                tracing::warn!(
                    namespace = obj.metadata().namespace.as_deref().unwrap_or(""),
                    name = obj.metadata().name.as_deref().unwrap_or(""),
                    %error,
                    "an object does not decode; it is left out of a typed index"
                );
                Vec::new()
            }
        })
    }

    fn transform_fn(_transform: TransformFunc<K>) -> Option<TransformFunc<Self>> {
        None
    }

    /// Rewrites the bytes without `managedFields` ([`Compact::without_managed_fields`]); an
    /// object whose bytes do not parse is kept as it is (and the error logged).
    /// A lean object is sized by its bytes and parsed metadata ([`Compact::heap_size`]),
    /// whatever sizer of `K` was asked for.
    fn sizer(_sizer: kcache::memory::Sizer<K>) -> kcache::memory::Sizer<Self> {
        Arc::new(Compact::heap_size)
    }

    fn strip_managed_fields(obj: Self) -> Self {
        let kept = obj.clone();
        obj.without_managed_fields().unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot drop managedFields from an object's bytes; kept");
            kept
        })
    }
}
