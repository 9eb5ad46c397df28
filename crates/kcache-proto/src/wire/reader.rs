//! The one reader of the protobuf wire format in this crate: field keys, varints, fixed-size
//! and length-delimited values, with one set of limits. The generated decoders read their
//! fields through it, and the compact layer walks records with it
//! ([`compact::wire::fields`](crate::compact::wire::fields)).
//!
//! Its rules are prost's and protobuf-go's: a varint is at most [`MAX_LEN`](crate::varint::MAX_LEN) bytes and
//! its 10th byte holds only the top bit of a u64; a field number is in
//! `1..=`[`MAX_FIELD_NUMBER`]; the wire types are varint, fixed64, length-delimited and
//! fixed32 (groups are refused); a value never runs past the end of its message. Nesting is
//! bounded by the message's length (each level takes at least two bytes); there is no separate
//! depth limit.

use std::ops::Range;

use super::error::LayoutError;

/// The largest protobuf field number (2^29 - 1).
pub(crate) const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

/// A protobuf wire type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wt {
    Varint,
    I64,
    Len,
    I32,
}

impl Wt {
    /// The wire type's number in a key.
    pub(crate) fn code(self) -> u8 {
        match self {
            Wt::Varint => 0,
            Wt::I64 => 1,
            Wt::Len => 2,
            Wt::I32 => 5,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Wt::Varint),
            1 => Some(Wt::I64),
            2 => Some(Wt::Len),
            5 => Some(Wt::I32),
            _ => None,
        }
    }
}

/// Why a varint could not be read.
enum VarintFault {
    /// The message ends inside it.
    Eof,
    /// Longer than 10 bytes, or bits beyond 64.
    TooLong,
}

/// Reads the fields of one message's bytes, front to back.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    /// What is left to read.
    pub(super) buf: &'a [u8],
    /// The whole message's length, for offsets.
    len: usize,
    /// The field number and offset of the last key read, for errors in its value.
    field: u32,
    key_at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            len: buf.len(),
            field: 0,
            key_at: 0,
        }
    }

    /// Offset of the next byte to read in the message.
    #[inline]
    pub(crate) fn offset(&self) -> usize {
        self.len - self.buf.len()
    }

    /// Whether the whole message has been read.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    #[inline]
    fn raw_varint(&mut self) -> Result<u64, VarintFault> {
        // One-byte fast path: tags and most lengths.
        if let Some(&b) = self.buf.first()
            && b < 0x80
        {
            self.buf = &self.buf[1..];
            return Ok(u64::from(b));
        }
        let (value, len) = crate::varint::read(self.buf).map_err(|e| match e {
            crate::varint::Error::TooLong => VarintFault::TooLong,
            _ => VarintFault::Eof,
        })?;
        self.buf = &self.buf[len..];
        Ok(value)
    }

    /// A varint value.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, LayoutError> {
        let at = self.offset();
        self.raw_varint().map_err(|fault| match fault {
            VarintFault::Eof => self.truncated(),
            VarintFault::TooLong => LayoutError::Varint { at },
        })
    }

    #[cold]
    fn truncated(&self) -> LayoutError {
        LayoutError::Truncated {
            field: self.field,
            at: self.key_at,
        }
    }

    /// The next `n` bytes.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], LayoutError> {
        if n > self.buf.len() {
            return Err(self.truncated());
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// The next field's number and wire type, `None` at the end of the message.
    #[inline]
    pub(crate) fn key(&mut self) -> Result<Option<(u32, Wt)>, LayoutError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let at = self.offset();
        let key = self.raw_varint().map_err(|_| LayoutError::Varint { at })?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| (1..=MAX_FIELD_NUMBER).contains(n))
            .ok_or(LayoutError::FieldNumber { at })?;
        // Masked to 3 bits: the cast is lossless.
        let code = (key & 7) as u8;
        let wt = Wt::from_code(code).ok_or(LayoutError::WireType {
            field: number,
            wire_type: code,
            at,
        })?;
        self.field = number;
        self.key_at = at;
        Ok(Some((number, wt)))
    }

    /// A length-delimited value's bytes (after a key of wire type [`Wt::Len`]).
    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], LayoutError> {
        let n = self.varint()?;
        self.take(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Passes over a value of wire type `wt` and returns where it is in the message (for a
    /// length-delimited value, without its length prefix).
    #[inline]
    pub(crate) fn value(&mut self, wt: Wt) -> Result<Range<usize>, LayoutError> {
        let start = self.offset();
        match wt {
            Wt::Varint => {
                self.varint()?;
                Ok(start..self.offset())
            }
            Wt::I64 => self.take(8).map(|_| start..self.offset()),
            Wt::I32 => self.take(4).map(|_| start..self.offset()),
            Wt::Len => {
                let b = self.bytes()?;
                Ok(self.offset() - b.len()..self.offset())
            }
        }
    }

    /// Skips a value of wire type `wt` (a field this decoder does not know, or was asked to
    /// drop).
    #[inline]
    pub(crate) fn skip(&mut self, wt: Wt) -> Result<(), LayoutError> {
        self.value(wt).map(drop)
    }
}
