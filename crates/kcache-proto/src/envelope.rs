//! The `k8s\0` envelope: every protobuf object, list and `Status` the API server sends is the
//! 4-byte magic `6b 38 73 00` followed by a `runtime.Unknown` message carrying the type
//! (`typeMeta {apiVersion, kind}`), the object's own protobuf bytes (`raw`) and two strings,
//! `contentEncoding` and `contentType`, that the server sends empty.

use bytes::{Buf, Bytes};
use prost::Message;

use crate::apimachinery::pkg::runtime::{TypeMeta, Unknown};

/// The 4 bytes before every enveloped object.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// Errors decoding an envelope.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The body is shorter than the magic.
    #[error("protobuf body truncated: {len} bytes, shorter than the 4-byte k8s\\0 magic")]
    Truncated {
        /// Bytes received.
        len: usize,
    },
    /// The body does not start with `k8s\0`.
    #[error("protobuf body does not start with the k8s\\0 magic (found {found:02x?})")]
    WrongMagic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// The `runtime.Unknown` message is not valid protobuf.
    #[error("malformed runtime.Unknown envelope")]
    Malformed(#[source] prost::DecodeError),
    /// The envelope names a content encoding (compression) this crate does not implement.
    #[error("unsupported envelope contentEncoding {0:?}")]
    UnsupportedEncoding(String),
}

/// A decoded envelope: the object's type and its protobuf bytes (a cheap slice of the body).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Envelope {
    /// `apiVersion` of the object, e.g. `v1` or `apps/v1`.
    pub api_version: String,
    /// `kind` of the object, e.g. `Pod`, `PodList`, `Status`.
    pub kind: String,
    /// The object's own protobuf message.
    pub raw: Bytes,
    /// `contentType` of `raw`; empty means protobuf.
    pub content_type: String,
}

impl Envelope {
    /// Decodes `k8s\0` + `runtime.Unknown`. `raw` shares `body`'s buffer (no copy).
    ///
    /// # Errors
    ///
    /// [`EnvelopeError`] for a short body, a wrong magic, invalid protobuf or a non-empty
    /// `contentEncoding`.
    pub fn decode(mut body: Bytes) -> Result<Self, EnvelopeError> {
        if body.len() < MAGIC.len() {
            return Err(EnvelopeError::Truncated { len: body.len() });
        }
        let found: [u8; 4] = [body[0], body[1], body[2], body[3]];
        if found != MAGIC {
            return Err(EnvelopeError::WrongMagic { found });
        }
        body.advance(MAGIC.len());
        let unknown = Unknown::decode(body).map_err(EnvelopeError::Malformed)?;
        let encoding = unknown.content_encoding.unwrap_or_default();
        if !encoding.is_empty() {
            return Err(EnvelopeError::UnsupportedEncoding(encoding));
        }
        let type_meta = unknown.type_meta.unwrap_or_default();
        Ok(Self {
            api_version: type_meta.api_version.unwrap_or_default(),
            kind: type_meta.kind.unwrap_or_default(),
            raw: unknown.raw.unwrap_or_default(),
            content_type: unknown.content_type.unwrap_or_default(),
        })
    }

    /// An envelope around `msg` (for tests, benchmarks and servers).
    pub fn for_message(api_version: &str, kind: &str, msg: &impl Message) -> Self {
        Self {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            raw: Bytes::from(msg.encode_to_vec()),
            content_type: String::new(),
        }
    }

    /// Encodes the envelope as the server does (magic, then `runtime.Unknown` with empty
    /// `contentEncoding` and `contentType` present).
    pub fn encode_to_bytes(&self) -> Bytes {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(self.api_version.clone()),
                kind: Some(self.kind.clone()),
            }),
            raw: Some(self.raw.clone()),
            content_encoding: Some(String::new()),
            content_type: Some(self.content_type.clone()),
        };
        let mut out = Vec::with_capacity(MAGIC.len() + unknown.encoded_len());
        out.extend_from_slice(&MAGIC);
        unknown.encode(&mut out).expect("a Vec grows as needed");
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips_and_shares_the_body() {
        let env = Envelope {
            api_version: "v1".into(),
            kind: "Pod".into(),
            raw: Bytes::from_static(b"\x0a\x00"),
            content_type: String::new(),
        };
        let body = env.encode_to_bytes();
        assert_eq!(&body[..4], b"k8s\0");
        assert_eq!(Envelope::decode(body).unwrap(), env);
    }

    #[test]
    fn wrong_magic_is_an_error() {
        let err = Envelope::decode(Bytes::from_static(b"{\"kind\":1}")).unwrap_err();
        assert!(
            matches!(err, EnvelopeError::WrongMagic { found } if &found == b"{\"ki"),
            "{err}"
        );
    }

    #[test]
    fn body_shorter_than_magic_is_truncated() {
        assert!(matches!(
            Envelope::decode(Bytes::from_static(b"k8")),
            Err(EnvelopeError::Truncated { len: 2 })
        ));
    }

    #[test]
    fn malformed_unknown_is_an_error() {
        // Field 2 (raw) claims 100 bytes but none follow.
        let err = Envelope::decode(Bytes::from_static(b"k8s\0\x12\x64")).unwrap_err();
        assert!(matches!(err, EnvelopeError::Malformed(_)), "{err}");
    }

    #[test]
    fn content_encoding_is_refused() {
        let unknown = Unknown {
            content_encoding: Some("gzip".into()),
            ..Default::default()
        };
        let mut body = MAGIC.to_vec();
        unknown.encode(&mut body).unwrap();
        let err = Envelope::decode(Bytes::from(body)).unwrap_err();
        assert!(
            matches!(err, EnvelopeError::UnsupportedEncoding(ref e) if e == "gzip"),
            "{err}"
        );
    }
}
