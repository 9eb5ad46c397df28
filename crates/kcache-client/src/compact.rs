//! Compact storage: objects kept as their JSON bytes plus the parsed metadata.
//!
//! A decoded k8s-openapi Pod holds about 7.6× its JSON size in memory (3.8× without
//! `managedFields`), mostly in small allocations. [`Compact<K>`] holds the object's JSON bytes
//! (optionally without `managedFields`) in one allocation, plus its [`ObjectMeta`] parsed (so
//! that key functions, indexers, label selectors and listers work on it through
//! [`Resource`]); the typed `K` is decoded on demand with [`Compact::typed`].
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_client::compact::{Compact, CompactDecoder};
//! use kcache_client::decode::decode_object;
//!
//! let json = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns",
//!   "managedFields":[{"manager":"kubectl"}]},"data":{"k":"v"}}"#;
//! let decoder = CompactDecoder::new().strip_managed_fields(true);
//! let obj: Compact<ConfigMap> = decode_object(json, &decoder).unwrap();
//! assert_eq!(obj.metadata().name.as_deref(), Some("a"));
//! assert!(!obj.json().windows(13).any(|w| w == b"managedFields"));
//! let cm: ConfigMap = obj.typed().unwrap();
//! assert_eq!(cm.data.unwrap()["k"], "v");
//! ```

use std::{borrow::Cow, fmt, marker::PhantomData, sync::Arc};

use kube_core::{ObjectMeta, Resource};
use serde::{
    Deserialize, Deserializer,
    de::{self, DeserializeOwned, IgnoredAny, MapAccess, Visitor},
};
use serde_json::value::RawValue;

use crate::decode::{ItemDecoder, Key, StripManagedFields};

/// An object stored as JSON bytes plus its parsed metadata.
///
/// `metadata` never holds `managedFields` (they stay in the bytes, unless the decoder stripped
/// them). [`Compact::typed`] decodes the bytes and puts `metadata` in place (keeping the
/// bytes' `managedFields`), so edits made through [`Resource::meta_mut`] (a transform dropping
/// annotations, say) show in the typed view.
pub struct Compact<K> {
    metadata: ObjectMeta,
    json: Arc<[u8]>,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for Compact<K> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            json: self.json.clone(),
            _k: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Compact<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compact")
            .field("namespace", &self.metadata.namespace)
            .field("name", &self.metadata.name)
            .field("resource_version", &self.metadata.resource_version)
            .field("json_bytes", &self.json.len())
            .finish()
    }
}

impl<K> PartialEq for Compact<K> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata && self.json == other.json
    }
}

impl<K> Compact<K> {
    /// Builds a compact object from one object's JSON.
    ///
    /// # Errors
    /// The JSON error when `json` is not an object with valid metadata.
    pub fn from_json(json: &[u8], strip_managed_fields: bool) -> Result<Self, serde_json::Error> {
        crate::decode::decode_object(
            json,
            &CompactDecoder::new().strip_managed_fields(strip_managed_fields),
        )
    }

    /// The parsed metadata (without `managedFields`).
    pub fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    /// The stored JSON bytes.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// Bytes held by this object: the JSON, the struct, and an estimate of the metadata's heap
    /// (strings and map entries).
    pub fn heap_size(&self) -> usize {
        let m = &self.metadata;
        let s = |o: &Option<String>| o.as_ref().map_or(0, String::capacity);
        let map = |o: &Option<std::collections::BTreeMap<String, String>>| {
            o.as_ref().map_or(0, |m| {
                m.iter()
                    .map(|(k, v)| k.capacity() + v.capacity() + 48)
                    .sum()
            })
        };
        std::mem::size_of::<Self>()
            + self.json.len()
            + 16
            + s(&m.name)
            + s(&m.namespace)
            + s(&m.uid)
            + s(&m.resource_version)
            + s(&m.generate_name)
            + map(&m.labels)
            + map(&m.annotations)
    }
}

impl<K: DeserializeOwned + Resource> Compact<K> {
    /// Decodes the typed object, with [`Compact::metadata`] in place of the bytes' metadata
    /// (the bytes' `managedFields` are kept).
    ///
    /// # Errors
    /// The JSON error when the bytes are not a valid `K`.
    pub fn typed(&self) -> Result<K, serde_json::Error> {
        let mut obj: K = serde_json::from_slice(&self.json)?;
        let managed = obj.meta_mut().managed_fields.take();
        *obj.meta_mut() = self.metadata.clone();
        obj.meta_mut().managed_fields = managed;
        Ok(obj)
    }
}

impl<K: Resource> Resource for Compact<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Decodes items into [`Compact<K>`]: the object's bytes are kept verbatim (or re-assembled
/// without `metadata.managedFields`), the metadata is parsed once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactDecoder {
    strip_managed_fields: bool,
}

impl CompactDecoder {
    /// Keeps the bytes verbatim, `managedFields` included.
    pub const fn new() -> Self {
        Self {
            strip_managed_fields: false,
        }
    }

    /// Drops `metadata.managedFields` from the stored bytes too.
    #[must_use]
    pub const fn strip_managed_fields(mut self, strip: bool) -> Self {
        self.strip_managed_fields = strip;
        self
    }
}

impl<K> ItemDecoder<Compact<K>> for CompactDecoder {
    fn decode_item<'de, D: Deserializer<'de>>(&self, d: D) -> Result<Compact<K>, D::Error> {
        if self.strip_managed_fields {
            d.deserialize_map(StrippingVisitor(PhantomData))
        } else {
            let raw = <&'de RawValue>::deserialize(d)?;
            let metadata = parse_metadata(raw.get()).map_err(de::Error::custom)?;
            Ok(Compact {
                metadata,
                json: Arc::from(raw.get().as_bytes()),
                _k: PhantomData,
            })
        }
    }
}

/// `{"metadata": …}` with everything else skipped, and `managedFields` skipped in metadata.
fn parse_metadata(object: &str) -> Result<ObjectMeta, serde_json::Error> {
    #[derive(Deserialize)]
    struct MetaOnly {
        #[serde(default)]
        metadata: ObjectMeta,
    }
    let mut de = serde_json::Deserializer::from_str(object);
    let m = MetaOnly::deserialize(StripManagedFields::new(&mut de))?;
    Ok(m.metadata)
}

/// Walks the top-level map, keeping each value's raw bytes; the metadata map is re-assembled
/// without `managedFields` and parsed.
struct StrippingVisitor<K>(PhantomData<fn() -> K>);

impl<'de, K> Visitor<'de> for StrippingVisitor<K> {
    type Value = Compact<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(4096);
        out.push(b'{');
        let mut metadata = ObjectMeta::default();
        let mut first = true;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let raw = map.next_value::<&'de RawValue>()?;
            if !first {
                out.push(b',');
            }
            first = false;
            write_key(&mut out, key.as_str());
            if key.as_str() == "metadata" {
                let stripped = strip_metadata(raw.get()).map_err(de::Error::custom)?;
                metadata = serde_json::from_slice(&stripped).map_err(de::Error::custom)?;
                out.extend_from_slice(&stripped);
            } else {
                out.extend_from_slice(raw.get().as_bytes());
            }
        }
        out.push(b'}');
        Ok(Compact {
            metadata,
            json: Arc::from(out),
            _k: PhantomData,
        })
    }
}

/// The metadata object's JSON without its `managedFields` member.
fn strip_metadata(meta: &str) -> Result<Vec<u8>, serde_json::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object's metadata")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(1024);
            out.push(b'{');
            let mut first = true;
            while let Some(key) = map.next_key::<Key<'de>>()? {
                if key.as_str() == "managedFields" {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                let raw = map.next_value::<&'de RawValue>()?;
                if !first {
                    out.push(b',');
                }
                first = false;
                write_key(&mut out, key.as_str());
                out.extend_from_slice(raw.get().as_bytes());
            }
            out.push(b'}');
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(meta);
    let out = de.deserialize_map(V)?;
    de.end()?;
    Ok(out)
}

fn write_key(out: &mut Vec<u8>, key: &str) {
    // Serialising a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, key);
    out.push(b':');
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kcache::store::ObjectKey;

    use super::*;
    use crate::decode::{Typed, decode_list, decode_object};

    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns",
        "labels":{"app":"web"},"managedFields":[{"manager":"kubectl","operation":"Update",
        "fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}}],
        "resourceVersion":"7"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#;

    #[test]
    fn compact_keeps_verbatim_bytes_and_parsed_metadata() {
        let c: Compact<Pod> = decode_object(POD.as_bytes(), &CompactDecoder::new()).unwrap();
        assert_eq!(c.json(), POD.as_bytes());
        assert_eq!(c.metadata().labels.as_ref().unwrap()["app"], "web");
        assert!(c.metadata().managed_fields.is_none());
        let typed = c.typed().unwrap();
        assert_eq!(typed, serde_json::from_str::<Pod>(POD).unwrap());
    }

    #[test]
    fn stripped_compact_bytes_decode_to_the_stripped_object() {
        let c: Compact<Pod> = decode_object(
            POD.as_bytes(),
            &CompactDecoder::new().strip_managed_fields(true),
        )
        .unwrap();
        assert!(c.json().len() < POD.len());
        let expected: Pod =
            decode_object(POD.as_bytes(), &Typed::new().strip_managed_fields(true)).unwrap();
        assert_eq!(c.typed().unwrap(), expected);
        assert_eq!(serde_json::from_slice::<Pod>(c.json()).unwrap(), expected);
    }

    #[test]
    fn key_functions_work_on_compact_objects_through_resource() {
        let c: Compact<Pod> = decode_object(POD.as_bytes(), &CompactDecoder::new()).unwrap();
        let key = kcache::store::meta_namespace_key(&c).unwrap();
        assert_eq!(key, ObjectKey::new(Some("ns"), "p"));
    }

    #[test]
    fn meta_mut_edits_show_in_the_typed_view() {
        let mut c: Compact<Pod> = decode_object(POD.as_bytes(), &CompactDecoder::new()).unwrap();
        c.meta_mut().labels = None;
        let typed = c.typed().unwrap();
        assert!(typed.metadata.labels.is_none());
        assert!(typed.metadata.managed_fields.is_some());
    }

    #[test]
    fn compact_lists_decode_every_item() {
        let body = format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{POD},{POD}]}}"#
        );
        for strip in [false, true] {
            let list = decode_list::<Compact<Pod>, _>(
                body.as_bytes(),
                &CompactDecoder::new().strip_managed_fields(strip),
            )
            .unwrap();
            assert_eq!(list.items.len(), 2);
            assert_eq!(list.items[1].metadata().name.as_deref(), Some("p"));
        }
    }

    #[test]
    fn invalid_metadata_is_an_error() {
        let bad = br#"{"metadata":{"name":7}}"#;
        assert!(decode_object::<Compact<Pod>, _>(bad, &CompactDecoder::new()).is_err());
        assert!(
            decode_object::<Compact<Pod>, _>(
                bad,
                &CompactDecoder::new().strip_managed_fields(true)
            )
            .is_err()
        );
    }
}
