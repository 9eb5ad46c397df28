//! How one object is decoded: the [`ItemDecoder`] strategy shared by lists and watch events.

use std::marker::PhantomData;

use serde::{
    Deserializer,
    de::{DeserializeOwned, DeserializeSeed},
};

use super::strip::StripManagedFields;

/// Decodes one object of type `K` from a deserializer positioned at the object.
///
/// Lists and watch events call it for each item, so the same strategy (typed, managedFields
/// skipped, compact, …) applies to both. Implementations must not buffer the object in an
/// intermediate tree.
pub trait ItemDecoder<K>: Clone + Send + Sync + 'static {
    /// Decodes one object.
    ///
    /// # Errors
    /// The deserializer's error when the input is not a valid `K`.
    fn decode_item<'de, D: Deserializer<'de>>(&self, deserializer: D) -> Result<K, D::Error>;

    /// Decodes one whole JSON object held in its own buffer (a list item split out of its
    /// list). The default parses it with [`ItemDecoder::decode_item`]; a decoder that keeps
    /// the object's bytes overrides it to keep `item` itself instead of a copy.
    ///
    /// # Errors
    /// The JSON error when `item` is not one valid `K` (trailing bytes included).
    fn decode_json_item(&self, item: bytes::Bytes) -> Result<K, serde_json::Error> {
        decode_object(&item, self)
    }

    /// Decodes the JSON object `data` starts with (a list item, the rest of the list's bytes
    /// after it) when `data` holds it whole and it is a valid `K`: returns the object and its
    /// length in bytes. `None` leaves the item to [`ItemDecoder::decode_json_item`] once the
    /// list splitter has found its end (which then reports the error, if any).
    ///
    /// The default finds the end with serde_json's skipping parser and calls
    /// `decode_json_item` on a copy; a decoder that can decode while finding the end overrides
    /// it to read the item once.
    fn decode_json_prefix(&self, data: &[u8]) -> Option<(K, usize)> {
        let len = super::split::whole_item(data)?;
        let item = self
            .decode_json_item(bytes::Bytes::copy_from_slice(&data[..len]))
            .ok()?;
        Some((item, len))
    }

    /// Decodes the JSON object a watch event's `object` member starts with (`data` runs to the
    /// end of the frame), returning it and its length in bytes, when reading it apart from the
    /// event is cheaper than through the event's parser: kube-apiserver writes
    /// `{"type":"MODIFIED","object":{…}}`, so the event is decoded from the object's end.
    /// `None` (the default, and on any failure) decodes the event through
    /// [`ItemDecoder::decode_item`] instead, which reports the error, if any.
    fn decode_json_event_object(&self, data: &[u8]) -> Option<(K, usize)> {
        let _ = data;
        None
    }

    /// Decodes one enveloped protobuf object (feature `protobuf`). `None` (the default) means
    /// this decoder takes JSON only: the lister-watcher then never asks for protobuf.
    #[cfg(feature = "protobuf")]
    fn decode_protobuf(
        &self,
        envelope: kcache_proto::Envelope,
    ) -> Option<Result<K, kcache_proto::DecodeError>> {
        let _ = envelope;
        None
    }

    /// Whether [`ItemDecoder::decode_protobuf`] decodes `K` (feature `protobuf`): true for
    /// [`Typed`] when `K` is the k8s-openapi type of a built-in kind, and for
    /// [`CompactDecoder`](crate::compact::CompactDecoder) when `Compact<K>`'s `K` is one.
    #[cfg(feature = "protobuf")]
    fn accepts_protobuf(&self) -> bool {
        false
    }
}

/// Decodes any `K: DeserializeOwned` (k8s-openapi types, `DynamicObject`,
/// `PartialObjectMeta<K>`) straight from the bytes, optionally skipping
/// `metadata.managedFields` inside the parser.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Typed {
    strip_managed_fields: bool,
}

impl Typed {
    /// Decodes every field, `managedFields` included.
    pub const fn new() -> Self {
        Self {
            strip_managed_fields: false,
        }
    }

    /// Skips `metadata.managedFields` while parsing (the field is scanned, never decoded).
    /// Use it when the informer's transform would drop the field anyway.
    #[must_use]
    pub const fn strip_managed_fields(mut self, strip: bool) -> Self {
        self.strip_managed_fields = strip;
        self
    }

    /// Whether `managedFields` is skipped.
    pub const fn strips_managed_fields(&self) -> bool {
        self.strip_managed_fields
    }
}

impl<K: DeserializeOwned + 'static> ItemDecoder<K> for Typed {
    fn decode_item<'de, D: Deserializer<'de>>(&self, deserializer: D) -> Result<K, D::Error> {
        if self.strip_managed_fields {
            K::deserialize(StripManagedFields::new(deserializer))
        } else {
            K::deserialize(deserializer)
        }
    }

    #[cfg(feature = "protobuf")]
    fn decode_protobuf(
        &self,
        envelope: kcache_proto::Envelope,
    ) -> Option<Result<K, kcache_proto::DecodeError>> {
        let opts =
            kcache_proto::DecodeConfig::default().strip_managed_fields(self.strip_managed_fields);
        Some(kcache_proto::decode_object_with(envelope, opts))
    }

    #[cfg(feature = "protobuf")]
    fn accepts_protobuf(&self) -> bool {
        kcache_proto::native_kind::<K>().is_some()
    }
}

/// Decodes one whole object (a GET, POST or PUT response body) with `decoder`.
///
/// # Errors
/// The JSON error when `body` is not one valid `K` (trailing bytes included).
pub fn decode_object<K, D: ItemDecoder<K>>(
    body: &[u8],
    decoder: &D,
) -> Result<K, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let obj = decoder.decode_item(&mut de)?;
    de.end()?;
    Ok(obj)
}

/// Adapts an [`ItemDecoder`] to serde's [`DeserializeSeed`].
pub(crate) struct ItemSeed<'a, K, D> {
    decoder: &'a D,
    _k: PhantomData<fn() -> K>,
}

impl<'a, K, D> ItemSeed<'a, K, D> {
    pub(crate) fn new(decoder: &'a D) -> Self {
        Self {
            decoder,
            _k: PhantomData,
        }
    }
}

impl<'de, K, D: ItemDecoder<K>> DeserializeSeed<'de> for ItemSeed<'_, K, D> {
    type Value = K;

    fn deserialize<De: Deserializer<'de>>(self, deserializer: De) -> Result<K, De::Error> {
        self.decoder.decode_item(deserializer)
    }
}
