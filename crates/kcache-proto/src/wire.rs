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

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource as k8s_resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as k8s_meta;
use k8s_openapi::apimachinery::pkg::runtime as k8s_runtime;
use k8s_openapi::apimachinery::pkg::util::intstr as k8s_intstr;

use crate::convert::{ConvertError, IsZero};

/// A protobuf message that is not well formed, with the path of fields it was found under.
#[derive(Debug)]
pub struct WireError {
    /// Innermost field first.
    path: Vec<&'static str>,
    kind: WireErrorKind,
}

#[derive(Debug)]
enum WireErrorKind {
    Truncated,
    VarintTooLong,
    WireType { got: u8, want: u8 },
    UnsupportedWireType(u8),
    FieldNumber(u64),
    Convert(ConvertError),
}

impl WireError {
    fn new(kind: WireErrorKind) -> Self {
        Self {
            path: Vec::new(),
            kind,
        }
    }

    /// Records that the error happened inside `field`.
    #[cold]
    #[must_use]
    pub(crate) fn at(mut self, field: &'static str) -> Self {
        self.path.push(field);
        self
    }

    /// The field path where the error was found (`spec.containers.ports`), empty at the top.
    pub fn path(&self) -> String {
        let mut parts = self.path.clone();
        parts.reverse();
        parts.join(".")
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            WireErrorKind::Truncated => f.write_str("message ends inside a field")?,
            WireErrorKind::VarintTooLong => {
                f.write_str("varint longer than 10 bytes or beyond 64 bits")?;
            }
            WireErrorKind::WireType { got, want } => {
                write!(f, "wire type {got} where the field has wire type {want}")?;
            }
            WireErrorKind::UnsupportedWireType(t) => write!(f, "unsupported wire type {t}")?,
            WireErrorKind::FieldNumber(n) => write!(f, "field number {n} outside 1..=2^29-1")?,
            WireErrorKind::Convert(e) => write!(f, "{e}")?,
        }
        if !self.path.is_empty() {
            write!(f, " (at {})", self.path())?;
        }
        Ok(())
    }
}

impl std::error::Error for WireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            WireErrorKind::Convert(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ConvertError> for WireError {
    fn from(e: ConvertError) -> Self {
        Self::new(WireErrorKind::Convert(e))
    }
}

/// The largest protobuf field number (2^29 - 1).
const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

/// A protobuf wire type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wt {
    Varint,
    I64,
    Len,
    I32,
}

impl Wt {
    fn code(self) -> u8 {
        match self {
            Wt::Varint => 0,
            Wt::I64 => 1,
            Wt::Len => 2,
            Wt::I32 => 5,
        }
    }
}

/// Reads fields from one message's bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, WireError> {
        // One-byte fast path: tags and most lengths.
        if let Some(&b) = self.buf.first()
            && b < 0x80
        {
            self.buf = &self.buf[1..];
            return Ok(u64::from(b));
        }
        let mut value = 0u64;
        for (i, &b) in self.buf.iter().enumerate().take(10) {
            // The 10th byte may only hold the top bit of a u64 (as prost and protobuf-go).
            if i == 9 && b > 1 {
                return Err(WireError::new(WireErrorKind::VarintTooLong));
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err(WireError::new(if self.buf.len() >= 10 {
            WireErrorKind::VarintTooLong
        } else {
            WireErrorKind::Truncated
        }))
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.buf.len() {
            return Err(WireError::new(WireErrorKind::Truncated));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// The next field's number and wire type, `None` at the end of the message.
    #[inline]
    pub(crate) fn key(&mut self) -> Result<Option<(u32, Wt)>, WireError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wt = match key & 7 {
            0 => Wt::Varint,
            1 => Wt::I64,
            2 => Wt::Len,
            5 => Wt::I32,
            t => {
                return Err(WireError::new(WireErrorKind::UnsupportedWireType(
                    u8::try_from(t).unwrap_or(u8::MAX),
                )));
            }
        };
        let Some(field) = u32::try_from(key >> 3)
            .ok()
            .filter(|n| (1..=MAX_FIELD_NUMBER).contains(n))
        else {
            return Err(WireError::new(WireErrorKind::FieldNumber(key >> 3)));
        };
        Ok(Some((field, wt)))
    }

    #[inline]
    fn expect(wt: Wt, want: Wt) -> Result<(), WireError> {
        if wt == want {
            Ok(())
        } else {
            Err(WireError::new(WireErrorKind::WireType {
                got: wt.code(),
                want: want.code(),
            }))
        }
    }

    /// A length-delimited field's bytes.
    #[inline]
    pub(crate) fn len(&mut self, wt: Wt) -> Result<&'a [u8], WireError> {
        Self::expect(wt, Wt::Len)?;
        let n = self.varint()?;
        self.take(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Skips a field this decoder does not know (or was asked to drop).
    #[inline]
    pub(crate) fn skip(&mut self, wt: Wt) -> Result<(), WireError> {
        match wt {
            Wt::Varint => self.varint().map(drop),
            Wt::I64 => self.take(8).map(drop),
            Wt::I32 => self.take(4).map(drop),
            Wt::Len => self.len(wt).map(drop),
        }
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
                    while !packed.buf.is_empty() {
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

    number!(i32, Wt::Varint, |r| r.varint().map(|v| v as i32));
    number!(i64, Wt::Varint, |r| r.varint().map(|v| v as i64));
    number!(bool, Wt::Varint, |r| r.varint().map(|v| v != 0));
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
    include!("generated/decode_gen.rs");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_fast_and_slow_paths() {
        let mut r = Reader::new(&[0x05, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(r.varint().unwrap(), 5);
        assert_eq!(r.varint().unwrap(), 300);
        assert_eq!(r.varint().unwrap(), u64::from(u32::MAX));
        assert!(r.buf.is_empty());
    }

    #[test]
    fn truncated_varint_and_length_are_errors() {
        assert!(matches!(
            Reader::new(&[0x80, 0x80]).varint().unwrap_err().kind,
            WireErrorKind::Truncated
        ));
        assert!(matches!(
            Reader::new(&[0xff; 11]).varint().unwrap_err().kind,
            WireErrorKind::VarintTooLong
        ));
        // A length of 5 with 2 bytes left.
        assert!(matches!(
            Reader::new(&[0x05, 1, 2]).len(Wt::Len).unwrap_err().kind,
            WireErrorKind::Truncated
        ));
    }

    #[test]
    fn negative_int32_is_a_ten_byte_varint() {
        let mut buf = vec![0x08];
        buf.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        let mut r = Reader::new(&buf);
        let (tag, wt) = r.key().unwrap().unwrap();
        assert_eq!((tag, wt), (1, Wt::Varint));
        assert_eq!(i32::read(&mut r, wt, &Cx::default()).unwrap(), -1);
    }

    #[test]
    fn packed_and_unpacked_repeated_numbers_both_decode() {
        let cx = Cx::default();
        let mut out = Vec::new();
        // Unpacked: one varint.
        i64::read_repeated(&mut Reader::new(&[7]), Wt::Varint, &cx, &mut out).unwrap();
        // Packed: length 3, values 1, 2, 300.
        i64::read_repeated(
            &mut Reader::new(&[4, 1, 2, 0xac, 0x02]),
            Wt::Len,
            &cx,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, vec![7, 1, 2, 300]);
    }

    #[test]
    fn wrong_wire_type_names_the_field_path() {
        // Pod { metadata (1) = ObjectMeta { name (1) as a varint } }
        let buf = [0x0a, 0x02, 0x08, 0x01];
        let err =
            <k8s_openapi::api::core::v1::Pod as WireMessage>::decode_msg(&buf, &Cx::default())
                .unwrap_err();
        assert_eq!(err.path(), "metadata.name");
        assert!(err.to_string().contains("wire type 0"), "{err}");
    }

    #[test]
    fn invalid_utf8_string_decodes_lossily() {
        let mut r = Reader::new(&[0x02, 0xff, b'a']);
        let s = String::read(&mut r, Wt::Len, &Cx::default()).unwrap();
        assert_eq!(s, "\u{fffd}a");
    }

    #[test]
    fn groups_are_rejected() {
        assert!(matches!(
            Reader::new(&[0x0b]).key().unwrap_err().kind,
            WireErrorKind::UnsupportedWireType(3)
        ));
    }
}
