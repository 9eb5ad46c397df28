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

impl<K: DeserializeOwned> ItemDecoder<K> for Typed {
    fn decode_item<'de, D: Deserializer<'de>>(&self, deserializer: D) -> Result<K, D::Error> {
        if self.strip_managed_fields {
            K::deserialize(StripManagedFields::new(deserializer))
        } else {
            K::deserialize(deserializer)
        }
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
