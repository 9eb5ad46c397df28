//! Protobuf wire format straight into k8s-openapi types, without an intermediate prost message.
//!
//! Decoding a Pod through prost and then converting it allocates every string, map and vector
//! twice (once in the prost struct, once when moving into k8s-openapi's) and walks the object
//! twice. The decoders generated in `generated/decode_gen.rs` (see `regen.sh`) read each field
//! from the wire into the local that becomes the k8s-openapi field, with the same rules as the
//! generated conversions (`convert.rs`): embedded Go structs inlined, Go's zero values of
//! `omitempty` fields and zero times as `None`, an empty repeated field as `None` for an
//! optional field, absent required fields as their default.
//!
//! Departures from prost, on inputs Go's marshaller never writes: a message field that occurs
//! twice keeps the last occurrence (prost merges the two); a string that is not UTF-8 is
//! decoded lossily (as Go's JSON encoder writes it) instead of failing.
//!
//! The bytes are read by the one wire reader of the crate (`reader.rs`), which the compact
//! layer's record walker uses too, so both refuse the same malformed input ([`LayoutError`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource as k8s_resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as k8s_meta;
use k8s_openapi::apimachinery::pkg::runtime as k8s_runtime;
use k8s_openapi::apimachinery::pkg::util::intstr as k8s_intstr;

use crate::convert::{ConvertError, IsZero};

mod error;
mod reader;
#[cfg(test)]
mod tests;

pub use error::{LayoutError, WireError};
pub(crate) use reader::{Reader, Wt};

impl<'a> Reader<'a> {
    #[inline]
    fn expect(wt: Wt, want: Wt) -> Result<(), WireError> {
        if wt == want {
            Ok(())
        } else {
            Err(WireError::wire_type(wt.code(), want.code()))
        }
    }

    /// A length-delimited field's bytes, after a key that announced `wt`.
    #[inline]
    pub(crate) fn len(&mut self, wt: Wt) -> Result<&'a [u8], WireError> {
        Self::expect(wt, Wt::Len)?;
        Ok(self.bytes()?)
    }
}

/// Options the generated decoders consult.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cx {
    /// Skip `ObjectMeta.managedFields` without decoding it.
    pub(crate) strip_managed_fields: bool,
}

/// A value read from one field occurrence.
pub(crate) trait Wire: Sized {
    /// Reads one value of a field whose key announced `wt`.
    fn read(r: &mut Reader<'_>, wt: Wt, cx: &Cx) -> Result<Self, WireError>;

    /// Reads one occurrence of a repeated field into `out` (numbers override this to accept
    /// the packed encoding too).
    #[inline]
    fn read_repeated(
        r: &mut Reader<'_>,
        wt: Wt,
        cx: &Cx,
        out: &mut Vec<Self>,
    ) -> Result<(), WireError> {
        out.push(Self::read(r, wt, cx)?);
        Ok(())
    }
}

/// A message decoded from its own bytes.
pub(crate) trait WireMessage: Sized {
    /// Decodes the whole message.
    fn decode_msg(buf: &[u8], cx: &Cx) -> Result<Self, WireError>;
}

/// Decodes one message of type `T` from its bytes.
#[inline]
pub(crate) fn decode_message<T: WireMessage>(buf: &[u8], cx: &Cx) -> Result<T, WireError> {
    T::decode_msg(buf, cx)
}

/// Implements [`Wire`] for a generated message type.
macro_rules! wire_message {
    ($t:ty) => {
        impl $crate::wire::Wire for $t {
            #[inline]
            fn read(
                r: &mut $crate::wire::Reader<'_>,
                wt: $crate::wire::Wt,
                cx: &$crate::wire::Cx,
            ) -> Result<Self, $crate::wire::WireError> {
                <Self as $crate::wire::WireMessage>::decode_msg(r.len(wt)?, cx)
            }
        }
    };
}

impl Wire for String {
    #[inline]
    fn read(r: &mut Reader<'_>, wt: Wt, _: &Cx) -> Result<Self, WireError> {
        let b = r.len(wt)?;
        Ok(match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        })
    }
}

impl Wire for k8s_openapi::ByteString {
    #[inline]
    fn read(r: &mut Reader<'_>, wt: Wt, _: &Cx) -> Result<Self, WireError> {
        Ok(Self(r.len(wt)?.to_vec()))
    }
}

/// Numbers: a value, or (repeated) a packed run of values.
macro_rules! number {
    ($t:ty, $wt:expr, |$r:ident| $read:expr) => {
        impl Wire for $t {
            #[inline]
            fn read($r: &mut Reader<'_>, wt: Wt, _: &Cx) -> Result<Self, WireError> {
                Reader::expect(wt, $wt)?;
                $read
            }

            fn read_repeated(
                r: &mut Reader<'_>,
                wt: Wt,
                cx: &Cx,
                out: &mut Vec<Self>,
            ) -> Result<(), WireError> {
                if wt == Wt::Len && $wt != Wt::Len {
                    let mut packed = Reader::new(r.len(wt)?);
                    while !packed.is_empty() {
                        out.push(Self::read(&mut packed, $wt, cx)?);
                    }
                    Ok(())
                } else {
                    out.push(Self::read(r, wt, cx)?);
                    Ok(())
                }
            }
        }
    };
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    reason = "protobuf int32/int64 are two's complement varints, truncated as the spec says"
)]
mod numbers {
    use super::{Cx, Reader, Wire, WireError, Wt};

    number!(i32, Wt::Varint, |r| Ok(r.varint()? as i32));
    number!(i64, Wt::Varint, |r| Ok(r.varint()? as i64));
    number!(bool, Wt::Varint, |r| Ok(r.varint()? != 0));
    number!(f64, Wt::I64, |r| {
        let b = r.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_le_bytes(a))
    });
}

/// One `map<string, V>` entry (a message with `key = 1`, `value = 2`); absent parts are their
/// defaults.
#[inline]
pub(crate) fn map_entry<V: Wire + Default>(
    r: &mut Reader<'_>,
    wt: Wt,
    cx: &Cx,
) -> Result<(String, V), WireError> {
    let mut e = Reader::new(r.len(wt)?);
    let (mut key, mut value) = (String::new(), None);
    while let Some((tag, wt)) = e.key()? {
        match tag {
            1 => key = String::read(&mut e, wt, cx)?,
            2 => value = Some(V::read(&mut e, wt, cx)?),
            _ => e.skip(wt)?,
        }
    }
    Ok((key, value.unwrap_or_default()))
}

/// `meta.v1.Time` / `MicroTime` as sent: seconds and nanos, each possibly absent.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TimeRaw {
    seconds: Option<i64>,
    nanos: Option<i32>,
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z) in Unix seconds.
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

impl TimeRaw {
    fn is_zero_time(self) -> bool {
        let (s, n) = (
            self.seconds.unwrap_or_default(),
            self.nanos.unwrap_or_default(),
        );
        n == 0 && (s == 0 && self.seconds.is_none() || s == GO_ZERO_TIME_SECONDS)
    }

    fn timestamp(self) -> Result<k8s_openapi::jiff::Timestamp, ConvertError> {
        let (seconds, nanos) = (
            self.seconds.unwrap_or_default(),
            self.nanos.unwrap_or_default(),
        );
        k8s_openapi::jiff::Timestamp::new(seconds, nanos)
            .map_err(|_| ConvertError::TimeOutOfRange { seconds, nanos })
    }
}

impl WireMessage for TimeRaw {
    fn decode_msg(buf: &[u8], cx: &Cx) -> Result<Self, WireError> {
        let mut t = Self::default();
        let mut r = Reader::new(buf);
        while let Some((tag, wt)) = r.key()? {
            match tag {
                1 => t.seconds = Some(i64::read(&mut r, wt, cx)?),
                2 => t.nanos = Some(i32::read(&mut r, wt, cx)?),
                _ => r.skip(wt)?,
            }
        }
        Ok(t)
    }
}
wire_message!(TimeRaw);

/// An optional time: Go's zero time (JSON `null`) is `None`.
#[inline]
pub(crate) fn time_opt<T: From<k8s_openapi::jiff::Timestamp>>(
    t: Option<TimeRaw>,
) -> Result<Option<T>, WireError> {
    match t {
        Some(t) if !t.is_zero_time() => Ok(Some(T::from(t.timestamp()?))),
        _ => Ok(None),
    }
}

/// A required time: absent is the Unix epoch (as the generated conversion does).
#[inline]
pub(crate) fn time_req<T: From<k8s_openapi::jiff::Timestamp>>(
    t: Option<TimeRaw>,
) -> Result<T, WireError> {
    match t {
        Some(t) => Ok(T::from(t.timestamp()?)),
        None => Ok(T::from(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
    }
}

/// Go's zero value of an `omitempty` scalar is `None`.
#[inline]
pub(crate) fn nz<T: IsZero>(v: Option<T>) -> Option<T> {
    v.filter(|v| !v.is_zero())
}

/// An empty repeated field is `None` for an optional k8s-openapi field.
#[inline]
pub(crate) fn nonempty_vec<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

/// An empty map field is `None` for an optional k8s-openapi field.
#[inline]
pub(crate) fn nonempty_map<V>(m: BTreeMap<String, V>) -> Option<BTreeMap<String, V>> {
    (!m.is_empty()).then_some(m)
}

impl WireMessage for k8s_resource::Quantity {
    fn decode_msg(buf: &[u8], cx: &Cx) -> Result<Self, WireError> {
        let mut s = String::new();
        let mut r = Reader::new(buf);
        while let Some((tag, wt)) = r.key()? {
            match tag {
                1 => s = String::read(&mut r, wt, cx)?,
                _ => r.skip(wt)?,
            }
        }
        Ok(Self(s))
    }
}
wire_message!(k8s_resource::Quantity);

impl WireMessage for k8s_intstr::IntOrString {
    fn decode_msg(buf: &[u8], cx: &Cx) -> Result<Self, WireError> {
        let (mut ty, mut int, mut s) = (0i64, 0i32, String::new());
        let mut r = Reader::new(buf);
        while let Some((tag, wt)) = r.key()? {
            match tag {
                1 => ty = i64::read(&mut r, wt, cx)?,
                2 => int = i32::read(&mut r, wt, cx)?,
                3 => s = String::read(&mut r, wt, cx)?,
                _ => r.skip(wt)?,
            }
        }
        match ty {
            0 => Ok(Self::Int(int)),
            1 => Ok(Self::String(s)),
            t => Err(ConvertError::InvalidIntOrString(t).into()),
        }
    }
}
wire_message!(k8s_intstr::IntOrString);

/// The JSON held by `FieldsV1` / `RawExtension` (field 1, bytes); empty is JSON `null`.
fn json_field(what: &'static str, buf: &[u8], cx: &Cx) -> Result<serde_json::Value, WireError> {
    let mut raw: &[u8] = &[];
    let mut r = Reader::new(buf);
    while let Some((tag, wt)) = r.key()? {
        match tag {
            1 => raw = r.len(wt)?,
            _ => r.skip(wt)?,
        }
    }
    let _ = cx;
    if raw.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_slice(raw).map_err(|source| ConvertError::InvalidJson { what, source }.into())
}

impl WireMessage for k8s_meta::FieldsV1 {
    fn decode_msg(buf: &[u8], cx: &Cx) -> Result<Self, WireError> {
        json_field("FieldsV1", buf, cx).map(Self)
    }
}
wire_message!(k8s_meta::FieldsV1);

impl WireMessage for k8s_runtime::RawExtension {
    fn decode_msg(buf: &[u8], cx: &Cx) -> Result<Self, WireError> {
        json_field("RawExtension", buf, cx).map(Self)
    }
}
wire_message!(k8s_runtime::RawExtension);

#[allow(clippy::all, clippy::pedantic, reason = "generated code")]
#[allow(
    unused_variables,
    reason = "messages without fields ignore the options"
)]
mod generated {
    include!("../generated/decode_gen.rs");
}
