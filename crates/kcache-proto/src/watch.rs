//! Protobuf watch streams: frames of `meta.v1.WatchEvent { type, object: RawExtension { raw } }`
//! where `raw` is an enveloped object (`k8s\0` + `runtime.Unknown`).

use bytes::Bytes;
use prost::Message;

use crate::apimachinery::pkg::apis::meta::v1::WatchEvent;
use crate::envelope::{Envelope, EnvelopeError};
use crate::frame::{FrameDecoder, FrameError};

/// Errors decoding a protobuf watch stream.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// The stream could not be cut into frames.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A frame is not a valid `WatchEvent` message.
    #[error("malformed protobuf WatchEvent frame")]
    Malformed(#[source] prost::DecodeError),
    /// The event type is not one of ADDED, MODIFIED, DELETED, BOOKMARK, ERROR.
    #[error("unknown watch event type {0:?}")]
    UnknownEventType(String),
    /// The event's object is not a valid envelope.
    #[error("invalid object in watch event")]
    Object(#[source] EnvelopeError),
}

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// `ADDED`
    Added,
    /// `MODIFIED`
    Modified,
    /// `DELETED`
    Deleted,
    /// `BOOKMARK`: only the object's resourceVersion (and annotations) are meaningful.
    Bookmark,
    /// `ERROR`: the object is a `Status`.
    Error,
}

impl WatchEventType {
    /// Parses the wire name.
    pub fn from_wire(s: &str) -> Option<Self> {
        Some(match s {
            "ADDED" => Self::Added,
            "MODIFIED" => Self::Modified,
            "DELETED" => Self::Deleted,
            "BOOKMARK" => Self::Bookmark,
            "ERROR" => Self::Error,
            _ => return None,
        })
    }

    /// The wire name.
    pub fn as_wire(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
            Self::Bookmark => "BOOKMARK",
            Self::Error => "ERROR",
        }
    }
}

/// One watch event with its object still enveloped (decode it with [`crate::decode_object`]
/// or [`crate::decode_status`] for `ERROR`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawWatchEvent {
    /// Event type.
    pub event_type: WatchEventType,
    /// The object.
    pub object: Envelope,
}

impl RawWatchEvent {
    /// Decodes one frame's payload.
    ///
    /// # Errors
    ///
    /// [`WatchError::Malformed`], [`WatchError::UnknownEventType`] or [`WatchError::Object`].
    pub fn decode(frame: Bytes) -> Result<Self, WatchError> {
        let ev = WatchEvent::decode(frame).map_err(WatchError::Malformed)?;
        let ty = ev.r#type.unwrap_or_default();
        let event_type = WatchEventType::from_wire(&ty).ok_or(WatchError::UnknownEventType(ty))?;
        let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
        let object = Envelope::decode(raw).map_err(WatchError::Object)?;
        Ok(Self { event_type, object })
    }

    /// Encodes the event as one frame payload (no length prefix), for tests and servers.
    pub fn encode_to_vec(&self) -> Vec<u8> {
        WatchEvent {
            r#type: Some(self.event_type.as_wire().to_owned()),
            object: Some(crate::apimachinery::pkg::runtime::RawExtension {
                raw: Some(self.object.encode_to_bytes()),
            }),
        }
        .encode_to_vec()
    }
}

/// Turns a protobuf watch stream, fed as chunks split anywhere, into [`RawWatchEvent`]s.
///
/// ```
/// use kcache_proto::{WatchDecoder, frame::encode_frame, WatchEventType, RawWatchEvent, Envelope};
///
/// let ev = RawWatchEvent {
///     event_type: WatchEventType::Added,
///     object: Envelope { api_version: "v1".into(), kind: "Pod".into(), ..Default::default() },
/// };
/// let mut stream = Vec::new();
/// encode_frame(&ev.encode_to_vec(), &mut stream);
///
/// let mut dec = WatchDecoder::default();
/// let (a, b) = stream.split_at(7);
/// dec.push(a);
/// assert!(dec.next_event()?.is_none());
/// dec.push(b);
/// assert_eq!(dec.next_event()?, Some(ev));
/// dec.finish()?;
/// # Ok::<(), kcache_proto::WatchError>(())
/// ```
#[derive(Debug, Default)]
pub struct WatchDecoder {
    frames: FrameDecoder,
}

impl WatchDecoder {
    /// A decoder with a frame size limit of `max_frame_len` bytes.
    pub fn new(max_frame_len: usize) -> Self {
        Self {
            frames: FrameDecoder::new(max_frame_len),
        }
    }

    /// Appends a chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.frames.push(chunk);
    }

    /// The next complete event, `Ok(None)` when more input is needed.
    ///
    /// # Errors
    ///
    /// [`WatchError`]; after a frame error the stream cannot continue, after an error in one
    /// event the next events can still be read.
    pub fn next_event(&mut self) -> Result<Option<RawWatchEvent>, WatchError> {
        match self.frames.next_frame()? {
            Some(frame) => RawWatchEvent::decode(frame).map(Some),
            None => Ok(None),
        }
    }

    /// Call at the end of the stream.
    ///
    /// # Errors
    ///
    /// [`FrameError::Truncated`] if the stream stopped inside a frame.
    pub fn finish(&self) -> Result<(), WatchError> {
        Ok(self.frames.finish()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_event_type_is_an_error() {
        let frame = WatchEvent {
            r#type: Some("EXPLODED".into()),
            object: None,
        }
        .encode_to_vec();
        let err = RawWatchEvent::decode(Bytes::from(frame)).unwrap_err();
        assert!(
            matches!(err, WatchError::UnknownEventType(ref t) if t == "EXPLODED"),
            "{err}"
        );
    }

    #[test]
    fn event_without_object_is_an_object_error() {
        let frame = WatchEvent {
            r#type: Some("ADDED".into()),
            object: None,
        }
        .encode_to_vec();
        let err = RawWatchEvent::decode(Bytes::from(frame)).unwrap_err();
        assert!(
            matches!(err, WatchError::Object(EnvelopeError::Truncated { len: 0 })),
            "{err}"
        );
    }

    #[test]
    fn garbage_frame_is_malformed() {
        let err = RawWatchEvent::decode(Bytes::from_static(&[0xff, 0xff, 0xff])).unwrap_err();
        assert!(matches!(err, WatchError::Malformed(_)), "{err}");
    }
}
