//! Compact storage: objects kept as their wire bytes (JSON or protobuf) plus the parsed
//! metadata.
//!
//! A decoded k8s-openapi Pod holds about 7.6× its JSON size in memory (3.8× without
//! `managedFields`), mostly in small allocations. [`Compact<K>`] holds the object's bytes as
//! they came over the wire (optionally without `managedFields`) in one allocation, plus its
//! [`ObjectMeta`] parsed (so that key functions, indexers, label selectors and listers work on
//! it through [`Resource`]); the typed `K` is decoded on demand with [`Compact::typed`].
//!
//! With the `protobuf` feature (on by default), [`CompactDecoder`] takes protobuf for the
//! k8s-openapi types of built-in kinds, so a compact lister-watcher of Pods asks the API
//! server for protobuf and keeps each object's protobuf message (about 0.7× its JSON size);
//! a server that answers JSON instead gives JSON-backed objects. Either way the
//! API is the same; [`Compact::format`] tells which bytes are held.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_client::compact::{Compact, CompactDecoder, Format};
//! use kcache_client::decode::decode_object;
//!
//! let json = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns",
//!   "managedFields":[{"manager":"kubectl"}]},"data":{"k":"v"}}"#;
//! let decoder = CompactDecoder::new().strip_managed_fields(true);
//! let obj: Compact<ConfigMap> = decode_object(json, &decoder).unwrap();
//! assert_eq!(obj.metadata().name.as_deref(), Some("a"));
//! assert_eq!(obj.format(), Format::Json);
//! assert!(!obj.json().unwrap().windows(13).any(|w| w == b"managedFields"));
//! let cm: ConfigMap = obj.typed().unwrap();
//! assert_eq!(cm.data.unwrap()["k"], "v");
//! ```
//!
//! [`Compact<K>`] and its typed view are here; [`CompactDecoder`], which builds them from list
//! and watch items (JSON re-assembled without `managedFields`, or protobuf messages), is in
//! `decoder`.

mod decoder;
#[cfg(test)]
mod tests;

use std::{borrow::Cow, fmt, marker::PhantomData};

#[cfg(feature = "protobuf")]
use bytes::Bytes;
use kube_core::{ObjectMeta, Resource};
use serde::de::DeserializeOwned;

pub use decoder::CompactDecoder;

/// Errors decoding a [`Compact`] object or its typed view.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// The JSON bytes are not a valid object of the type.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The protobuf bytes are not a valid object of the type.
    #[cfg(feature = "protobuf")]
    #[error(transparent)]
    Protobuf(#[from] kcache_proto::DecodeError),
    /// The object is held as protobuf but the type has no protobuf decoding (it is not the
    /// k8s-openapi type of a built-in kind).
    #[error("{0} has no protobuf decoding")]
    NotBuiltIn(&'static str),
}

/// The wire format of the bytes a [`Compact`] object holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// The object's JSON.
    Json,
    /// The object's protobuf message (without the `k8s\0` envelope).
    Protobuf,
}

/// The held bytes.
#[derive(Clone, PartialEq, Eq)]
enum Repr {
    Json(Bytes),
    #[cfg(feature = "protobuf")]
    Protobuf(Bytes),
}

/// An object stored as its wire bytes (JSON or protobuf) plus its parsed metadata.
///
/// `metadata` never holds `managedFields` (they stay in the bytes, unless the decoder stripped
/// them). [`Compact::typed`] decodes the bytes and puts `metadata` in place (keeping the
/// bytes' `managedFields`), so edits made through [`Resource::meta_mut`] (a transform dropping
/// annotations, say) show in the typed view.
///
/// Two compact objects are equal when their metadata and held bytes are (so the same object
/// held as JSON and as protobuf is not equal to itself; compare [`Compact::typed`] views).
pub struct Compact<K> {
    metadata: ObjectMeta,
    repr: Repr,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for Compact<K> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            repr: self.repr.clone(),
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
            .field("format", &self.format())
            .field("bytes", &self.bytes().len())
            .finish()
    }
}

impl<K> PartialEq for Compact<K> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata && self.repr == other.repr
    }
}

impl<K: 'static> Compact<K> {
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

    /// Builds a compact object from one object's protobuf message (the envelope's `raw`, or
    /// a list item; feature `protobuf`). The bytes are copied (or rewritten without
    /// `metadata.managedFields`) into their own buffer, so that a kept object does not pin a
    /// list body. Only the metadata is decoded; the rest is checked by [`Compact::typed`].
    ///
    /// # Errors
    /// [`kcache_proto::DecodeError`] when the message or its metadata is malformed.
    #[cfg(feature = "protobuf")]
    pub fn from_protobuf(
        raw: &[u8],
        strip_managed_fields: bool,
    ) -> Result<Self, kcache_proto::DecodeError> {
        let bytes = if strip_managed_fields {
            kcache_proto::compact::strip_managed_fields(raw)?
        } else {
            Cow::Borrowed(raw)
        };
        let metadata = kcache_proto::compact::object_meta(&bytes)?;
        let bytes = match bytes {
            Cow::Borrowed(b) => Bytes::copy_from_slice(b),
            Cow::Owned(v) => Bytes::from(v),
        };
        Ok(Self {
            metadata,
            repr: Repr::Protobuf(bytes),
            _k: PhantomData,
        })
    }
}

impl<K: 'static> Compact<K> {
    /// This object with `metadata.managedFields` dropped from its bytes too (the metadata,
    /// edits included, is kept as it is). JSON without the word `managedFields` is returned as
    /// it is, without a second parse.
    ///
    /// # Errors
    /// [`CompactError::Json`] / [`CompactError::Protobuf`] when the bytes do not parse.
    pub fn without_managed_fields(self) -> Result<Self, CompactError> {
        let stripped = match &self.repr {
            Repr::Json(json) => {
                if memchr::memmem::find(json, b"managedFields").is_none() {
                    return Ok(self);
                }
                Self::from_json(json, true)?
            }
            #[cfg(feature = "protobuf")]
            Repr::Protobuf(raw) => Self::from_protobuf(raw, true)?,
        };
        Ok(Self {
            metadata: self.metadata,
            repr: stripped.repr,
            _k: PhantomData,
        })
    }
}

impl<K> Compact<K> {
    /// The parsed metadata (without `managedFields`).
    pub fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    /// The format of the held bytes.
    pub fn format(&self) -> Format {
        match &self.repr {
            Repr::Json(_) => Format::Json,
            #[cfg(feature = "protobuf")]
            Repr::Protobuf(_) => Format::Protobuf,
        }
    }

    /// The held bytes, in [`Compact::format`].
    pub fn bytes(&self) -> &[u8] {
        match &self.repr {
            Repr::Json(b) => b,
            #[cfg(feature = "protobuf")]
            Repr::Protobuf(b) => b,
        }
    }

    /// The held JSON, if the object is held as JSON.
    pub fn json(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Json(b) => Some(b),
            #[cfg(feature = "protobuf")]
            Repr::Protobuf(_) => None,
        }
    }

    /// The held protobuf message (without the `k8s\0` envelope), if the object is held as
    /// protobuf.
    pub fn protobuf(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Json(_) => None,
            #[cfg(feature = "protobuf")]
            Repr::Protobuf(b) => Some(b),
        }
    }

    /// Bytes held by this object: the struct, the wire bytes (exact), their buffer's shared
    /// header, and the parsed metadata's heap estimated by [`kcache::memory::heap_size`].
    ///
    /// It is the memory sizer for a cache of compact objects:
    /// `memory_sizer(Compact::<Pod>::heap_size)` on the informer's builder (the factory's or
    /// `SharedIndexInformer::builder`'s; see [`kcache::memory`]).
    pub fn heap_size(&self) -> usize {
        // A shared `Bytes`' header once the object has been cloned.
        let header = 32;
        std::mem::size_of::<Self>()
            + self.bytes().len()
            + header
            + kcache::memory::heap_size(&self.metadata)
    }
}

impl<K: DeserializeOwned + Resource + 'static> Compact<K> {
    /// Decodes the typed object, with [`Compact::metadata`] in place of the bytes' metadata
    /// (the bytes' `managedFields` are kept). Protobuf bytes go through
    /// [`kcache_proto::decode_object_with`].
    ///
    /// # Errors
    /// [`CompactError::Json`] / [`CompactError::Protobuf`] when the bytes are not a valid `K`,
    /// [`CompactError::NotBuiltIn`] for protobuf bytes when `K` has no protobuf decoding.
    pub fn typed(&self) -> Result<K, CompactError> {
        let mut obj: K = match &self.repr {
            Repr::Json(json) => serde_json::from_slice(json)?,
            #[cfg(feature = "protobuf")]
            Repr::Protobuf(raw) => {
                let (api_version, kind) = kcache_proto::native_kind::<K>()
                    .ok_or(CompactError::NotBuiltIn(std::any::type_name::<K>()))?;
                let env = kcache_proto::Envelope {
                    api_version: api_version.to_owned(),
                    kind: kind.to_owned(),
                    raw: raw.clone(),
                    content_type: String::new(),
                };
                kcache_proto::decode_object_with(env, kcache_proto::DecodeConfig::default())?
            }
        };
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
