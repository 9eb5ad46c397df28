//! `serde::Serialize` for the generated prost types (feature `serde`): the generic conversion
//! path, prost message → `serde_json::Value` → any `Deserialize` type. It exists to be
//! measured against the generated field-by-field conversion (`benches/decode.rs`): the
//! generated path is the one [`crate::decode_object`] uses.
//!
//! The derives (wire field names, empty fields skipped, embedded structs flattened) are
//! generated; the types whose JSON differs from their protobuf shape serialize through their
//! k8s-openapi counterpart here.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Serialize, Serializer};

use crate::apimachinery::pkg::api::resource as pb_resource;
use crate::apimachinery::pkg::apis::meta::v1 as pb_meta;
use crate::apimachinery::pkg::runtime as pb_runtime;
use crate::apimachinery::pkg::util::intstr as pb_intstr;
use crate::convert::{FromProto, IsZero, TimeParts};

/// Skips `None` and Go's zero value (a non-pointer field tagged `omitempty`).
pub(crate) fn is_none_or_zero<T: IsZero>(v: &Option<T>) -> bool {
    v.as_ref().is_none_or(IsZero::is_zero)
}

/// Skips `None` and Go's zero time (which Go's JSON writes as `null`).
pub(crate) fn is_none_or_zero_time<T: TimeParts>(v: &Option<T>) -> bool {
    v.as_ref().is_none_or(TimeParts::is_zero_time)
}

/// `optional bytes` as base64, as Kubernetes' JSON has it.
pub(crate) fn opt_bytes<S: Serializer, B: AsRef<[u8]>>(
    v: &Option<B>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(b) => s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b.as_ref())),
        None => s.serialize_none(),
    }
}

/// `map<string, bytes>` with base64 values.
pub(crate) fn map_bytes<S: Serializer>(
    v: &BTreeMap<String, Vec<u8>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(
        v.iter()
            .map(|(k, b)| (k, base64::engine::general_purpose::STANDARD.encode(b))),
    )
}

macro_rules! via_k8s_openapi {
    ($($pb:ty => $k8s:ty),* $(,)?) => {$(
        impl Serialize for $pb {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                <$k8s as FromProto<$pb>>::from_proto(self.clone())
                    .map_err(serde::ser::Error::custom)?
                    .serialize(s)
            }
        }
    )*};
}

via_k8s_openapi! {
    pb_meta::Time => k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    pb_meta::MicroTime => k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime,
    pb_meta::FieldsV1 => k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1,
    pb_resource::Quantity => k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    pb_intstr::IntOrString => k8s_openapi::apimachinery::pkg::util::intstr::IntOrString,
    pb_runtime::RawExtension => k8s_openapi::apimachinery::pkg::runtime::RawExtension,
}
