//! List responses decoded while they arrive: the body's chunks go, in batches of about
//! 256 KB, to a blocking thread that splits items out (JSON: [`crate::decode::ListSplitter`];
//! protobuf: [`kcache_proto::list::ListSplitter`]) and decodes each one as soon as it is
//! complete. The whole body is never held (the RV=0 list of the watch cache is one response of
//! hundreds of megabytes), and the decode overlaps the transfer. The items become the list only
//! at the end, so the reflector still applies them as one replace.
//!
//! Lists ask for gzip (`Accept-Encoding: gzip`), as client-go's Go transport does by default:
//! kube-apiserver then compresses an answer whose first write passes 128 KB, at level 1. A
//! gzip body is inflated on the same decoding thread as it arrives, before the splitter; a
//! body that ends inside the gzip stream is an error, never a short list.

use std::{collections::VecDeque, io::Read};

use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use kcache::lister_watcher::Error as LwError;
use kube_core::ObjectList;
use tokio::sync::oneshot;

use super::{BodyError, Client};
use crate::decode::ItemDecoder;

/// The body's chunks go to the decoding thread in batches of at least this many bytes: one
/// hand-over (and wake-up) per batch rather than per ~16 KB chunk. Profiled at 10,000 pods,
/// sending every chunk spent about 20% of the sync's CPU in the channel and the thread
/// wake-ups around it.
const SPLIT_BATCH_BYTES: usize = 256 * 1024;

/// Batches in flight to the decoding thread: enough to keep it busy, few enough that a slow
/// decoder holds the transfer back (at most about 1.25 MB buffered) rather than buffering the
/// body.
const SPLIT_CHANNEL_BATCHES: usize = 4;

/// Inflated bytes handed to the splitter at a time.
const GUNZIP_CHUNK: usize = 64 * 1024;

/// The body's batches as a [`Read`], on the decoding thread (blocks for the next batch);
/// counts the bytes that came in.
struct Batches {
    rx: tokio::sync::mpsc::Receiver<Vec<Bytes>>,
    pending: VecDeque<Bytes>,
    size: u64,
}

impl Batches {
    /// The next received chunk, `None` once the body has ended.
    fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                return Some(chunk);
            }
            let batch = self.rx.blocking_recv()?;
            self.size += batch.iter().map(|c| c.len() as u64).sum::<u64>();
            self.pending.extend(batch);
        }
    }
}

impl Read for Batches {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(mut chunk) = self.next_chunk() else {
            return Ok(0);
        };
        let n = chunk.len().min(buf.len());
        buf[..n].copy_from_slice(&chunk[..n]);
        chunk.advance(n);
        if !chunk.is_empty() {
            self.pending.push_front(chunk);
        }
        Ok(n)
    }
}

/// Feeds every chunk of `body` to `items` (inflating it first when `gzip`); returns the list
/// and the body's size after content decoding (what [`crate::WireStats::list_bytes`] counts).
fn split_body<K: Clone + 'static>(
    mut body: Batches,
    mut items: Box<dyn Items<K>>,
    gzip: bool,
    mut next: Option<oneshot::Sender<String>>,
) -> Result<(ObjectList<K>, u64), LwError> {
    let mut out = Vec::new();
    // Tells `next` the list's continue token as soon as `items` has read it.
    let mut tell = |items: &mut Box<dyn Items<K>>| {
        if next.is_some()
            && let Some(token) = items.early_continue()
            && let (Some(next), Some(token)) = (next.take(), token)
        {
            let _ = next.send(token);
        }
    };
    if gzip {
        let reader = std::io::BufReader::with_capacity(GUNZIP_CHUNK, &mut body);
        let mut inflate = flate2::bufread::MultiGzDecoder::new(reader);
        let mut buf = vec![0u8; GUNZIP_CHUNK];
        let mut inflated = 0u64;
        loop {
            let n = inflate
                .read(&mut buf)
                .map_err(|e| LwError::decode(format!("gzip list body: {e}")))?;
            if n == 0 {
                break;
            }
            inflated += n as u64;
            items.push(&Bytes::copy_from_slice(&buf[..n]), &mut out)?;
            tell(&mut items);
        }
        return Ok((items.finish(out)?, inflated));
    }
    while let Some(chunk) = body.next_chunk() {
        items.push(&chunk, &mut out)?;
        tell(&mut items);
    }
    Ok((items.finish(out)?, body.size))
}

/// Whether `headers` say the body is gzip; an encoding we did not ask for is an error.
fn is_gzip(headers: &http::HeaderMap) -> Result<bool, LwError> {
    match headers.get(http::header::CONTENT_ENCODING) {
        None => Ok(false),
        Some(v) if v.as_bytes().eq_ignore_ascii_case(b"gzip") => Ok(true),
        Some(v) if v.as_bytes().eq_ignore_ascii_case(b"identity") => Ok(false),
        Some(v) => Err(LwError::decode(format!(
            "list body in Content-Encoding {}, which was not asked for (only gzip is)",
            super::display_safe(&String::from_utf8_lossy(v.as_bytes()), 64)
        ))),
    }
}

/// A list decoded by [`Client::send_split_list`].
pub(crate) struct SplitList<K: Clone> {
    /// The list, items included.
    pub list: ObjectList<K>,
    /// The body's size in bytes.
    pub size: u64,
    /// Whether the server answered in protobuf.
    pub protobuf: bool,
}

/// One format's splitting and decoding, run on the blocking thread.
pub(crate) trait Items<K: Clone>: Send + 'static {
    /// Takes one chunk, decoding the items it completed into `out`.
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<K>) -> Result<(), LwError>;
    /// Once the list's metadata has been read, before its items are all read: its `continue`
    /// token, if it has one (see [`kcache::ListerWatcher::list_telling_continue`]); `None`
    /// while the metadata has not come. Asked after every chunk until it answers.
    fn early_continue(&mut self) -> Option<Option<String>>;
    /// After the last chunk: the list's envelope decoded, with `items` as its items.
    fn finish(self: Box<Self>, items: Vec<K>) -> Result<ObjectList<K>, LwError>;
}

/// JSON: items split by [`crate::decode::ListSplitter`], each decoded by `decoder`.
struct JsonItems<D> {
    splitter: crate::decode::ListSplitter,
    decoder: D,
}

/// A list body that is not a list.
pub(crate) fn malformed(e: &dyn std::fmt::Display) -> LwError {
    LwError::decode(format!("list body: {e}"))
}

/// Decodes each item the splitter hands over into `out`; keeps the first error.
struct JsonSink<'a, K, D> {
    decoder: &'a D,
    out: &'a mut Vec<K>,
    error: Option<LwError>,
}

impl<K, D: ItemDecoder<K>> crate::decode::ItemSink for JsonSink<'_, K, D> {
    fn whole(&mut self, data: &[u8]) -> Option<usize> {
        if self.error.is_some() {
            return None;
        }
        let (item, len) = self.decoder.decode_json_prefix(data)?;
        self.out.push(item);
        Some(len)
    }

    fn item(&mut self, item: Bytes) {
        if self.error.is_some() {
            return;
        }
        match self.decoder.decode_json_item(item) {
            Ok(item) => self.out.push(item),
            Err(e) => self.error = Some(super::decode_error(e)),
        }
    }
}

impl<K: Clone + Send + 'static, D: ItemDecoder<K>> Items<K> for JsonItems<D> {
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<K>) -> Result<(), LwError> {
        let mut sink = JsonSink {
            decoder: &self.decoder,
            out,
            error: None,
        };
        self.splitter
            .push_into(chunk, &mut sink)
            .map_err(|e| malformed(&e))?;
        sink.error.map_or(Ok(()), Err)
    }

    fn early_continue(&mut self) -> Option<Option<String>> {
        let mut head = self.splitter.envelope_before_items()?.to_vec();
        head.extend_from_slice(b"]}");
        let list = crate::decode::decode_list::<K, D>(&head, &self.decoder);
        Some(list.ok().and_then(|l| l.metadata.continue_))
    }

    fn finish(self: Box<Self>, items: Vec<K>) -> Result<ObjectList<K>, LwError> {
        let envelope = self.splitter.finish().map_err(|e| malformed(&e))?;
        let mut list: ObjectList<K> =
            crate::decode::decode_list(&envelope, &self.decoder).map_err(super::decode_error)?;
        list.items = items;
        Ok(list)
    }
}

impl Client {
    /// Sends a list request and decodes its answer, JSON or protobuf as the `Content-Type`
    /// says, while it arrives (see the module docs); items of protobuf lists may be at most
    /// `max_item` bytes. The list's continue token goes to `next` (taken once the server has
    /// answered) as soon as it is read.
    ///
    /// # Errors
    /// As [`Client::send`]; [`LwError::transport`] when the body breaks off, decode errors for
    /// a malformed list or item.
    pub(crate) async fn send_split_list<K, D>(
        &self,
        request: http::Request<Vec<u8>>,
        decoder: D,
        max_item: usize,
        next: &mut Option<oneshot::Sender<String>>,
    ) -> Result<SplitList<K>, LwError>
    where
        K: Clone + Send + 'static,
        D: ItemDecoder<K>,
    {
        let mut request = request;
        request
            .headers_mut()
            .entry(http::header::ACCEPT_ENCODING)
            .or_insert(http::HeaderValue::from_static("gzip"));
        let response = self.send(request, "list").await?;
        let gzip = is_gzip(response.headers())?;
        #[cfg(feature = "protobuf")]
        let protobuf = crate::protobuf::is_protobuf(response.headers());
        #[cfg(not(feature = "protobuf"))]
        let protobuf = false;
        let items: Box<dyn Items<K>> = if protobuf {
            #[cfg(feature = "protobuf")]
            {
                Box::new(crate::protobuf::ListItems::new(decoder, max_item))
            }
            #[cfg(not(feature = "protobuf"))]
            unreachable!("protobuf is never asked for without the feature")
        } else {
            let _ = max_item;
            Box::new(JsonItems {
                splitter: crate::decode::ListSplitter::new(),
                decoder,
            })
        };
        let next = next.take();
        let mut body = response.into_body();
        let (tx, rx) = tokio::sync::mpsc::channel::<Vec<Bytes>>(SPLIT_CHANNEL_BATCHES);
        let worker = tokio::task::spawn_blocking(move || {
            let body = Batches {
                rx,
                pending: VecDeque::new(),
                size: 0,
            };
            split_body(body, items, gzip, next)
        });
        let mut broke = None;
        let mut batch = Vec::new();
        let mut batched = 0;
        let mut first = true;
        loop {
            let last = match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        batched += data.len();
                        batch.push(data);
                    }
                    false
                }
                Some(Err(e)) => {
                    broke = Some(LwError::transport(BodyError(e.to_string())));
                    break;
                }
                None => true,
            };
            // The first bytes go at once: they hold the list's metadata, whose continue token
            // lets the next page be asked for while this one arrives.
            if (last || first || batched >= SPLIT_BATCH_BYTES) && !batch.is_empty() {
                batched = 0;
                first = false;
                if tx.send(std::mem::take(&mut batch)).await.is_err() {
                    break; // the decoder failed: its error is the answer
                }
            }
            if last {
                break;
            }
        }
        drop(tx);
        let decoded = worker
            .await
            .map_err(|e| LwError::decode(format!("list decoding task failed: {e}")))?;
        match (broke, decoded) {
            (Some(e), _) => Err(e),
            (None, result) => result.map(|(list, size)| SplitList {
                list,
                size,
                protobuf,
            }),
        }
    }
}
