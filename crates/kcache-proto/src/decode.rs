//! From an envelope to the caller's type.

use std::any::{Any, TypeId};

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as k8s_meta;
use serde::de::DeserializeOwned;

use crate::convert::{ConvertError, for_each_kind};
use crate::envelope::{Envelope, EnvelopeError};
use crate::list::{ListError, RawList, item_kind};
use crate::wire::{Cx, WireError, WireMessage};

/// Errors decoding a protobuf body into a typed object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The envelope is invalid.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// The list is invalid.
    #[error(transparent)]
    List(#[from] ListError),
    /// The envelope's `contentType` is not protobuf.
    #[error("unsupported envelope contentType {0:?}")]
    UnsupportedContentType(String),
    /// No protobuf type is known for this kind (custom resources, or a group this crate does
    /// not generate).
    #[error("no protobuf type for apiVersion {api_version:?} kind {kind:?}")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The envelope holds another kind than the k8s-openapi type asked for (as k8s-openapi's
    /// JSON deserializer refuses a wrong `apiVersion`/`kind`).
    #[error("expected {expected}, the server sent apiVersion {api_version:?} kind {kind:?}")]
    WrongKind {
        /// `apiVersion/kind` of the requested type.
        expected: String,
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The object's bytes are not a valid message of its kind.
    #[error("malformed protobuf {kind}")]
    Malformed {
        /// The kind being decoded.
        kind: String,
        /// prost's error.
        #[source]
        source: prost::DecodeError,
    },
    /// The object's bytes are not a valid message of its kind (or hold a value k8s-openapi
    /// cannot represent); the source names the field.
    #[error("malformed protobuf {kind}")]
    Wire {
        /// The kind being decoded.
        kind: String,
        /// What is wrong, and where.
        #[source]
        source: WireError,
    },
    /// The object's wire structure is invalid (found while walking it without decoding).
    #[error(transparent)]
    Layout(#[from] crate::wire::LayoutError),
    /// The message holds a value k8s-openapi cannot represent.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// The requested type is not the k8s-openapi type of this kind, and the detour through
    /// JSON failed.
    #[error("converting {kind} to the requested type through JSON failed")]
    Json {
        /// The kind being decoded.
        kind: String,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// The server answered with a `Status` (an error) instead of the object.
    #[error("the server answered with a Status: {}", .0.message.as_deref().unwrap_or("(no message)"))]
    Status(Box<k8s_meta::Status>),
}

/// Options for [`decode_object_with`] and [`decode_list_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeConfig {
    /// Drop `metadata.managedFields` before converting (skips its JSON parsing entirely).
    pub strip_managed_fields: bool,
}

impl DecodeConfig {
    /// Sets [`DecodeConfig::strip_managed_fields`].
    #[must_use]
    pub const fn strip_managed_fields(mut self, strip: bool) -> Self {
        self.strip_managed_fields = strip;
        self
    }
}

/// Puts `v` into an `Option<K>` if `T` is `K` (no allocation, no `unsafe`).
fn cast<T: 'static, K: 'static>(v: T) -> Result<K, T> {
    let mut slot: Option<K> = None;
    match (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>() {
        Some(s) => {
            *s = Some(v);
            Ok(slot.expect("just filled"))
        }
        None => Err(v),
    }
}

/// `obj` as `K`: itself if `K` is its type, else through its JSON form (e.g. to
/// `kube::core::DynamicObject` or a user's own struct).
fn into_k<T: serde::Serialize + 'static, K: DeserializeOwned + 'static>(
    obj: T,
    kind: &str,
) -> Result<K, DecodeError> {
    cast::<T, K>(obj).or_else(|obj| {
        serde_json::to_value(&obj)
            .and_then(serde_json::from_value)
            .map_err(|source| DecodeError::Json {
                kind: kind.to_owned(),
                source,
            })
    })
}

/// Decodes the protobuf message `raw` of `api_version`/`kind` into `K`.
pub(crate) fn decode_item<K: DeserializeOwned + 'static>(
    api_version: &str,
    kind: &str,
    raw: Bytes,
    opts: DecodeConfig,
) -> Result<K, DecodeError> {
    if let Some((av, k)) = native_kind::<K>()
        && (av != api_version || k != kind)
    {
        return Err(DecodeError::WrongKind {
            expected: format!("{av}/{k}"),
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        });
    }
    let cx = Cx {
        strip_managed_fields: opts.strip_managed_fields,
    };
    macro_rules! arm {
        ($av:literal, $kind:literal, $pb:ty, $k8s:ty) => {
            if api_version == $av && kind == $kind {
                let obj = <$k8s as WireMessage>::decode_msg(&raw, &cx).map_err(|source| {
                    DecodeError::Wire {
                        kind: kind.to_owned(),
                        source,
                    }
                })?;
                return into_k(obj, kind);
            }
        };
    }
    for_each_kind!(arm);
    Err(DecodeError::UnknownKind {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    })
}

/// `(apiVersion, kind)` of `K` if `K` is the k8s-openapi type of a kind with a generated
/// conversion: then [`decode_object`] takes the fast path, and a client should ask for
/// protobuf. `None` for other types (`DynamicObject`, custom resources, user structs), which
/// are best served as JSON.
pub fn native_kind<K: 'static>() -> Option<(&'static str, &'static str)> {
    let k = TypeId::of::<K>();
    macro_rules! arm {
        ($av:literal, $kind:literal, $pb:ty, $k8s:ty) => {
            if k == TypeId::of::<$k8s>() {
                return Some(($av, $kind));
            }
        };
    }
    for_each_kind!(arm);
    None
}

/// Whether [`decode_object`] knows the protobuf type of `api_version`/`kind` (a client asks
/// for protobuf only for these; custom resources are JSON-only).
pub fn kind_is_supported(api_version: &str, kind: &str) -> bool {
    macro_rules! arm {
        ($av:literal, $kind:literal, $pb:ty, $k8s:ty) => {
            if api_version == $av && kind == $kind {
                return true;
            }
        };
    }
    for_each_kind!(arm);
    false
}

fn check(env: &Envelope) -> Result<(), DecodeError> {
    if !env.content_type.is_empty() && env.content_type != crate::CONTENT_TYPE {
        return Err(DecodeError::UnsupportedContentType(
            env.content_type.clone(),
        ));
    }
    if env.kind == "Status" && env.api_version == "v1" {
        return Err(DecodeError::Status(Box::new(decode_status_raw(
            env.raw.clone(),
        )?)));
    }
    Ok(())
}

/// Decodes an enveloped object into `K`: the generated conversion when `K` is the k8s-openapi
/// type of the envelope's kind (the fast path), else that conversion and then serde through
/// JSON into `K`.
///
/// # Errors
///
/// [`DecodeError::Status`] if the envelope holds a `Status`, [`DecodeError::UnknownKind`] for
/// kinds without a protobuf type, [`DecodeError::Malformed`] / [`DecodeError::Convert`] for bad
/// bytes, [`DecodeError::Json`] when `K` cannot be deserialized from the object's JSON form.
pub fn decode_object<K: DeserializeOwned + 'static>(env: Envelope) -> Result<K, DecodeError> {
    decode_object_with(env, DecodeConfig::default())
}

/// [`decode_object`] with options.
///
/// # Errors
///
/// As [`decode_object`].
pub fn decode_object_with<K: DeserializeOwned + 'static>(
    env: Envelope,
    opts: DecodeConfig,
) -> Result<K, DecodeError> {
    check(&env)?;
    decode_item(&env.api_version, &env.kind, env.raw, opts)
}

/// Decodes an enveloped list (`XList`) into its metadata and items of type `K`.
///
/// # Errors
///
/// As [`decode_object`], plus [`DecodeError::List`].
pub fn decode_list<K: DeserializeOwned + 'static>(
    env: Envelope,
) -> Result<(k8s_meta::ListMeta, Vec<K>), DecodeError> {
    decode_list_with(env, DecodeConfig::default())
}

/// [`decode_list`] with options.
///
/// # Errors
///
/// As [`decode_list`].
pub fn decode_list_with<K: DeserializeOwned + 'static>(
    env: Envelope,
    opts: DecodeConfig,
) -> Result<(k8s_meta::ListMeta, Vec<K>), DecodeError> {
    check(&env)?;
    let kind = item_kind(&env.kind)?;
    let list = RawList::decode_raw(env.raw)?;
    let metadata = crate::convert::opt(list.metadata)?.unwrap_or_default();
    let items = list
        .items
        .into_iter()
        .map(|raw| decode_item(&env.api_version, kind, raw, opts))
        .collect::<Result<_, _>>()?;
    Ok((metadata, items))
}

fn decode_status_raw(raw: Bytes) -> Result<k8s_meta::Status, DecodeError> {
    <k8s_meta::Status as WireMessage>::decode_msg(&raw, &Cx::default()).map_err(|source| {
        DecodeError::Wire {
            kind: "Status".into(),
            source,
        }
    })
}

/// Decodes an enveloped `Status` (an error body, or the object of an `ERROR` watch event).
///
/// # Errors
///
/// [`DecodeError::UnknownKind`] if the envelope is not a `v1` `Status`, or bad bytes.
pub fn decode_status(env: Envelope) -> Result<k8s_meta::Status, DecodeError> {
    if env.kind != "Status" {
        return Err(DecodeError::UnknownKind {
            api_version: env.api_version,
            kind: env.kind,
        });
    }
    decode_status_raw(env.raw)
}
