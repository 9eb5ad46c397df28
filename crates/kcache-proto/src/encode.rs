//! Encoding: k8s-openapi types (or JSON objects) into the generated prost types and the
//! protobuf wire bytes a Kubernetes API server sends.
//!
//! The reverse of [`convert`](crate::convert): the conversions for ordinary messages are
//! generated field by field (`generated/encode_gen.rs`, see `regen.sh`) for the same messages
//! and with embedded Go structs rebuilt from the inlined JSON fields; the types whose JSON form
//! differs from their protobuf shape (`Time`, `MicroTime`, `Quantity`, `IntOrString`,
//! `FieldsV1`, `RawExtension`) are converted by hand here.
//!
//! [`encode_json`] is the entry point for a server that holds objects as JSON: the object is
//! deserialised into its k8s-openapi type (unknown fields are dropped, as kube-apiserver's
//! decoder drops them), converted and written by prost. A field that is absent in JSON is
//! absent on the wire, where Go writes the zero value; both decode to the same object.
//!
//! # Example
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_proto::{Envelope, decode_object, encode_json};
//!
//! let obj = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!                              "metadata": {"name": "cm"}, "data": {"k": "v"}});
//! let raw = encode_json("v1", "ConfigMap", &obj)?;
//! let env = Envelope { api_version: "v1".into(), kind: "ConfigMap".into(),
//!                      raw: raw.into(), content_type: String::new() };
//! let cm: ConfigMap = decode_object(Envelope::decode(env.encode_to_bytes())?)?;
//! assert_eq!(cm.data.unwrap()["k"], "v");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource as k8s_resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as k8s_meta;
use k8s_openapi::apimachinery::pkg::runtime as k8s_runtime;
use k8s_openapi::apimachinery::pkg::util::intstr as k8s_intstr;
use prost::Message;
use serde::Deserialize;

use crate::apimachinery::pkg::api::resource as pb_resource;
use crate::apimachinery::pkg::apis::meta::v1 as pb_meta;
use crate::apimachinery::pkg::runtime as pb_runtime;
use crate::apimachinery::pkg::util::intstr as pb_intstr;
use crate::convert::for_each_kind;

/// Errors encoding a JSON object as protobuf.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// No protobuf type is known for this `apiVersion`/`kind` (custom resources, kinds of
    /// packages not generated here).
    #[error("no protobuf encoding for {api_version}/{kind}")]
    UnsupportedKind {
        /// The object's `apiVersion`.
        api_version: String,
        /// The object's `kind`.
        kind: String,
    },
    /// The JSON does not deserialise into the kind's k8s-openapi type.
    #[error("object of kind {kind} does not match its schema")]
    InvalidObject {
        /// The object's `kind`.
        kind: String,
        /// The deserialisation error.
        #[source]
        source: serde_json::Error,
    },
}

/// Conversion of `Self` into a prost message (or scalar) `P`.
pub trait ToProto<P> {
    /// Converts, consuming `self`.
    fn to_proto(self) -> P;
}

macro_rules! identity {
    ($($t:ty),*) => {$(
        impl ToProto<$t> for $t {
            #[inline]
            fn to_proto(self) -> $t {
                self
            }
        }
    )*};
}
identity!(String, i32, i64, bool, f64);

impl ToProto<Vec<u8>> for k8s_openapi::ByteString {
    #[inline]
    fn to_proto(self) -> Vec<u8> {
        self.0
    }
}

impl ToProto<pb_meta::Time> for k8s_meta::Time {
    fn to_proto(self) -> pb_meta::Time {
        pb_meta::Time {
            seconds: Some(self.0.as_second()),
            nanos: Some(self.0.subsec_nanosecond()),
        }
    }
}

impl ToProto<pb_meta::MicroTime> for k8s_meta::MicroTime {
    fn to_proto(self) -> pb_meta::MicroTime {
        pb_meta::MicroTime {
            seconds: Some(self.0.as_second()),
            nanos: Some(self.0.subsec_nanosecond()),
        }
    }
}

impl ToProto<pb_resource::Quantity> for k8s_resource::Quantity {
    #[inline]
    fn to_proto(self) -> pb_resource::Quantity {
        pb_resource::Quantity {
            string: Some(self.0),
        }
    }
}

impl ToProto<pb_intstr::IntOrString> for k8s_intstr::IntOrString {
    fn to_proto(self) -> pb_intstr::IntOrString {
        match self {
            Self::Int(i) => pb_intstr::IntOrString {
                r#type: Some(0),
                int_val: Some(i),
                str_val: None,
            },
            Self::String(s) => pb_intstr::IntOrString {
                r#type: Some(1),
                int_val: None,
                str_val: Some(s),
            },
        }
    }
}

fn json_bytes(v: &serde_json::Value) -> Vec<u8> {
    if v.is_null() {
        return Vec::new();
    }
    serde_json::to_vec(v).unwrap_or_default()
}

impl ToProto<pb_meta::FieldsV1> for k8s_meta::FieldsV1 {
    fn to_proto(self) -> pb_meta::FieldsV1 {
        pb_meta::FieldsV1 {
            raw: Some(json_bytes(&self.0)),
        }
    }
}

impl ToProto<pb_runtime::RawExtension> for k8s_runtime::RawExtension {
    fn to_proto(self) -> pb_runtime::RawExtension {
        pb_runtime::RawExtension {
            raw: Some(json_bytes(&self.0).into()),
        }
    }
}

// Helpers the generated conversions call, one per (protobuf label, k8s-openapi optionality).

/// `T` → `optional P`.
#[inline]
pub(crate) fn req_to<T: ToProto<P>, P>(t: T) -> Option<P> {
    Some(t.to_proto())
}

/// `Option<T>` → `optional P`.
#[inline]
pub(crate) fn opt_to<T: ToProto<P>, P>(t: Option<T>) -> Option<P> {
    t.map(T::to_proto)
}

/// `Vec<T>` → `repeated P`.
#[inline]
pub(crate) fn vec_to<T: ToProto<P>, P>(v: Vec<T>) -> Vec<P> {
    v.into_iter().map(T::to_proto).collect()
}

/// `Option<Vec<T>>` → `repeated P` (`None` → empty).
#[inline]
pub(crate) fn opt_vec_to<T: ToProto<P>, P>(v: Option<Vec<T>>) -> Vec<P> {
    v.map(vec_to).unwrap_or_default()
}

/// `BTreeMap<String, T>` → `map<string, P>`.
#[inline]
pub(crate) fn map_to<T: ToProto<P>, P>(m: BTreeMap<String, T>) -> BTreeMap<String, P> {
    m.into_iter().map(|(k, v)| (k, v.to_proto())).collect()
}

/// `Option<BTreeMap<String, T>>` → `map<string, P>` (`None` → empty).
#[inline]
pub(crate) fn opt_map_to<T: ToProto<P>, P>(m: Option<BTreeMap<String, T>>) -> BTreeMap<String, P> {
    m.map(map_to).unwrap_or_default()
}

#[allow(clippy::all, clippy::pedantic, reason = "generated code")]
mod generated {
    include!("generated/encode_gen.rs");
}

fn typed<'a, T: Deserialize<'a>>(kind: &str, v: &'a serde_json::Value) -> Result<T, EncodeError> {
    T::deserialize(v).map_err(|source| EncodeError::InvalidObject {
        kind: kind.to_owned(),
        source,
    })
}

/// Encodes the JSON object `obj` of `api_version`/`kind` as the protobuf message of its kind
/// (the `raw` of its envelope; no `k8s\0` magic).
///
/// # Errors
///
/// [`EncodeError::UnsupportedKind`] for a kind without a generated protobuf type (see
/// [`kind_is_supported`](crate::kind_is_supported)), [`EncodeError::InvalidObject`] when the
/// JSON does not fit the kind's schema.
pub fn encode_json(
    api_version: &str,
    kind: &str,
    obj: &serde_json::Value,
) -> Result<Vec<u8>, EncodeError> {
    macro_rules! arm {
        ($av:literal, $kind:literal, $pb:ty, $k8s:ty) => {
            if api_version == $av && kind == $kind {
                let t: $k8s = typed(kind, obj)?;
                let pb: $pb = t.to_proto();
                return Ok(pb.encode_to_vec());
            }
        };
    }
    for_each_kind!(arm);
    Err(EncodeError::UnsupportedKind {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    })
}

/// Encodes a JSON `meta.v1.Status` as the protobuf `Status` message (the `raw` of its
/// envelope, whose type is `v1`/`Status` as kube-apiserver sends it).
///
/// # Errors
///
/// [`EncodeError::InvalidObject`] when the JSON is not a `Status`.
pub fn encode_status_json(status: &serde_json::Value) -> Result<Vec<u8>, EncodeError> {
    let t: k8s_meta::Status = typed("Status", status)?;
    let pb: pb_meta::Status = t.to_proto();
    Ok(pb.encode_to_vec())
}
