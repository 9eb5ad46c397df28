//! Protobuf on the wire (feature `protobuf`, on by default), through [`kcache_proto`].
//!
//! For the k8s-openapi types of built-in kinds ([`kcache_proto::native_kind`]) decoded with
//! [`Typed`](crate::decode::Typed) or kept compact with
//! [`CompactDecoder`](crate::compact::CompactDecoder) (which keeps each object's protobuf
//! message), lists ask for
//! `application/vnd.kubernetes.protobuf, application/json` and watches for
//! `application/vnd.kubernetes.protobuf;stream=watch, application/json`, as client-go does.
//! The response's `Content-Type` decides the decoder, so a server that answers JSON (an
//! aggregated API server without protobuf, say) is decoded as JSON; a server that refuses the protobuf request with 406 is
//! asked again for JSON. Custom resources, `DynamicObject` and metadata-only requests stay
//! JSON.

use bytes::Bytes;
use futures::{Stream, StreamExt, stream};
use http::HeaderMap;
use kcache::lister_watcher::{Error, WatchStream};
use kcache_proto::{DecodeError, Envelope, WatchDecoder, WatchError, WatchEventType};
use kube_core::{ListMeta, ObjectList, TypeMeta, WatchEvent};

use kcache_proto::list::ListSplitter;

use crate::decode::ItemDecoder;
use crate::decode::{Items, malformed_list};

/// `Accept` of a list (or get) that prefers protobuf.
pub const ACCEPT_LIST: &str = "application/vnd.kubernetes.protobuf, application/json";
/// `Accept` of a watch that prefers protobuf.
pub const ACCEPT_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch, application/json";

/// Whether a response is protobuf (object, list, `Status` or watch stream).
pub(crate) fn is_protobuf(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|base| base.trim().eq_ignore_ascii_case(kcache_proto::CONTENT_TYPE))
}

/// A protobuf `Status` body as JSON (for the JSON error path), `None` if `body` is not an
/// enveloped `Status`.
pub(crate) fn status_as_json(body: &[u8]) -> Option<Vec<u8>> {
    if !body.starts_with(&kcache_proto::envelope::MAGIC) {
        return None;
    }
    let env = Envelope::decode(Bytes::copy_from_slice(body)).ok()?;
    let status = kcache_proto::decode_status(env).ok()?;
    let mut json = serde_json::to_value(status).ok()?;
    if let Some(o) = json.as_object_mut() {
        o.insert("kind".into(), "Status".into());
        o.insert("apiVersion".into(), "v1".into());
    }
    serde_json::to_vec(&json).ok()
}

fn decode_error(e: DecodeError) -> Error {
    match e {
        DecodeError::UnknownKind { .. }
        | DecodeError::WrongKind { .. }
        | DecodeError::UnsupportedContentType(_) => Error::protocol(e.to_string()),
        other => Error::decode(other),
    }
}

/// The object of an event or list item through `decoder` (which must take protobuf).
fn object<K, D: ItemDecoder<K>>(decoder: &D, env: Envelope) -> Result<K, Error> {
    match decoder.decode_protobuf(env) {
        Some(r) => r.map_err(decode_error),
        None => Err(Error::protocol(
            "the server answered protobuf to a request for JSON".to_owned(),
        )),
    }
}

/// A protobuf list body split while it arrives ([`kcache_proto::list::ListSplitter`]), each
/// item decoded by `decoder` as soon as it is complete (once the list's type came, which the
/// server sends first).
pub(crate) struct ListItems<D> {
    splitter: ListSplitter,
    decoder: D,
    /// The items' `apiVersion` and `kind`, once the list's type came.
    item_type: Option<(String, String)>,
    /// Items that came before the list's type.
    waiting: Vec<Bytes>,
}

impl<D> ListItems<D> {
    /// Splits a body whose items are at most `max_item` bytes.
    pub(crate) fn new(decoder: D, max_item: usize) -> Self {
        Self {
            splitter: ListSplitter::new(max_item),
            decoder,
            item_type: None,
            waiting: Vec::new(),
        }
    }

    fn decode_waiting<K>(&mut self, out: &mut Vec<K>) -> Result<(), Error>
    where
        D: ItemDecoder<K>,
    {
        if self.item_type.is_none()
            && let Some((api_version, kind)) = self.splitter.type_meta()
        {
            let item = kcache_proto::list::item_kind(kind).map_err(Error::decode)?;
            self.item_type = Some((api_version.to_owned(), item.to_owned()));
        }
        let Some((api_version, kind)) = &self.item_type else {
            return Ok(());
        };
        for raw in self.waiting.drain(..) {
            let env = Envelope {
                api_version: api_version.clone(),
                kind: kind.clone(),
                raw,
                content_type: String::new(),
            };
            out.push(object(&self.decoder, env)?);
        }
        Ok(())
    }
}

impl<K: Clone + Send + 'static, D: ItemDecoder<K>> Items<K> for ListItems<D> {
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<K>) -> Result<(), Error> {
        let items = self.splitter.push(chunk).map_err(|e| malformed_list(&e))?;
        self.waiting.extend(items);
        self.decode_waiting(out)
    }

    fn early_continue(&mut self) -> Option<Option<String>> {
        Some(self.splitter.list_meta_before_items()?.r#continue)
    }

    fn finish(mut self: Box<Self>, mut items: Vec<K>) -> Result<ObjectList<K>, Error> {
        let splitter = std::mem::replace(&mut self.splitter, ListSplitter::new(0));
        let env = splitter.finish().map_err(|e| malformed_list(&e))?;
        if self.item_type.is_none() {
            let item = kcache_proto::list::item_kind(&env.kind).map_err(Error::decode)?;
            self.item_type = Some((env.api_version.clone(), item.to_owned()));
        }
        self.decode_waiting(&mut items)?;
        let list = kcache_proto::list::RawList::decode_raw(env.raw).map_err(Error::decode)?;
        Ok(ObjectList {
            types: TypeMeta {
                api_version: env.api_version,
                kind: env.kind,
            },
            metadata: list_meta(list.metadata)?,
            items,
        })
    }
}

fn list_meta(
    pb: Option<kcache_proto::apimachinery::pkg::apis::meta::v1::ListMeta>,
) -> Result<ListMeta, Error> {
    use kcache_proto::convert::FromProto;
    pb.map(ListMeta::from_proto)
        .transpose()
        .map(Option::unwrap_or_default)
        .map_err(Error::decode)
}

/// One protobuf watch event as kube-core's [`WatchEvent`].
fn event<K, D: ItemDecoder<K>>(
    decoder: &D,
    ev: kcache_proto::RawWatchEvent,
) -> Result<WatchEvent<K>, Error> {
    Ok(match ev.event_type {
        WatchEventType::Added => WatchEvent::Added(object(decoder, ev.object)?),
        WatchEventType::Modified => WatchEvent::Modified(object(decoder, ev.object)?),
        WatchEventType::Deleted => WatchEvent::Deleted(object(decoder, ev.object)?),
        WatchEventType::Bookmark => {
            WatchEvent::Bookmark(kcache_proto::decode_object(ev.object).map_err(decode_error)?)
        }
        WatchEventType::Error => {
            let status = kcache_proto::decode_status(ev.object).map_err(decode_error)?;
            let json = serde_json::to_value(status).map_err(Error::decode)?;
            let mut status: kube_core::Status =
                serde_json::from_value(json).map_err(Error::decode)?;
            crate::redact::sanitize_status(&mut status);
            WatchEvent::Error(Box::new(status))
        }
    })
}

/// Decodes a protobuf watch body into [`WatchEvent`]s as its chunks arrive, with the same
/// contract as [`crate::decode::watch_events`]: the stream ends with the body, or after one
/// error item (transport for a broken or truncated body, decode for a bad frame or object,
/// protocol for an unknown event type or kind).
///
/// # Cancel safety
/// Dropping the stream drops the body, which closes the connection.
pub(crate) fn watch_events<K, D, S, E>(body: S, decoder: D, max_frame_size: usize) -> WatchStream<K>
where
    K: Send + 'static,
    D: ItemDecoder<K>,
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let state = (
        Box::pin(body),
        WatchDecoder::new(max_frame_size),
        decoder,
        false,
    );
    stream::unfold(state, |(mut body, mut frames, decoder, done)| async move {
        if done {
            return None;
        }
        loop {
            match frames.next_event() {
                Ok(Some(ev)) => {
                    let item = event(&decoder, ev);
                    let done = item.is_err();
                    return Some((item, (body, frames, decoder, done)));
                }
                Ok(None) => {}
                Err(e) => {
                    let err = match e {
                        WatchError::UnknownEventType(_) => Error::protocol(e.to_string()),
                        other => Error::decode(other),
                    };
                    return Some((Err(err), (body, frames, decoder, true)));
                }
            }
            match body.next().await {
                Some(Ok(chunk)) => frames.push(&chunk),
                Some(Err(e)) => {
                    let err = Error::transport(WatchBodyError(e.into()));
                    return Some((Err(err), (body, frames, decoder, true)));
                }
                None => {
                    let end = frames.finish().err().map(|e| Err(Error::transport(e)));
                    return end.map(|item| (item, (body, frames, decoder, true)));
                }
            }
        }
    })
    .boxed()
}

/// The watch body failed while being read.
#[derive(Debug, thiserror::Error)]
#[error("watch stream broke: {0}")]
struct WatchBodyError(#[source] Box<dyn std::error::Error + Send + Sync>);
