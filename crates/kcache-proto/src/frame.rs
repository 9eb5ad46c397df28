//! Length-prefixed frames of a protobuf watch stream.
//!
//! Each frame is a 4-byte big-endian length followed by that many bytes (one
//! `meta.v1.WatchEvent`). HTTP chunks do not follow frame boundaries: a frame may span chunks
//! and a chunk may hold several frames, so [`FrameDecoder`] buffers chunks and cuts frames by
//! length. (tokio-util's `LengthDelimitedCodec` cuts the same layout, but its errors are
//! opaque `io::Error`s and it consumes the prefix before the payload has arrived; cutting by
//! hand is a dozen lines and keeps the announced length for the error.)

use bytes::{Buf, Bytes, BytesMut};

/// Default limit on one frame: 64 MiB. The API server's own limit on an object is far lower
/// (etcd's 1.5 MiB request limit by default), so a longer length prefix means corruption.
pub const DEFAULT_MAX_FRAME_LEN: usize = 64 * 1024 * 1024;

/// Errors cutting a stream into frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A length prefix announced a frame longer than the limit.
    #[error("watch frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLong {
        /// Announced length (the prefix).
        len: u64,
        /// Configured limit.
        max: usize,
    },
    /// The stream ended inside a frame (or inside a length prefix).
    #[error("watch stream ended inside a frame: {buffered} bytes of an incomplete frame")]
    Truncated {
        /// Bytes buffered when the stream ended.
        buffered: usize,
    },
}

/// Cuts a byte stream, fed in arbitrary chunks, into frames.
///
/// Frames are zero-copy slices of the buffered input where possible. After an error the
/// decoder is unusable (a stream with a bad length prefix cannot be resynchronised): every
/// later call returns the same error.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max: usize,
    failed: Option<FrameError>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_LEN)
    }
}

impl FrameDecoder {
    /// A decoder that refuses frames longer than `max_frame_len` bytes.
    pub fn new(max_frame_len: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            max: max_frame_len,
            failed: None,
        }
    }

    /// The frame size limit.
    pub fn max_frame_len(&self) -> usize {
        self.max
    }

    /// Appends a chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes buffered that do not yet form a complete frame (after [`next_frame`] returned
    /// `Ok(None)`).
    ///
    /// [`next_frame`]: FrameDecoder::next_frame
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame, `Ok(None)` when more input is needed.
    ///
    /// # Errors
    ///
    /// [`FrameError::TooLong`] when a length prefix exceeds the limit.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let Some(prefix) = self.buf.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*prefix);
        let Ok(len) = usize::try_from(len) else {
            return Err(self.fail(FrameError::TooLong {
                len: u64::from(len),
                max: self.max,
            }));
        };
        if len > self.max {
            return Err(self.fail(FrameError::TooLong {
                len: len as u64,
                max: self.max,
            }));
        }
        if self.buf.len() - 4 < len {
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.failed = Some(e.clone());
        e
    }

    /// Call at the end of the stream: an error if it stopped inside a frame.
    ///
    /// # Errors
    ///
    /// [`FrameError::Truncated`] when bytes of an incomplete frame are buffered.
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Truncated {
                buffered: self.buf.len(),
            })
        }
    }
}

/// Encodes one frame (length prefix + payload), for tests and servers.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).expect("a frame is shorter than 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(d: &mut FrameDecoder) -> Vec<Bytes> {
        std::iter::from_fn(|| d.next_frame().unwrap()).collect()
    }

    #[test]
    fn frames_split_across_chunks_are_reassembled() {
        let mut stream = Vec::new();
        encode_frame(b"hello", &mut stream);
        encode_frame(b"", &mut stream);
        encode_frame(b"world!", &mut stream);
        let mut d = FrameDecoder::default();
        let mut got = Vec::new();
        for b in &stream {
            d.push(std::slice::from_ref(b));
            got.extend(frames(&mut d));
        }
        assert_eq!(
            got,
            vec![
                Bytes::from_static(b"hello"),
                Bytes::new(),
                Bytes::from_static(b"world!")
            ]
        );
        d.finish().unwrap();
    }

    #[test]
    fn frame_longer_than_limit_is_refused_before_buffering_it() {
        let mut d = FrameDecoder::new(8);
        d.push(&[0, 0, 0, 9]);
        assert_eq!(d.next_frame(), Err(FrameError::TooLong { len: 9, max: 8 }));
        // Sticky.
        assert!(d.next_frame().is_err());
        assert!(d.finish().is_err());
    }

    #[test]
    fn stream_ending_inside_a_frame_is_truncated() {
        let mut d = FrameDecoder::default();
        d.push(&[0, 0, 0, 5, b'a', b'b']);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(d.finish(), Err(FrameError::Truncated { buffered: 6 }));
        let mut d = FrameDecoder::default();
        d.push(&[0, 0]);
        assert_eq!(d.finish(), Err(FrameError::Truncated { buffered: 2 }));
    }
}
