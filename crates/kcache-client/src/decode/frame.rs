//! Splits a chunked watch body into newline-delimited JSON frames.

use bytes::{Bytes, BytesMut};

/// The default limit for one watch frame: 64 MiB. The API server's own request limit is
/// 3 MiB per object (etcd's default is 1.5 MiB), so a frame larger than this means a broken
/// stream, not a big object.
pub(crate) const DEFAULT_MAX_FRAME_SIZE: usize = 64 * 1024 * 1024;

/// Why the watch body could not be split into frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum JsonFrameError {
    /// A frame grew past the limit without a newline.
    #[error("watch frame larger than {limit} bytes without a newline: the stream is corrupt")]
    TooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The body ended in the middle of a frame.
    #[error("watch stream ended in the middle of an event ({buffered} bytes without a newline)")]
    Truncated {
        /// How many bytes of the unfinished frame were received.
        buffered: usize,
    },
}

/// Accumulates body chunks and yields complete frames (lines without their `\n` or `\r\n`).
///
/// Chunk boundaries are arbitrary: a frame may span several chunks and a chunk may hold
/// several frames. Whitespace-only lines are skipped. Scanning resumes where it stopped, so
/// a frame split into many chunks is scanned once.
///
#[derive(Debug)]
pub(crate) struct JsonFrameDecoder {
    buf: BytesMut,
    /// Bytes of `buf` already known to hold no newline.
    scanned: usize,
    max_frame_size: usize,
    /// An unfinished frame outgrew the limit: its bytes were dropped, and
    /// [`next_frame`](Self::next_frame) reports [`JsonFrameError::TooLarge`].
    overflowed: bool,
}

impl JsonFrameDecoder {
    /// A decoder that rejects frames longer than `max_frame_size` bytes.
    pub(crate) fn new(max_frame_size: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            scanned: 0,
            max_frame_size,
            overflowed: false,
        }
    }

    /// Appends a chunk of the body. A chunk that would make the unfinished frame outgrow the
    /// limit is not kept (nor is the frame): the buffer never holds much more than the limit.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if self.overflowed {
            return;
        }
        let unfinished_grows = memchr::memchr(b'\n', chunk).is_none()
            && memchr::memchr(b'\n', &self.buf[self.scanned..]).is_none();
        if unfinished_grows && self.buf.len() + chunk.len() > self.max_frame_size {
            self.overflowed = true;
            self.buf = BytesMut::new();
            self.scanned = 0;
            return;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete frame, or `None` until more bytes arrive.
    ///
    /// # Errors
    /// [`JsonFrameError::TooLarge`] when the unfinished frame exceeds the limit; the decoder should
    /// then be dropped.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Bytes>, JsonFrameError> {
        if self.overflowed {
            return Err(JsonFrameError::TooLarge {
                limit: self.max_frame_size,
            });
        }
        loop {
            let Some(pos) = memchr::memchr(b'\n', &self.buf[self.scanned..]) else {
                self.scanned = self.buf.len();
                if self.buf.len() > self.max_frame_size {
                    return Err(JsonFrameError::TooLarge {
                        limit: self.max_frame_size,
                    });
                }
                return Ok(None);
            };
            let end = self.scanned + pos;
            let mut line = self.buf.split_to(end + 1);
            self.scanned = 0;
            line.truncate(end);
            if line.last() == Some(&b'\r') {
                line.truncate(end - 1);
            }
            if line.len() > self.max_frame_size {
                return Err(JsonFrameError::TooLarge {
                    limit: self.max_frame_size,
                });
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Ok(Some(line.freeze()));
        }
    }

    /// Checks the end of the body: anything but whitespace left over is a truncated frame.
    ///
    /// # Errors
    /// [`JsonFrameError::Truncated`] when the body ended mid-frame.
    pub(crate) fn finish(&mut self) -> Result<(), JsonFrameError> {
        if self.buf.iter().all(u8::is_ascii_whitespace) {
            self.buf.clear();
            Ok(())
        } else {
            Err(JsonFrameError::Truncated {
                buffered: self.buf.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_frames(d: &mut JsonFrameDecoder) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(f) = d.next_frame().unwrap() {
            out.push(f.to_vec());
        }
        out
    }

    #[test]
    fn several_frames_in_one_chunk_and_crlf() {
        let mut d = JsonFrameDecoder::new(100);
        d.push(b"a\r\nb\n\n  \nc\n");
        assert_eq!(
            all_frames(&mut d),
            [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn frame_split_byte_by_byte() {
        let mut d = JsonFrameDecoder::new(100);
        let mut out = Vec::new();
        for b in b"{\"x\":1}\n{\"y\":2}\n" {
            d.push(&[*b]);
            out.extend(all_frames(&mut d));
        }
        assert_eq!(out, [b"{\"x\":1}".to_vec(), b"{\"y\":2}".to_vec()]);
    }

    #[test]
    fn frame_over_the_limit_is_rejected_with_or_without_newline() {
        let mut d = JsonFrameDecoder::new(4);
        d.push(b"12345");
        assert_eq!(d.next_frame(), Err(JsonFrameError::TooLarge { limit: 4 }));
        let mut d = JsonFrameDecoder::new(4);
        d.push(b"123456\n");
        assert_eq!(d.next_frame(), Err(JsonFrameError::TooLarge { limit: 4 }));
        let mut d = JsonFrameDecoder::new(4);
        d.push(b"1234\n");
        assert_eq!(d.next_frame().unwrap().as_deref(), Some(&b"1234"[..]));
    }

    #[test]
    fn an_endless_frame_is_not_buffered_past_the_limit() {
        // A caller may push several chunks before asking for frames.
        let mut d = JsonFrameDecoder::new(10_000);
        for _ in 0..100 {
            d.push(&[b'x'; 1000]);
        }
        assert!(
            d.buf.capacity() <= 2 * (10_000 + 1000),
            "{} bytes held for a 10,000-byte limit",
            d.buf.capacity()
        );
        assert_eq!(
            d.next_frame(),
            Err(JsonFrameError::TooLarge { limit: 10_000 })
        );
    }

    #[test]
    fn eof_mid_frame_is_truncated_and_trailing_whitespace_is_not() {
        let mut d = JsonFrameDecoder::new(100);
        d.push(b"{\"a\":1}\n{\"b\"");
        assert_eq!(all_frames(&mut d).len(), 1);
        assert_eq!(d.finish(), Err(JsonFrameError::Truncated { buffered: 4 }));
        let mut d = JsonFrameDecoder::new(100);
        d.push(b"{}\n \r\n");
        assert_eq!(all_frames(&mut d).len(), 1);
        assert_eq!(d.finish(), Ok(()));
    }
}

#[cfg(test)]
mod split_frame_tests {
    use super::JsonFrameDecoder;

    #[test]
    fn a_frame_split_across_chunks_comes_out_whole() {
        let mut frames = JsonFrameDecoder::new(1024);
        frames.push(b"{\"a\":1}\n{\"b\"");
        assert_eq!(&frames.next_frame().unwrap().unwrap()[..], b"{\"a\":1}");
        assert!(frames.next_frame().unwrap().is_none());
        frames.push(b":2}\n");
        assert_eq!(&frames.next_frame().unwrap().unwrap()[..], b"{\"b\":2}");
        assert!(frames.finish().is_ok());
    }
}
