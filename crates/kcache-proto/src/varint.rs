//! Protobuf varints: the one writer ([`put`], [`encoded_len`]) and reader ([`read`]) of the
//! workspace, with prost's and protobuf-go's limits: at most [`MAX_LEN`] bytes, the 10th
//! holding only bit 63 of a u64.
//!
//! ```
//! use kcache_proto::varint;
//!
//! let mut out = Vec::new();
//! varint::put(&mut out, 300);
//! assert_eq!(out, [0xac, 0x02]);
//! assert_eq!(varint::encoded_len(300), 2);
//! assert_eq!(varint::read(&out), Ok((300, 2)));
//! assert_eq!(varint::read(&out[..1]), Err(varint::Error::Truncated));
//! ```

/// The longest varint: 10 bytes (7 bits each; the 10th holds only bit 63).
pub const MAX_LEN: usize = 10;

/// Why bytes do not start with a varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes end inside it.
    #[error("the bytes end inside a varint")]
    Truncated,
    /// Longer than [`MAX_LEN`] bytes, or bits beyond 64.
    #[error("a varint longer than 10 bytes or beyond 64 bits")]
    TooLong,
}

/// Appends `v` as a varint.
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        // The low 7 bits with the continuation bit.
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// How many bytes [`put`] writes for `v`.
#[inline]
#[must_use]
pub fn encoded_len(v: u64) -> usize {
    // 7 bits per byte, at least one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// The varint at the start of `bytes`: its value and its length in bytes.
///
/// # Errors
/// [`Error::Truncated`] when `bytes` end inside it (more bytes may complete it),
/// [`Error::TooLong`] when it can never be one.
#[inline]
pub fn read(bytes: &[u8]) -> Result<(u64, usize), Error> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(MAX_LEN) {
        // The 10th byte may only hold the top bit of a u64.
        if i == MAX_LEN - 1 && b > 1 {
            return Err(Error::TooLong);
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok((value, i + 1));
        }
    }
    Err(if bytes.len() >= MAX_LEN {
        Error::TooLong
    } else {
        Error::Truncated
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_read_and_len_agree_with_prost() {
        for shift in 0..64 {
            for v in [1u64 << shift, (1u64 << shift) - 1, u64::MAX >> shift] {
                let mut out = Vec::new();
                put(&mut out, v);
                let mut theirs = Vec::new();
                prost::encoding::encode_varint(v, &mut theirs);
                assert_eq!(out, theirs, "{v}");
                assert_eq!(encoded_len(v), out.len(), "{v}");
                assert_eq!(encoded_len(v), prost::encoding::encoded_len_varint(v));
                assert_eq!(read(&out), Ok((v, out.len())), "{v}");
                assert_eq!(read(&out[..out.len() - 1]), Err(Error::Truncated), "{v}");
            }
        }
    }

    #[test]
    fn too_long_or_beyond_64_bits_is_refused_like_prost() {
        let beyond = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(read(&beyond), Err(Error::TooLong));
        assert!(prost::encoding::decode_varint(&mut beyond.as_slice()).is_err());
        assert_eq!(read(&[0x80; 11]), Err(Error::TooLong));
        assert_eq!(read(&[0x80; 10]), Err(Error::TooLong));
        assert_eq!(read(&[0x80; 9]), Err(Error::Truncated));
        assert_eq!(read(&[]), Err(Error::Truncated));
    }
}
