//! A watch body (a stream of byte chunks) turned into a stream of watch events.

use bytes::Bytes;
use futures::{Stream, StreamExt, stream};
use kcache::lister_watcher::{Error, WatchStream};

use super::{EventError, ItemDecoder, JsonFrameDecoder, decode_event};

/// Decodes a watch body into [`WatchEvent`](kube_core::WatchEvent)s as its chunks arrive.
///
/// The stream ends when the body ends. A failure ends it too, after one error item:
/// - the body fails (connection reset) or ends mid-frame → [`Error::transport`];
/// - a frame is not valid JSON or not a valid object, or exceeds `max_frame_size`, or is an
///   ERROR event whose object is not a `Status` → [`Error::decode`];
/// - an event type outside the protocol → [`Error::protocol`].
///
/// ERROR events from the server are not failures of the stream: they arrive as
/// `WatchEvent::Error(status)` and the stream carries on (the server closes it afterwards).
///
/// # Cancel safety
/// Dropping the stream drops the body, which closes the connection.
pub fn watch_events<K, D, S, E>(body: S, decoder: D, max_frame_size: usize) -> WatchStream<K>
where
    K: Send + 'static,
    D: ItemDecoder<K>,
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let state = State {
        body: Box::pin(body),
        frames: JsonFrameDecoder::new(max_frame_size),
        decoder,
        done: false,
    };
    stream::unfold(state, |mut st| async move {
        let item = st.next_item().await?;
        Some((item, st))
    })
    .boxed()
}

struct State<S, D> {
    body: std::pin::Pin<Box<S>>,
    frames: JsonFrameDecoder,
    decoder: D,
    done: bool,
}

impl<S, D> State<S, D> {
    async fn next_item<K, E>(&mut self) -> Option<Result<kube_core::WatchEvent<K>, Error>>
    where
        D: ItemDecoder<K>,
        S: Stream<Item = Result<Bytes, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if self.done {
            return None;
        }
        loop {
            match self.frames.next_frame() {
                Ok(Some(frame)) => {
                    let event = decode_event(&frame, &self.decoder);
                    if event.is_err() {
                        self.done = true;
                    }
                    return Some(event.map_err(event_error));
                }
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(Error::decode(e)));
                }
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.frames.push(&chunk),
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(Error::transport(WatchBodyError(e.into()))));
                }
                None => {
                    self.done = true;
                    return self.frames.finish().err().map(|e| Err(Error::transport(e)));
                }
            }
        }
    }
}

/// The event's error, safe to show: its message may quote the frame (an unknown type, an
/// unexpected string), which is the server's text.
fn event_error(e: EventError) -> Error {
    match e {
        EventError::UnknownType(_) | EventError::Missing(_) => {
            Error::protocol(crate::redact::display_safe(&e.to_string(), 512))
        }
        // An ERROR event ends the watch whatever it carries: not a dropped event.
        EventError::Json(_) | EventError::NotStatus(_) => crate::error::body::decode_error(e),
    }
}

/// The watch body failed while being read.
#[derive(Debug, thiserror::Error)]
#[error("watch stream broke: {0}")]
struct WatchBodyError(#[source] Box<dyn std::error::Error + Send + Sync>);
