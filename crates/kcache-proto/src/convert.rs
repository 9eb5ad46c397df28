//! Conversion from the generated prost types to k8s-openapi's types.
//!
//! The conversions for ordinary messages are generated field by field (`generated/convert_gen.rs`,
//! see `regen.sh`): each prost message is matched to the k8s-openapi struct generated from the
//! same Kubernetes definition, fields are moved (strings, maps and vectors of strings are not
//! copied), embedded Go structs (`localObjectReference`, `volumeSource`, ...) are inlined as
//! JSON inlines them, and an empty repeated field becomes `None` for an optional k8s-openapi
//! field (protobuf cannot tell empty from absent; the server's JSON omits both).
//!
//! The types whose JSON form differs from their protobuf shape are converted by hand here:
//! `Time`/`MicroTime` (seconds + nanos), `Quantity` (a string), `IntOrString`, `FieldsV1` and
//! `RawExtension` (JSON bytes).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource as k8s_resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as k8s_meta;
use k8s_openapi::apimachinery::pkg::runtime as k8s_runtime;
use k8s_openapi::apimachinery::pkg::util::intstr as k8s_intstr;

use crate::apimachinery::pkg::api::resource as pb_resource;
use crate::apimachinery::pkg::apis::meta::v1 as pb_meta;
use crate::apimachinery::pkg::runtime as pb_runtime;
use crate::apimachinery::pkg::util::intstr as pb_intstr;

/// Errors converting a decoded protobuf message to its k8s-openapi type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// A `Time`/`MicroTime` outside the range k8s-openapi's timestamp type can hold.
    #[error("timestamp out of range: {seconds}s + {nanos}ns")]
    TimeOutOfRange {
        /// Seconds since the Unix epoch.
        seconds: i64,
        /// Nanoseconds.
        nanos: i32,
    },
    /// A `FieldsV1` or `RawExtension` whose bytes are not JSON.
    #[error("{what} does not hold valid JSON")]
    InvalidJson {
        /// `FieldsV1` or `RawExtension`.
        what: &'static str,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// An `IntOrString` with a type other than 0 (int) or 1 (string).
    #[error("IntOrString with unknown type {0}")]
    InvalidIntOrString(i64),
}

/// Conversion of a prost message (or scalar) `P` into `Self`.
pub trait FromProto<P>: Sized {
    /// Converts, consuming the prost value.
    ///
    /// # Errors
    ///
    /// [`ConvertError`] for values k8s-openapi cannot represent.
    fn from_proto(p: P) -> Result<Self, ConvertError>;
}

macro_rules! identity {
    ($($t:ty),*) => {$(
        impl FromProto<$t> for $t {
            #[inline]
            fn from_proto(p: $t) -> Result<Self, ConvertError> {
                Ok(p)
            }
        }
    )*};
}
identity!(String, i32, i64, bool, f64);

impl FromProto<Vec<u8>> for k8s_openapi::ByteString {
    #[inline]
    fn from_proto(p: Vec<u8>) -> Result<Self, ConvertError> {
        Ok(Self(p))
    }
}

fn timestamp(
    seconds: Option<i64>,
    nanos: Option<i32>,
) -> Result<k8s_openapi::jiff::Timestamp, ConvertError> {
    let (seconds, nanos) = (seconds.unwrap_or_default(), nanos.unwrap_or_default());
    k8s_openapi::jiff::Timestamp::new(seconds, nanos)
        .map_err(|_| ConvertError::TimeOutOfRange { seconds, nanos })
}

impl FromProto<pb_meta::Time> for k8s_meta::Time {
    fn from_proto(p: pb_meta::Time) -> Result<Self, ConvertError> {
        timestamp(p.seconds, p.nanos).map(Self)
    }
}

impl FromProto<pb_meta::MicroTime> for k8s_meta::MicroTime {
    fn from_proto(p: pb_meta::MicroTime) -> Result<Self, ConvertError> {
        timestamp(p.seconds, p.nanos).map(Self)
    }
}

impl FromProto<pb_resource::Quantity> for k8s_resource::Quantity {
    #[inline]
    fn from_proto(p: pb_resource::Quantity) -> Result<Self, ConvertError> {
        Ok(Self(p.string.unwrap_or_default()))
    }
}

impl FromProto<pb_intstr::IntOrString> for k8s_intstr::IntOrString {
    fn from_proto(p: pb_intstr::IntOrString) -> Result<Self, ConvertError> {
        match p.r#type.unwrap_or_default() {
            0 => Ok(Self::Int(p.int_val.unwrap_or_default())),
            1 => Ok(Self::String(p.str_val.unwrap_or_default())),
            t => Err(ConvertError::InvalidIntOrString(t)),
        }
    }
}

fn json(what: &'static str, raw: &[u8]) -> Result<serde_json::Value, ConvertError> {
    if raw.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_slice(raw).map_err(|source| ConvertError::InvalidJson { what, source })
}

impl FromProto<pb_meta::FieldsV1> for k8s_meta::FieldsV1 {
    fn from_proto(p: pb_meta::FieldsV1) -> Result<Self, ConvertError> {
        json("FieldsV1", p.raw.as_deref().unwrap_or_default()).map(Self)
    }
}

impl FromProto<pb_runtime::RawExtension> for k8s_runtime::RawExtension {
    fn from_proto(p: pb_runtime::RawExtension) -> Result<Self, ConvertError> {
        json("RawExtension", p.raw.as_deref().unwrap_or_default()).map(Self)
    }
}

// Helpers the generated conversions call, one per (protobuf label, k8s-openapi optionality).

/// `optional P` → `Option<T>`.
#[inline]
pub(crate) fn opt<P, T: FromProto<P>>(p: Option<P>) -> Result<Option<T>, ConvertError> {
    p.map(T::from_proto).transpose()
}

/// Values with a zero (Go's zero value).
pub(crate) trait IsZero {
    fn is_zero(&self) -> bool;
}

macro_rules! is_zero {
    ($($t:ty => $z:expr),*) => {$(
        impl IsZero for $t {
            #[inline]
            fn is_zero(&self) -> bool {
                #[allow(clippy::float_cmp, reason = "exactly Go's zero value")]
                let z = *self == $z;
                z
            }
        }
    )*};
}
is_zero!(i32 => 0, i64 => 0, bool => false, f64 => 0.0);

impl IsZero for String {
    #[inline]
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

impl IsZero for Vec<u8> {
    #[inline]
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

/// `optional P` of a non-pointer Go field tagged `omitempty` → `Option<T>`: the zero value,
/// which Go's protobuf marshaller writes and its JSON marshaller omits, becomes `None`.
#[inline]
pub(crate) fn opt_nz<P: IsZero, T: FromProto<P>>(p: Option<P>) -> Result<Option<T>, ConvertError> {
    p.filter(|p| !p.is_zero()).map(T::from_proto).transpose()
}

/// `optional Time` → `Option<Time>`: an empty `Time` message (Go's zero time, which JSON
/// writes as `null`) becomes `None`.
#[inline]
pub(crate) fn opt_time<P: TimeParts, T: FromProto<P>>(
    p: Option<P>,
) -> Result<Option<T>, ConvertError> {
    p.filter(|p| !p.is_zero_time())
        .map(T::from_proto)
        .transpose()
}

/// `Time` and `MicroTime`.
pub(crate) trait TimeParts {
    fn is_zero_time(&self) -> bool;
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z) in Unix seconds.
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

macro_rules! time_parts {
    ($($t:ty),*) => {$(
        impl TimeParts for $t {
            #[inline]
            fn is_zero_time(&self) -> bool {
                let (s, n) = (self.seconds.unwrap_or_default(), self.nanos.unwrap_or_default());
                n == 0 && (s == 0 && self.seconds.is_none() || s == GO_ZERO_TIME_SECONDS)
            }
        }
    )*};
}
time_parts!(pb_meta::Time, pb_meta::MicroTime);

/// `optional P` → `T` (absent → `T::default()`, as Go's zero value).
#[inline]
pub(crate) fn req<P, T: FromProto<P> + Default>(p: Option<P>) -> Result<T, ConvertError> {
    p.map_or_else(|| Ok(T::default()), T::from_proto)
}

/// `optional Time` → `Time` (absent → the Unix epoch: k8s-openapi's time types have no
/// default, and a server always sends the required times).
#[inline]
pub(crate) fn req_time<P, T: FromProto<P> + From<k8s_openapi::jiff::Timestamp>>(
    p: Option<P>,
) -> Result<T, ConvertError> {
    p.map_or_else(
        || Ok(T::from(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        T::from_proto,
    )
}

/// `repeated string` (or number) → the same `Vec`, moved.
#[inline]
pub(crate) fn vec_id<T>(v: Vec<T>) -> Result<Vec<T>, ConvertError> {
    Ok(v)
}

/// `repeated string` (or number) → `Option<Vec>` (empty → `None`), moved.
#[inline]
pub(crate) fn opt_vec_id<T>(v: Vec<T>) -> Result<Option<Vec<T>>, ConvertError> {
    Ok((!v.is_empty()).then_some(v))
}

/// `map<string, string>` → the same map, moved (no rebuild).
#[allow(
    dead_code,
    reason = "for required string maps; the generated packages have none today"
)]
#[inline]
pub(crate) fn map_id<V>(m: BTreeMap<String, V>) -> Result<BTreeMap<String, V>, ConvertError> {
    Ok(m)
}

/// `map<string, string>` → `Option<BTreeMap>` (empty → `None`), moved.
#[inline]
pub(crate) fn opt_map_id<V>(
    m: BTreeMap<String, V>,
) -> Result<Option<BTreeMap<String, V>>, ConvertError> {
    Ok((!m.is_empty()).then_some(m))
}

/// `repeated P` → `Vec<T>`.
#[inline]
pub(crate) fn vec<P, T: FromProto<P>>(v: Vec<P>) -> Result<Vec<T>, ConvertError> {
    v.into_iter().map(T::from_proto).collect()
}

/// `repeated P` → `Option<Vec<T>>` (empty → `None`).
#[inline]
pub(crate) fn opt_vec<P, T: FromProto<P>>(v: Vec<P>) -> Result<Option<Vec<T>>, ConvertError> {
    if v.is_empty() {
        Ok(None)
    } else {
        vec(v).map(Some)
    }
}

/// `map<string, P>` → `BTreeMap<String, T>`.
#[inline]
pub(crate) fn map<P, T: FromProto<P>>(
    m: BTreeMap<String, P>,
) -> Result<BTreeMap<String, T>, ConvertError> {
    m.into_iter()
        .map(|(k, v)| Ok((k, T::from_proto(v)?)))
        .collect()
}

/// `map<string, P>` → `Option<BTreeMap<String, T>>` (empty → `None`).
#[inline]
pub(crate) fn opt_map<P, T: FromProto<P>>(
    m: BTreeMap<String, P>,
) -> Result<Option<BTreeMap<String, T>>, ConvertError> {
    if m.is_empty() {
        Ok(None)
    } else {
        map(m).map(Some)
    }
}

#[allow(clippy::all, clippy::pedantic, reason = "generated code")]
mod generated {
    include!("generated/convert_gen.rs");
}
pub(crate) use generated::for_each_kind;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_keeps_seconds_and_nanos() {
        let t = k8s_meta::Time::from_proto(pb_meta::Time {
            seconds: Some(1_700_000_000),
            nanos: Some(5),
        })
        .unwrap();
        assert_eq!(t.0.as_second(), 1_700_000_000);
        assert_eq!(t.0.subsec_nanosecond(), 5);
    }

    #[test]
    fn time_out_of_range_is_an_error() {
        let err = k8s_meta::Time::from_proto(pb_meta::Time {
            seconds: Some(i64::MAX),
            nanos: None,
        })
        .unwrap_err();
        assert!(matches!(err, ConvertError::TimeOutOfRange { .. }), "{err}");
    }

    #[test]
    fn int_or_string_by_type() {
        let int = pb_intstr::IntOrString {
            r#type: Some(0),
            int_val: Some(8080),
            str_val: None,
        };
        assert_eq!(
            k8s_intstr::IntOrString::from_proto(int).unwrap(),
            k8s_intstr::IntOrString::Int(8080)
        );
        let s = pb_intstr::IntOrString {
            r#type: Some(1),
            int_val: None,
            str_val: Some("http".into()),
        };
        assert_eq!(
            k8s_intstr::IntOrString::from_proto(s).unwrap(),
            k8s_intstr::IntOrString::String("http".into())
        );
        let bad = pb_intstr::IntOrString {
            r#type: Some(7),
            ..Default::default()
        };
        assert!(matches!(
            k8s_intstr::IntOrString::from_proto(bad),
            Err(ConvertError::InvalidIntOrString(7))
        ));
    }

    #[test]
    fn fields_v1_must_be_json() {
        let ok = pb_meta::FieldsV1 {
            raw: Some(br#"{"f:a":{}}"#.to_vec()),
        };
        assert_eq!(
            k8s_meta::FieldsV1::from_proto(ok).unwrap().0,
            serde_json::json!({"f:a": {}})
        );
        let bad = pb_meta::FieldsV1 {
            raw: Some(b"\x00\x01".to_vec()),
        };
        assert!(matches!(
            k8s_meta::FieldsV1::from_proto(bad),
            Err(ConvertError::InvalidJson {
                what: "FieldsV1",
                ..
            })
        ));
    }

    #[test]
    fn empty_repeated_becomes_none_for_optional_fields() {
        let meta = pb_meta::ObjectMeta {
            name: Some("x".into()),
            ..Default::default()
        };
        let k = k8s_meta::ObjectMeta::from_proto(meta).unwrap();
        assert_eq!(k.labels, None);
        assert_eq!(k.finalizers, None);
        assert_eq!(k.name.as_deref(), Some("x"));
    }
}
