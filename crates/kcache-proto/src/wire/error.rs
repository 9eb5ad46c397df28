//! The errors of the wire reader: [`LayoutError`] for bytes that are not a protobuf message at
//! all (what [`Reader`](super::Reader) refuses), [`WireError`] for a message the generated
//! decoders cannot turn into a k8s-openapi value, with the path of fields it was found under.

use std::fmt;

use crate::convert::ConvertError;

/// A message whose wire structure is invalid: what the wire reader refuses, for the generated
/// decoders and the compact layer alike. Offsets are into the message being read (for a
/// nested message, its own bytes).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// A varint runs past the end of the message (where it is a key) or past 10 bytes, or its
    /// 10th byte holds bits beyond 64.
    #[error("invalid varint at byte {at}")]
    Varint {
        /// Offset of the varint in the walked message.
        at: usize,
    },
    /// A field key with field number 0 or beyond 2^29 - 1.
    #[error("invalid field number at byte {at}")]
    FieldNumber {
        /// Offset of the key.
        at: usize,
    },
    /// A wire type that is not varint, fixed64, length-delimited or fixed32 (groups are not
    /// used by Kubernetes and not followed).
    #[error("unsupported wire type {wire_type} for field {field} at byte {at}")]
    WireType {
        /// The field number.
        field: u32,
        /// The wire type (3 and 4 are groups, 6 and 7 do not exist).
        wire_type: u8,
        /// Offset of the key.
        at: usize,
    },
    /// A value runs past the end of its message.
    #[error("field {field} at byte {at} runs past the end of its message")]
    Truncated {
        /// The field number (0 for a value read without a key, e.g. inside a packed run).
        field: u32,
        /// Offset of the key.
        at: usize,
    },
    /// `metadata` (field 1) is not length-delimited.
    #[error("object metadata (field 1) has wire type {0}, not a message")]
    MetadataNotAMessage(u8),
}

/// A protobuf message that the generated decoders cannot decode, with the path of fields it
/// was found under: its bytes are not a message ([`WireError::layout`]), a field has another
/// wire type than its declaration, or a value cannot be represented in k8s-openapi's type.
#[derive(Debug)]
pub struct WireError {
    /// Innermost field first.
    path: Vec<&'static str>,
    kind: WireErrorKind,
}

#[derive(Debug)]
enum WireErrorKind {
    Layout(LayoutError),
    WireType { got: u8, want: u8 },
    Convert(ConvertError),
}

impl WireError {
    /// A field of wire type `got` where the declaration says `want`.
    pub(crate) fn wire_type(got: u8, want: u8) -> Self {
        Self::new(WireErrorKind::WireType { got, want })
    }

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

    /// The structural error, when the bytes are not a well-formed message (offsets into the
    /// innermost message on [`WireError::path`]).
    pub fn layout(&self) -> Option<&LayoutError> {
        match &self.kind {
            WireErrorKind::Layout(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            WireErrorKind::Layout(e) => write!(f, "{e}")?,
            WireErrorKind::WireType { got, want } => {
                write!(f, "wire type {got} where the field has wire type {want}")?;
            }
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
            // Displayed in full already; `layout()` gives it to code.
            WireErrorKind::Layout(_) | WireErrorKind::WireType { .. } => None,
        }
    }
}

impl From<LayoutError> for WireError {
    #[cold]
    fn from(e: LayoutError) -> Self {
        Self::new(WireErrorKind::Layout(e))
    }
}

impl From<ConvertError> for WireError {
    fn from(e: ConvertError) -> Self {
        Self::new(WireErrorKind::Convert(e))
    }
}
