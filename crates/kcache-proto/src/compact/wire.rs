//! A small protobuf wire walker: the field records of one message level as byte ranges, and
//! the rewrite of an object without `metadata.managedFields` built on it.
//!
//! Nothing is decoded: a record is its key (field number + wire type) and the byte range of
//! its value, so removing a field means copying the other records and recomputing the length
//! prefixes of the messages that enclosed it. The records are read by the same wire reader as
//! the generated decoders', with the same limits and the same [`LayoutError`]s.

use std::borrow::Cow;
use std::ops::Range;

use crate::varint;
pub use crate::wire::LayoutError;
use crate::wire::Reader;

/// `metadata`: field 1 of every top-level Kubernetes object.
pub const OBJECT_METADATA: u32 = 1;
/// `managedFields`: field 17 of `ObjectMeta`.
pub const META_MANAGED_FIELDS: u32 = 17;

const WIRE_LEN: u8 = 2;

/// One field record of a message, as offsets into that message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRecord {
    /// Field number.
    pub number: u32,
    /// Wire type (0, 1, 2 or 5).
    pub wire_type: u8,
    /// The whole record: key, length prefix (if any), value.
    pub record: Range<usize>,
    /// The value (for length-delimited fields, without the length prefix).
    pub value: Range<usize>,
}

/// The records of one message level, in order; after the first error it yields nothing.
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    reader: Reader<'a>,
    failed: bool,
}

/// Walks the records of `msg` (one level: nested messages are length-delimited values).
pub fn fields(msg: &[u8]) -> Fields<'_> {
    Fields {
        reader: Reader::new(msg),
        failed: false,
    }
}

impl Fields<'_> {
    fn record(&mut self) -> Result<Option<FieldRecord>, LayoutError> {
        let start = self.reader.offset();
        let Some((number, wt)) = self.reader.key()? else {
            return Ok(None);
        };
        let value = self.reader.value(wt)?;
        Ok(Some(FieldRecord {
            number,
            wire_type: wt.code(),
            record: start..self.reader.offset(),
            value,
        }))
    }
}

impl Iterator for Fields<'_> {
    type Item = Result<FieldRecord, LayoutError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.record().transpose();
        // Stop after the first error.
        self.failed = matches!(r, Some(Err(_)));
        r
    }
}

/// The byte ranges of `msg` that remain when every record of field `number` is dropped,
/// adjacent ranges merged. `None` when `msg` has no such record (nothing to drop).
///
/// # Errors
///
/// [`LayoutError`] when `msg` is not a well-formed message at this level.
pub fn without_field(msg: &[u8], number: u32) -> Result<Option<Vec<Range<usize>>>, LayoutError> {
    let mut kept: Vec<Range<usize>> = Vec::new();
    let mut dropped = false;
    for f in fields(msg) {
        let f = f?;
        if f.number == number {
            dropped = true;
            continue;
        }
        match kept.last_mut() {
            Some(last) if last.end == f.record.start => last.end = f.record.end,
            _ => kept.push(f.record),
        }
    }
    Ok(dropped.then_some(kept))
}

/// The values of every `metadata` (field 1) record of an object's message, in order (protobuf
/// merges repeated occurrences of a message field; the API server writes one).
///
/// # Errors
///
/// [`LayoutError`] when the object is not well-formed at its top level, or `metadata` is not a
/// length-delimited value.
pub fn metadata_ranges(object: &[u8]) -> Result<Vec<Range<usize>>, LayoutError> {
    let mut out = Vec::with_capacity(1);
    for f in fields(object) {
        let f = f?;
        if f.number == OBJECT_METADATA {
            if f.wire_type != WIRE_LEN {
                return Err(LayoutError::MetadataNotAMessage(f.wire_type));
            }
            out.push(f.value);
        }
    }
    Ok(out)
}

/// The object's message without `metadata.managedFields`: every other byte is kept as it is,
/// only the metadata's length prefix is rewritten. Borrowed (no copy) when the object has no
/// `managedFields`.
///
/// # Errors
///
/// [`LayoutError`] when the object or its metadata is not well-formed at the levels walked
/// (the top level and the metadata's own fields; other nested messages are not looked into).
pub fn strip_managed_fields(object: &[u8]) -> Result<Cow<'_, [u8]>, LayoutError> {
    // Each metadata record that loses fields: its record range, and the metadata ranges kept.
    let mut rewrites: Vec<(Range<usize>, Vec<Range<usize>>)> = Vec::new();
    for f in fields(object) {
        let f = f?;
        if f.number != OBJECT_METADATA {
            continue;
        }
        if f.wire_type != WIRE_LEN {
            return Err(LayoutError::MetadataNotAMessage(f.wire_type));
        }
        let meta = &object[f.value.clone()];
        if let Some(kept) = without_field(meta, META_MANAGED_FIELDS)? {
            let base = f.value.start;
            let kept = kept
                .into_iter()
                .map(|r| r.start + base..r.end + base)
                .collect();
            rewrites.push((f.record, kept));
        }
    }
    if rewrites.is_empty() {
        return Ok(Cow::Borrowed(object));
    }
    // Exact size first, so that the stored buffer has no spare capacity.
    let key_len = varint::encoded_len(u64::from(OBJECT_METADATA << 3 | u32::from(WIRE_LEN)));
    let mut size = object.len();
    for (record, kept) in &rewrites {
        let payload: usize = kept.iter().map(ExactSizeIterator::len).sum();
        size = size - record.len() + key_len + varint::encoded_len(payload as u64) + payload;
    }
    let mut out = Vec::with_capacity(size);
    let mut pos = 0;
    for (record, kept) in rewrites {
        out.extend_from_slice(&object[pos..record.start]);
        let payload: usize = kept.iter().map(ExactSizeIterator::len).sum();
        varint::put(
            &mut out,
            u64::from(OBJECT_METADATA << 3 | u32::from(WIRE_LEN)),
        );
        varint::put(&mut out, payload as u64);
        for r in kept {
            out.extend_from_slice(&object[r]);
        }
        pos = record.end;
    }
    out.extend_from_slice(&object[pos..]);
    debug_assert_eq!(out.len(), size);
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_len_matches_put() {
        for v in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            varint::put(&mut out, v);
            assert_eq!(out.len(), varint::encoded_len(v), "{v}");
            let mut r = Reader::new(&out);
            assert_eq!(r.varint(), Ok(v));
            assert!(r.is_empty());
        }
    }

    #[test]
    fn overlong_varint_is_an_error() {
        assert_eq!(
            Reader::new(&[0xff; 11]).varint(),
            Err(LayoutError::Varint { at: 0 })
        );
        // Ten bytes whose last one carries more than the top bit of a u64.
        let mut ten = [0xff; 10];
        ten[9] = 0x02;
        assert!(Reader::new(&ten).varint().is_err());
    }

    #[test]
    fn records_are_walked_with_their_ranges() {
        // 1: "ab" (len), 2: varint 300, 3: fixed32, 4: fixed64.
        let msg = [
            0x0a, 2, b'a', b'b', 0x10, 0xac, 0x02, 0x1d, 1, 2, 3, 4, 0x21, 1, 2, 3, 4, 5, 6, 7, 8,
        ];
        let f: Vec<FieldRecord> = fields(&msg).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            f.iter()
                .map(|f| (f.number, f.wire_type))
                .collect::<Vec<_>>(),
            [(1, 2), (2, 0), (3, 5), (4, 1)]
        );
        assert_eq!(f[0].value, 2..4);
        assert_eq!(f[1].record, 4..7);
        assert_eq!(f[3].value, 13..21);
    }

    #[test]
    fn groups_and_bad_keys_are_errors() {
        assert!(matches!(
            fields(&[0x0b]).next(),
            Some(Err(LayoutError::WireType { wire_type: 3, .. }))
        ));
        assert!(matches!(
            fields(&[0x02]).next(),
            Some(Err(LayoutError::FieldNumber { at: 0 }))
        ));
        assert!(matches!(
            fields(&[0x0a, 5, 1]).next(),
            Some(Err(LayoutError::Truncated { field: 1, at: 0 }))
        ));
    }
}
