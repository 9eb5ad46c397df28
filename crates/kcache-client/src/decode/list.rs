//! List responses decoded in one pass: the envelope's `items` go straight into `Vec<K>`.

use std::{fmt, marker::PhantomData};

use kube_core::{ListMeta, ObjectList, TypeMeta};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{
    item::{ItemDecoder, ItemSeed},
    strip::Key,
};

/// Decodes a list response body (`{"kind":"…List","metadata":{…},"items":[…]}`) into an
/// [`ObjectList`], decoding each item with `decoder` directly from the bytes: no intermediate
/// tree, no clone.
///
/// A missing `kind`/`apiVersion` defaults to `v1`/`List`, and `"items": null` to no items, as in
/// kube-core.
///
/// # Errors
/// The JSON error (with line and column) when the body is not a valid list of `K`.
pub fn decode_list<K: Clone, D: ItemDecoder<K>>(
    body: &[u8],
    decoder: &D,
) -> Result<ObjectList<K>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let list = ListSeed {
        decoder,
        _k: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(list)
}

struct ListSeed<'a, K, D> {
    decoder: &'a D,
    _k: PhantomData<fn() -> K>,
}

impl<'de, K: Clone, D: ItemDecoder<K>> DeserializeSeed<'de> for ListSeed<'_, K, D> {
    type Value = ObjectList<K>;

    fn deserialize<De: Deserializer<'de>>(self, d: De) -> Result<Self::Value, De::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: Clone, D: ItemDecoder<K>> Visitor<'de> for ListSeed<'_, K, D> {
    type Value = ObjectList<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes list object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut api_version = None;
        let mut kind = None;
        let mut metadata = None;
        let mut items = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = map.next_value::<Option<ListMeta>>()?,
                "items" => {
                    if items.is_some() {
                        return Err(de::Error::duplicate_field("items"));
                    }
                    items = Some(map.next_value_seed(ItemsSeed {
                        decoder: self.decoder,
                        _k: PhantomData,
                    })?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let types = match (api_version, kind) {
            (None, None) => TypeMeta {
                api_version: "v1".to_owned(),
                kind: "List".to_owned(),
            },
            (api_version, kind) => TypeMeta {
                api_version: api_version.unwrap_or_default(),
                kind: kind.unwrap_or_default(),
            },
        };
        Ok(ObjectList {
            types,
            metadata: metadata.unwrap_or_default(),
            items: items.unwrap_or_default(),
        })
    }
}

struct ItemsSeed<'a, K, D> {
    decoder: &'a D,
    _k: PhantomData<fn() -> K>,
}

impl<'de, K, D: ItemDecoder<K>> DeserializeSeed<'de> for ItemsSeed<'_, K, D> {
    type Value = Vec<K>;

    fn deserialize<De: Deserializer<'de>>(self, d: De) -> Result<Vec<K>, De::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, K, D: ItemDecoder<K>> Visitor<'de> for ItemsSeed<'_, K, D> {
    type Value = Vec<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Vec<K>, E> {
        Ok(Vec::new())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Vec<K>, E> {
        Ok(Vec::new())
    }

    fn visit_some<De: Deserializer<'de>>(self, d: De) -> Result<Vec<K>, De::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<K>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(ItemSeed::new(self.decoder))? {
            items.push(item);
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::decode::Typed;

    #[test]
    fn decodes_items_metadata_and_continue_token() {
        let body =
            br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"12",
            "continue":"abc","remainingItemCount":3},"items":[{"metadata":{"name":"a"}},
            {"metadata":{"name":"b"},"data":{"k":"v"}}],"extra":{"ignored":[1,2]}}"#;
        let list = decode_list::<ConfigMap, _>(body, &Typed::new()).unwrap();
        assert_eq!(list.types.kind, "ConfigMapList");
        assert_eq!(list.metadata.resource_version.as_deref(), Some("12"));
        assert_eq!(list.metadata.continue_.as_deref(), Some("abc"));
        assert_eq!(list.metadata.remaining_item_count, Some(3));
        let names: Vec<_> = list
            .items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(list.items[1].data.as_ref().unwrap()["k"], "v");
    }

    #[test]
    fn null_items_and_missing_type_meta_default_like_kube_core() {
        let list =
            decode_list::<ConfigMap, _>(br#"{"metadata":{},"items":null}"#, &Typed::new()).unwrap();
        assert!(list.items.is_empty());
        assert_eq!(list.types.api_version, "v1");
        assert_eq!(list.types.kind, "List");
    }

    #[test]
    fn trailing_garbage_and_bad_items_are_errors() {
        assert!(decode_list::<ConfigMap, _>(br#"{"items":[]} x"#, &Typed::new()).is_err());
        assert!(decode_list::<ConfigMap, _>(br#"{"items":[{"data":7}]}"#, &Typed::new()).is_err());
        assert!(decode_list::<ConfigMap, _>(br#"{"items":[{"#, &Typed::new()).is_err());
        assert!(decode_list::<ConfigMap, _>(br#"[]"#, &Typed::new()).is_err());
    }
}
