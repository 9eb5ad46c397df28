//! A response body that cannot be decoded, as an error whose message is safe to show.

use kcache::lister_watcher::Error as LwError;

use crate::redact::display_safe;

/// At most this many bytes of a decoder's message (which may quote the body) reach an error.
pub(crate) const MAX_DECODE_MESSAGE: usize = 512;

/// A decoding failure whose message may quote the body (serde quotes unexpected strings):
/// made safe to show, and without the original error, which keeps the quote.
pub(crate) fn decode_error(e: impl std::fmt::Display) -> LwError {
    LwError::decode(DecodeError(display_safe(
        &e.to_string(),
        MAX_DECODE_MESSAGE,
    )))
}

/// A response body could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct DecodeError(pub(crate) String);
