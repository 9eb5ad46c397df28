//! Compact objects: an object kept as its protobuf bytes plus the metadata a cache needs for
//! keys, indexes and selectors, with a typed view decoded on demand.
//!
//! A decoded 8 KB Pod takes several times its wire size in memory (hundreds of small
//! allocations); its protobuf bytes take about 0.7× its JSON size. A cache that mostly answers
//! "which keys match this selector" and hands out few full objects can hold these instead.
//!
//! [`object_meta`] parses an object's full metadata (as k8s-openapi's `ObjectMeta`, without
//! `managedFields`) from its bytes without decoding the rest; [`strip_managed_fields`] removes
//! `metadata.managedFields` from the bytes by rewriting the message ([`wire`]), not by
//! decoding and re-encoding it.

pub mod wire;

pub use wire::{LayoutError, strip_managed_fields};

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message;
use serde::de::DeserializeOwned;

use crate::apimachinery::pkg::apis::meta::v1::Time;
use crate::decode::{DecodeConfig, DecodeError, decode_item};
use crate::envelope::Envelope;
use crate::list::{RawList, item_kind};

/// The metadata a cache needs without decoding the object.
///
/// Not part of the supported surface: kept for this crate's decode bench and fuzz target; the
/// lean storage users get is `kcache_client::compact::Compact`.
#[doc(hidden)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactMeta {
    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.deletionTimestamp`, seconds since the Unix epoch.
    pub deletion_timestamp: Option<i64>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
}

/// The leading fields of `ObjectMeta` a [`CompactMeta`] needs, with the upstream tags: prost
/// skips the other fields (annotations, managedFields, ...) without allocating. A test checks
/// the tags against the generated `ObjectMeta`.
#[derive(Clone, PartialEq, Message)]
struct MetaView {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(int64, optional, tag = "7")]
    generation: Option<i64>,
    #[prost(message, optional, tag = "9")]
    deletion_timestamp: Option<Time>,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
}

/// Any top-level object: `metadata` is field 1 in every kind.
#[derive(Clone, PartialEq, Message)]
struct ObjectView {
    #[prost(message, optional, tag = "1")]
    metadata: Option<MetaView>,
}

/// An object kept as protobuf bytes + [`CompactMeta`].
///
/// Not part of the supported surface (see [`CompactMeta`]).
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactObject {
    type_meta: Arc<(String, String)>,
    raw: Bytes,
    meta: CompactMeta,
}

impl CompactObject {
    /// From an object's protobuf message (the envelope's `raw`, or a list item). The bytes are
    /// copied into their own buffer so that one kept object does not pin a whole list body.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Malformed`] if the metadata cannot be decoded.
    pub fn from_raw(type_meta: Arc<(String, String)>, raw: &[u8]) -> Result<Self, DecodeError> {
        let view = ObjectView::decode(raw).map_err(|source| DecodeError::Malformed {
            kind: type_meta.1.clone(),
            source,
        })?;
        let m = view.metadata.unwrap_or_default();
        let meta = CompactMeta {
            namespace: m.namespace.unwrap_or_default(),
            name: m.name.unwrap_or_default(),
            uid: m.uid.unwrap_or_default(),
            resource_version: m.resource_version.unwrap_or_default(),
            generation: m.generation,
            deletion_timestamp: m.deletion_timestamp.map(|t| t.seconds.unwrap_or_default()),
            labels: m.labels,
        };
        Ok(Self {
            type_meta,
            raw: Bytes::copy_from_slice(raw),
            meta,
        })
    }

    /// From an enveloped object.
    ///
    /// # Errors
    ///
    /// As [`CompactObject::from_raw`].
    pub fn from_envelope(env: &Envelope) -> Result<Self, DecodeError> {
        Self::from_raw(
            Arc::new((env.api_version.clone(), env.kind.clone())),
            &env.raw,
        )
    }

    /// Every item of an enveloped list (`XList`); the items share one type record.
    ///
    /// # Errors
    ///
    /// [`DecodeError::List`] or as [`CompactObject::from_raw`].
    pub fn from_list(env: &Envelope) -> Result<Vec<Self>, DecodeError> {
        let type_meta = Arc::new((env.api_version.clone(), item_kind(&env.kind)?.to_owned()));
        let list = RawList::decode_raw(env.raw.clone())?;
        list.items
            .iter()
            .map(|raw| Self::from_raw(type_meta.clone(), raw))
            .collect()
    }

    /// The parsed metadata.
    pub fn meta(&self) -> &CompactMeta {
        &self.meta
    }

    /// `(apiVersion, kind)`.
    pub fn type_meta(&self) -> (&str, &str) {
        (&self.type_meta.0, &self.type_meta.1)
    }

    /// The object's protobuf bytes.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// Decodes the typed object (see [`crate::decode_object`]).
    ///
    /// # Errors
    ///
    /// As [`crate::decode_object`].
    pub fn decode<K: DeserializeOwned + 'static>(&self) -> Result<K, DecodeError> {
        decode_item(
            &self.type_meta.0,
            &self.type_meta.1,
            self.raw.clone(),
            DecodeConfig::default(),
        )
    }

    /// Heap and inline bytes this object holds (the shared type record not counted).
    pub fn size_bytes(&self) -> usize {
        let m = &self.meta;
        // A BTreeMap node holds up to 11 entries; count the entries' inline size per label plus
        // the strings.
        let labels: usize = m
            .labels
            .iter()
            .map(|(k, v)| k.capacity() + v.capacity() + 2 * std::mem::size_of::<String>())
            .sum();
        std::mem::size_of::<Self>()
            + self.raw.len()
            + m.namespace.capacity()
            + m.name.capacity()
            + m.uid.capacity()
            + m.resource_version.capacity()
            + labels
    }
}

/// The metadata (field 1) of an object's protobuf message as k8s-openapi's `ObjectMeta`,
/// without `managedFields`: their records are skipped by the wire walker, never decoded. The
/// rest of the object is not looked into.
///
/// # Errors
///
/// [`DecodeError::Layout`] when the object or its metadata records are not well-formed at the
/// top level, [`DecodeError::Wire`] (kind `ObjectMeta`) when a metadata field is invalid or holds
/// a value k8s-openapi cannot represent.
pub fn object_meta(
    object: &[u8],
) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, DecodeError> {
    let ranges = wire::metadata_ranges(object)?;
    // A message sent as several records is their concatenation (rare: Go writes one).
    let joined;
    let meta: &[u8] = match ranges.as_slice() {
        [] => &[],
        [one] => &object[one.clone()],
        many => {
            joined = many
                .iter()
                .flat_map(|r| &object[r.clone()])
                .copied()
                .collect::<Vec<u8>>();
            &joined
        }
    };
    let cx = crate::wire::Cx {
        strip_managed_fields: true,
    };
    crate::wire::decode_message(meta, &cx).map_err(|source| DecodeError::Wire {
        kind: "ObjectMeta".to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::core::v1::Pod;
    use crate::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn meta_view_tags_match_the_generated_object_meta() {
        let pod = Pod {
            metadata: Some(ObjectMeta {
                name: Some("p".into()),
                generate_name: Some("g".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                resource_version: Some("42".into()),
                generation: Some(3),
                deletion_timestamp: Some(Time {
                    seconds: Some(99),
                    nanos: None,
                }),
                labels: [("app".to_owned(), "x".to_owned())].into(),
                annotations: [("a".to_owned(), "b".to_owned())].into(),
                finalizers: vec!["f".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let raw = pod.encode_to_vec();
        let obj = CompactObject::from_raw(Arc::new(("v1".into(), "Pod".into())), &raw).unwrap();
        assert_eq!(
            obj.meta(),
            &CompactMeta {
                namespace: "ns".into(),
                name: "p".into(),
                uid: "u".into(),
                resource_version: "42".into(),
                generation: Some(3),
                deletion_timestamp: Some(99),
                labels: [("app".to_owned(), "x".to_owned())].into(),
            }
        );
        let typed: k8s_openapi::api::core::v1::Pod = obj.decode().unwrap();
        assert_eq!(typed.metadata.annotations.unwrap()["a"], "b");
        assert!(obj.size_bytes() >= raw.len());
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        let err = CompactObject::from_raw(Arc::new(("v1".into(), "Pod".into())), &[0x0a, 0x7f])
            .unwrap_err();
        assert!(matches!(err, DecodeError::Malformed { .. }), "{err}");
    }
}
