//! List responses decoded while they arrive: each chunk of the body is split into items
//! (JSON: [`crate::decode::ListSplitter`]; protobuf: [`kcache_proto::list::ListSplitter`]) on
//! the task that reads the body, and each item is decoded as soon as it is complete. The whole
//! body is never held (the RV=0 list of the watch cache is one response of hundreds of
//! megabytes), and the decode overlaps the transfer: the HTTP/2 connection's own task keeps
//! receiving (within the stream's flow-control window) while this one decodes. The items
//! go to the caller's sink one by one as they are decoded (`ListerWatcher::list_each`: the
//! reflector swaps an unchanged one for its cached copy at once) or become the list at the end;
//! either way the reflector applies them as one replace.
//!
//! JSON bytes reach the splitter in chunks of at least [`SPLIT_CHUNK`] (256 KiB), gathered
//! from the body's frames: an item cut across two chunks costs the splitter a failed parse, a
//! byte-by-byte scan and a second parse (10,000 pods of 7.5 KB: 15.0 µs an item when split
//! from 16 KiB chunks, 11.0 from 64 KiB, 10.0 from 256 KiB — the decode bench's "one list
//! body" section; BENCHMARKS.md, 2026-12-05). Protobuf items are length-prefixed, so protobuf chunks go on as
//! they come (inflated gzip bytes are gathered either way).
//!
//! The decode runs on the runtime's workers, not on a thread of its own, so that the listed
//! objects are allocated where the watch events that replace them later are: with glibc, memory
//! freed into a thread's arena is reused only by allocations on threads of that arena, and a
//! list decoded on a blocking-pool thread left every update taking fresh memory until each
//! listed object had been replaced once (10,000 pods, 5,000 updates: +53 MB, 2.7 page faults
//! an event; BENCHMARKS.md, 2026-12-05). A chunk handed to the splitter is at most
//! [`SPLIT_CHUNK`] plus one HTTP/2 frame (16 KB, about 250 KB once inflated) — a quarter of a
//! millisecond of decoding — and the task gives way through tokio's coop budget between
//! frames, so the workers stay responsive.
//!
//! Lists ask for gzip (`Accept-Encoding: gzip`), as client-go's Go transport does by default:
//! kube-apiserver then compresses an answer whose first write passes 128 KB, at level 1. A
//! gzip body is inflated as it arrives, before the splitter; a body that ends inside the gzip
//! stream is an error, never a short list.

use std::io::Write;

use bytes::Bytes;
use http_body_util::BodyExt;
use kcache::lister_watcher::Error as LwError;
use kube_core::ObjectList;
use tokio::sync::oneshot;

use super::{BodyError, Client};
use crate::decode::{ItemDecoder, Items, malformed_list as malformed};

/// Bytes gathered before they go to the splitter (JSON, and any inflated body), once the
/// list's continue token has been told: fewer items cut across two chunks, which take the
/// splitter's slower path (see the module docs).
const SPLIT_CHUNK: usize = 256 * 1024;

/// Where decoded items go: handed on one by one, or gathered into the list.
pub(crate) type ItemSink<'a, K> = Option<&'a mut (dyn FnMut(K) + Send)>;

/// The splitter's side of a list body: the items decoded so far (or handed to the sink as
/// they are decoded), the continue token told once, the bytes seen after content decoding.
struct Splitting<'a, K> {
    items: Box<dyn Items<K>>,
    out: Vec<K>,
    sink: ItemSink<'a, K>,
    next: Option<oneshot::Sender<String>>,
    size: u64,
    /// Bytes not yet handed to the splitter (gathered, see [`SPLIT_CHUNK`]).
    pending: Vec<u8>,
}

impl<'a, K: Clone + 'static> Splitting<'a, K> {
    fn new(
        items: Box<dyn Items<K>>,
        next: Option<oneshot::Sender<String>>,
        sink: ItemSink<'a, K>,
    ) -> Self {
        Self {
            items,
            out: Vec::new(),
            sink,
            next,
            size: 0,
            pending: Vec::new(),
        }
    }

    /// Splits and decodes one chunk; tells `next` the list's continue token as soon as the
    /// splitter has read it.
    fn push(&mut self, chunk: &Bytes) -> Result<(), LwError> {
        self.size += chunk.len() as u64;
        self.items.push(chunk, &mut self.out)?;
        if let Some(sink) = &mut self.sink {
            self.out.drain(..).for_each(&mut **sink);
        }
        if self.next.is_some()
            && let Some(token) = self.items.early_continue()
            && let (Some(next), Some(token)) = (self.next.take(), token)
        {
            let _ = next.send(token);
        }
        Ok(())
    }

    /// Takes the body's next bytes (inflated): holds them until [`SPLIT_CHUNK`] bytes are
    /// held, then hands them to the splitter; at once while the continue token has not been
    /// told.
    fn gather(&mut self, bytes: &[u8]) -> Result<(), LwError> {
        if self.pending.capacity() == 0 {
            self.pending.reserve_exact(SPLIT_CHUNK);
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= SPLIT_CHUNK || self.next.is_some() {
            self.push_pending()?;
        }
        Ok(())
    }

    /// Takes one frame of a plain (not gzip) body: gathered when the format wants whole
    /// items (JSON), handed on as it is otherwise, or when nothing is held and it is big
    /// enough or the continue token is awaited.
    fn frame(&mut self, chunk: &Bytes) -> Result<(), LwError> {
        let direct = self.pending.is_empty() && (chunk.len() >= SPLIT_CHUNK || self.next.is_some());
        if direct || !self.items.gathers() {
            self.push(chunk)
        } else {
            self.gather(chunk)
        }
    }

    /// Hands the bytes held back to the splitter.
    fn push_pending(&mut self) -> Result<(), LwError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.pending));
        self.push(&chunk)
    }

    /// After the body: the list, and the body's size after content decoding.
    fn finish(mut self) -> Result<(ObjectList<K>, u64), LwError> {
        self.push_pending()?;
        Ok((self.items.finish(self.out)?, self.size))
    }
}

/// Inflated bytes arrive here and are gathered ([`Splitting::gather`]). A decode error goes
/// through the inflater inside the `io::Error` (see [`gzip_error`]).
impl<K: Clone + 'static> Write for Splitting<'_, K> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.gather(buf).map_err(std::io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where a list body's chunks go: straight to the splitter, or through gzip first.
enum Feed<'a, K: Clone + 'static> {
    Plain(Splitting<'a, K>),
    Gzip(Box<flate2::write::MultiGzDecoder<Splitting<'a, K>>>),
}

impl<'a, K: Clone + 'static> Feed<'a, K> {
    fn new(
        items: Box<dyn Items<K>>,
        next: Option<oneshot::Sender<String>>,
        sink: ItemSink<'a, K>,
        gzip: bool,
    ) -> Self {
        let splitting = Splitting::new(items, next, sink);
        if gzip {
            Self::Gzip(Box::new(flate2::write::MultiGzDecoder::new(splitting)))
        } else {
            Self::Plain(splitting)
        }
    }

    fn push(&mut self, chunk: &Bytes) -> Result<(), LwError> {
        match self {
            Self::Plain(splitting) => splitting.frame(chunk),
            Self::Gzip(inflate) => inflate.write_all(chunk).map_err(gzip_error),
        }
    }

    /// After the last chunk: the list and the body's size after content decoding.
    fn finish(self) -> Result<(ObjectList<K>, u64), LwError> {
        match self {
            Self::Plain(splitting) => splitting.finish(),
            Self::Gzip(inflate) => inflate.finish().map_err(gzip_error)?.finish(),
        }
    }
}

/// The error of a failed write into the inflater: the splitter's, if it failed, else gzip's.
fn gzip_error(e: std::io::Error) -> LwError {
    if !e.get_ref().is_some_and(|inner| inner.is::<LwError>()) {
        return LwError::decode(format!("gzip list body: {e}"));
    }
    match e.into_inner().map(|inner| inner.downcast::<LwError>()) {
        Some(Ok(decode)) => *decode,
        // Not reached: the inner error was just checked to be the splitter's.
        _ => LwError::decode("list body: undecodable items"),
    }
}

/// Whether `headers` say the body is gzip; an encoding we did not ask for is an error.
fn is_gzip(headers: &http::HeaderMap) -> Result<bool, LwError> {
    match headers.get(http::header::CONTENT_ENCODING) {
        None => Ok(false),
        Some(v) if v.as_bytes().eq_ignore_ascii_case(b"gzip") => Ok(true),
        Some(v) if v.as_bytes().eq_ignore_ascii_case(b"identity") => Ok(false),
        Some(v) => Err(LwError::decode(format!(
            "list body in Content-Encoding {}, which was not asked for (only gzip is)",
            crate::redact::display_safe(&String::from_utf8_lossy(v.as_bytes()), 64)
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

/// JSON: items split by [`crate::decode::ListSplitter`], each decoded by `decoder`.
struct JsonItems<D> {
    splitter: crate::decode::ListSplitter,
    decoder: D,
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

    fn gathers(&self) -> bool {
        true
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
    /// answered) as soon as it is read. With a `sink`, each item goes to it as soon as it is
    /// decoded, and the list comes back without items.
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
        sink: ItemSink<'_, K>,
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
        let mut feed = Feed::new(items, next.take(), sink, gzip);
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| LwError::transport(BodyError(e.to_string())))?;
            if let Ok(data) = frame.into_data() {
                feed.push(&data)?;
            }
            // A chunk decodes in well under a millisecond; the budget lets other tasks of this
            // worker run between chunks when the body is always ready.
            tokio::task::coop::consume_budget().await;
        }
        let (list, size) = feed.finish()?;
        Ok(SplitList {
            list,
            size,
            protobuf,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// zlib-rs detects the CPU's features (SIMD CRC-32 and copies) only with its `std`
    /// feature, which flate2 turns on with `runtime_detection`; without it every gzip list is
    /// inflated and checked by the portable fallbacks (measured: a third of the CPU of reading
    /// a gzip list). Read from this crate's own build graph, dev-dependencies left out: a
    /// test build's (criterion's `png`) would turn it on by itself.
    #[test]
    fn gzip_inflate_is_built_with_cpu_feature_detection() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = std::process::Command::new(cargo)
            .args(["tree", "--offline", "-p", "kcache-client", "-i", "zlib-rs"])
            .args(["-e", "normal,build,features", "--manifest-path"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
            .output()
            .expect("cargo tree runs");
        assert!(out.status.success(), "cargo tree failed");
        let tree = String::from_utf8_lossy(&out.stdout);
        assert!(
            tree.contains(r#"zlib-rs feature "std""#),
            "zlib-rs is built without std:\n{tree}"
        );
    }

    /// Records the size of every chunk it is handed; tells the continue token `c` once it has
    /// been handed `continue_after` chunks.
    struct Recording {
        sizes: Arc<Mutex<Vec<usize>>>,
        gathers: bool,
        continue_after: usize,
    }

    impl Items<u8> for Recording {
        fn push(&mut self, chunk: &Bytes, _out: &mut Vec<u8>) -> Result<(), LwError> {
            self.sizes.lock().unwrap().push(chunk.len());
            Ok(())
        }

        fn early_continue(&mut self) -> Option<Option<String>> {
            (self.sizes.lock().unwrap().len() >= self.continue_after).then(|| Some("c".into()))
        }

        fn finish(self: Box<Self>, _items: Vec<u8>) -> Result<ObjectList<u8>, LwError> {
            unreachable!("the tests end with push_pending")
        }

        fn gathers(&self) -> bool {
            self.gathers
        }
    }

    /// The chunk sizes the splitter is handed for 40 plain frames of 16 KiB.
    fn chunks_for_frames(
        gathers: bool,
        continue_after: Option<usize>,
    ) -> (Vec<usize>, Option<String>) {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let items = Recording {
            sizes: sizes.clone(),
            gathers,
            continue_after: continue_after.unwrap_or(0),
        };
        let (tx, mut rx) = oneshot::channel();
        let mut splitting = Splitting::new(Box::new(items), continue_after.map(|_| tx), None);
        let frame = Bytes::from(vec![b' '; 16 * 1024]);
        for _ in 0..40 {
            splitting.frame(&frame).unwrap();
        }
        splitting.push_pending().unwrap();
        assert_eq!(splitting.size, 40 * 16 * 1024);
        let sizes = sizes.lock().unwrap().clone();
        (sizes, rx.try_recv().ok())
    }

    #[test]
    fn json_frames_reach_the_splitter_gathered_into_chunks_of_256_kib() {
        let (sizes, _) = chunks_for_frames(true, None);
        assert_eq!(
            sizes,
            [SPLIT_CHUNK, SPLIT_CHUNK, 40 * 16 * 1024 - 2 * SPLIT_CHUNK]
        );
    }

    #[test]
    fn protobuf_frames_reach_the_splitter_as_they_come() {
        let (sizes, _) = chunks_for_frames(false, None);
        assert_eq!(sizes, [16 * 1024; 40]);
    }

    #[test]
    fn frames_go_on_at_once_until_the_continue_token_is_told() {
        let (sizes, token) = chunks_for_frames(true, Some(2));
        assert_eq!(token.as_deref(), Some("c"));
        assert_eq!(sizes[..2], [16 * 1024, 16 * 1024]);
        assert_eq!(sizes[2..], [SPLIT_CHUNK, SPLIT_CHUNK, 6 * 16 * 1024]);
    }
}
