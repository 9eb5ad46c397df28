//! [`CompactDecoder`]: list and watch items decoded into [`Compact<K>`], their bytes kept
//! verbatim or re-assembled without `metadata.managedFields` (JSON by a visitor over the
//! top-level map, protobuf by kcache-proto's wire walker), their metadata parsed once.

use std::{fmt, marker::PhantomData};

use bytes::Bytes;

use kube_core::ObjectMeta;
use serde::{
    Deserialize, Deserializer,
    de::{self, IgnoredAny, MapAccess, Visitor},
};
use serde_json::value::RawValue;

use super::{Compact, Repr};
use crate::decode::{ItemDecoder, Key, StripManagedFields};

/// Decodes items into [`Compact<K>`]: the object's bytes are kept verbatim (or re-assembled
/// without `metadata.managedFields`), the metadata is parsed once.
///
/// JSON items keep their JSON; protobuf items (feature `protobuf`; asked for when `K` is the
/// k8s-openapi type of a built-in kind) keep their protobuf message, rewritten without
/// `managedFields` by a wire walker when stripping (never decoded and re-encoded).
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

impl<K: 'static> ItemDecoder<Compact<K>> for CompactDecoder {
    fn decode_item<'de, D: Deserializer<'de>>(&self, d: D) -> Result<Compact<K>, D::Error> {
        if self.strip_managed_fields {
            d.deserialize_map(StrippingVisitor(PhantomData))
        } else {
            let raw = <&'de RawValue>::deserialize(d)?;
            let metadata = parse_metadata(raw.get()).map_err(de::Error::custom)?;
            Ok(Compact {
                metadata,
                repr: Repr::Json(Bytes::copy_from_slice(raw.get().as_bytes())),
                _k: PhantomData,
            })
        }
    }

    /// One pass over the item: its members are checked by the parser (skipped, not decoded)
    /// and its `metadata` decoded on the way; the item's own buffer is kept, not copied.
    fn decode_json_item(&self, item: Bytes) -> Result<Compact<K>, serde_json::Error> {
        if self.strip_managed_fields {
            return crate::decode::decode_object(&item, self);
        }
        // A JSON text is UTF-8 (as `RawValue`, which the other paths keep, checks).
        std::str::from_utf8(&item).map_err(de::Error::custom)?;
        let CheckedItem(metadata) = serde_json::from_slice(&item)?;
        Ok(Compact {
            metadata: metadata.unwrap_or_default(),
            repr: Repr::Json(item),
            _k: PhantomData,
        })
    }

    /// One pass over the item that finds its end too; the item is copied into its own buffer.
    fn decode_json_prefix(&self, data: &[u8]) -> Option<(Compact<K>, usize)> {
        if self.strip_managed_fields {
            let len = crate::decode::whole_item(data)?;
            let item = crate::decode::decode_object(&data[..len], self).ok()?;
            return Some((item, len));
        }
        let mut values = serde_json::Deserializer::from_slice(data).into_iter::<CheckedItem>();
        let CheckedItem(metadata) = values.next()?.ok()?;
        let len = values.byte_offset();
        std::str::from_utf8(&data[..len]).ok()?;
        let item = Compact {
            metadata: metadata.unwrap_or_default(),
            repr: Repr::Json(Bytes::copy_from_slice(&data[..len])),
            _k: PhantomData,
        };
        Some((item, len))
    }

    /// A watch event's object is read as a list item is: checked whole, its metadata decoded
    /// and its end found in one pass (the event's parser would skip it whole, then the
    /// metadata would be parsed again). Stripping decoders decode through the event.
    fn decode_json_event_object(&self, data: &[u8]) -> Option<(Compact<K>, usize)> {
        if self.strip_managed_fields {
            return None;
        }
        self.decode_json_prefix(data)
    }

    /// Keeps the object's protobuf message when the envelope holds `K`'s kind.
    #[cfg(feature = "protobuf")]
    fn decode_protobuf(
        &self,
        envelope: kcache_proto::Envelope,
    ) -> Option<Result<Compact<K>, kcache_proto::DecodeError>> {
        Some(self.decode_envelope(envelope))
    }

    /// True when `K` is the k8s-openapi type of a built-in kind.
    #[cfg(feature = "protobuf")]
    fn accepts_protobuf(&self) -> bool {
        kcache_proto::native_kind::<K>().is_some()
    }
}

#[cfg(feature = "protobuf")]
impl CompactDecoder {
    fn decode_envelope<K: 'static>(
        self,
        env: kcache_proto::Envelope,
    ) -> Result<Compact<K>, kcache_proto::DecodeError> {
        use kcache_proto::DecodeError;
        if !env.content_type.is_empty() && env.content_type != kcache_proto::CONTENT_TYPE {
            return Err(DecodeError::UnsupportedContentType(env.content_type));
        }
        if env.kind == "Status" && env.api_version == "v1" {
            return Err(match kcache_proto::decode_status(env) {
                Ok(status) => DecodeError::Status(Box::new(status)),
                Err(e) => e,
            });
        }
        if kcache_proto::native_kind::<K>() != Some((env.api_version.as_str(), env.kind.as_str())) {
            return Err(DecodeError::UnknownKind {
                api_version: env.api_version,
                kind: env.kind,
            });
        }
        Compact::from_protobuf(&env.raw, self.strip_managed_fields)
    }
}

/// The object's `metadata` (without `managedFields`), read from the top-level map up to and
/// including the `metadata` member: the members after it (`spec`, `status`, the bulk of an
/// object, which both kube-apiserver's typed and unstructured encodings put after `metadata`)
/// are not parsed. The caller has the whole object validated already (it came as a
/// [`RawValue`]). An object without `metadata` has default metadata.
fn parse_metadata(object: &str) -> Result<ObjectMeta, serde_json::Error> {
    let mut slot = None;
    let mut de = serde_json::Deserializer::from_str(object);
    let read = StripManagedFields::new(&mut de).deserialize_map(ReadMetadata {
        slot: &mut slot,
        rest: false,
    });
    match (slot, read) {
        // serde_json reports the members left after `metadata` as an error: they were not
        // meant to be read.
        (Some(metadata), _) => Ok(metadata),
        (None, Ok(())) => Ok(ObjectMeta::default()),
        (None, Err(e)) => Err(e),
    }
}

/// An object checked whole, its metadata decoded (without `managedFields`).
struct CheckedItem(Option<ObjectMeta>);

impl<'de> Deserialize<'de> for CheckedItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut slot = None;
        StripManagedFields::new(d).deserialize_map(ReadMetadata {
            slot: &mut slot,
            rest: true,
        })?;
        Ok(Self(slot))
    }
}

/// Reads top-level members into the slot's `metadata`: up to it and no further
/// (`rest: false`), or all of them, the others checked and skipped (`rest: true`).
struct ReadMetadata<'a> {
    slot: &'a mut Option<ObjectMeta>,
    rest: bool,
}

impl<'de> Visitor<'de> for ReadMetadata<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if key.as_str() != "metadata" {
                map.next_value::<IgnoredAny>()?;
            } else if self.slot.is_some() {
                return Err(de::Error::duplicate_field("metadata"));
            } else {
                *self.slot = Some(map.next_value::<ObjectMeta>()?);
                if !self.rest {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
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
            repr: Repr::Json(Bytes::from(out.into_boxed_slice())),
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
    use super::parse_metadata;

    #[test]
    fn metadata_is_read_without_parsing_the_members_after_it() {
        // What follows `metadata` is not parsed (the caller validated the object): even a
        // truncated tail is not looked at. The old full parse failed here.
        let meta =
            parse_metadata(r#"{"kind":"W","metadata":{"name":"a","managedFields":[{}]},"spec":"#)
                .unwrap();
        assert_eq!(meta.name.as_deref(), Some("a"));
        assert!(meta.managed_fields.is_none(), "managedFields are skipped");
        // Members before it are skipped, whatever their shape.
        let meta = parse_metadata(
            r#"{"spec":{"a":[1,{"metadata":{"name":"inner"}}]},"metadata":{"name":"outer","labels":{"k":"v"}},"status":{}}"#,
        )
        .unwrap();
        assert_eq!(meta.name.as_deref(), Some("outer"));
        assert_eq!(meta.labels.unwrap()["k"], "v");
    }

    #[test]
    fn no_metadata_is_default_and_bad_metadata_is_an_error() {
        assert_eq!(
            parse_metadata(r#"{"kind":"W"}"#).unwrap(),
            Default::default()
        );
        assert!(parse_metadata(r#"{"metadata":{"name":1},"spec":{}}"#).is_err());
        assert!(parse_metadata(r#"{"metadata":null}"#).is_err());
        assert!(parse_metadata(r#"[1]"#).is_err());
    }
}
