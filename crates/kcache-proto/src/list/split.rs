//! A protobuf list body split into its items while it arrives.
//!
//! A list body is `k8s\0` + `runtime.Unknown { typeMeta = 1; raw = 2; contentEncoding = 3;
//! contentType = 4 }`, and `raw` is `XList { metadata = 1; repeated items = 2 }`. The RV=0 list
//! of kube-apiserver's watch cache is one such body of hundreds of megabytes. [`ListSplitter`]
//! takes it chunk by chunk and hands back each item's message as soon as its last byte came,
//! keeping only the item in progress and the small fields around the items. At the end,
//! [`ListSplitter::finish`] gives the list's [`Envelope`] with the items left out, from which
//! [`RawList::decode_raw`](super::RawList::decode_raw) reads the list metadata.

use bytes::{Bytes, BytesMut};
use prost::Message;

use crate::apimachinery::pkg::apis::meta::v1::ListMeta;
use crate::apimachinery::pkg::runtime::TypeMeta;
use crate::envelope::{Envelope, EnvelopeError, MAGIC};

/// The fields kept besides the items (type, list metadata, the two empty strings) may take
/// this many bytes in all; more is not a list the API server sends.
const MAX_KEPT: usize = 1 << 20;

/// A field header (tag, then a length or a varint value) is at most this long.
const MAX_HEADER: usize = 20;

/// Why a body is not a protobuf list.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// The bytes are not a list's encoding.
    #[error("malformed protobuf list body at byte {at}: {what}")]
    Malformed {
        /// Offset in the body.
        at: u64,
        /// What was wrong.
        what: &'static str,
    },
    /// One item is longer than the splitter takes.
    #[error("protobuf list item of {len} bytes at byte {at} is over the {max}-byte limit")]
    ItemTooLarge {
        /// Offset of the item in the body.
        at: u64,
        /// The item's length.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// The envelope around the items is not valid.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the 4-byte magic into `head`.
    Magic,
    /// Reading a field header of `runtime.Unknown` into `head`.
    Outer,
    /// Copying `left` more bytes of the kept `runtime.Unknown` field `field`, whose body
    /// starts at `outer[start..]`.
    OuterBody {
        field: u64,
        start: usize,
        left: usize,
    },
    /// Inside `raw` (`raw_left` bytes of it to come): reading a field header into `head`.
    Inner { raw_left: u64 },
    /// Copying `left` bytes of a kept list field (the metadata) into `inner`.
    InnerBody { raw_left: u64, left: usize },
    /// Collecting an item of `left` more bytes.
    Item { raw_left: u64, left: usize },
}

/// A field header as read: its field number, wire type, and the length of what follows it
/// (the length-delimited body, or the fixed-size value; 0 for a varint, which the header holds).
struct Header {
    field: u64,
    wire_type: u8,
    body: u64,
}

/// Splits a protobuf list body into its items as chunks arrive (see the module docs).
///
/// ```
/// use kcache_proto::api::core::v1::{Pod, PodList};
/// use kcache_proto::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
/// use kcache_proto::list::{ListSplitter, RawList};
/// use kcache_proto::Envelope;
/// use prost::Message;
///
/// let pod = |name: &str| Pod {
///     metadata: Some(ObjectMeta { name: Some(name.into()), ..Default::default() }),
///     ..Default::default()
/// };
/// let list = PodList {
///     metadata: Some(ListMeta { resource_version: Some("7".into()), ..Default::default() }),
///     items: vec![pod("a"), pod("b")],
/// };
/// let body = Envelope::for_message("v1", "PodList", &list).encode_to_bytes();
///
/// let mut splitter = ListSplitter::new(1 << 20);
/// let mut items = Vec::new();
/// for chunk in body.chunks(5) {
///     items.extend(splitter.push(&bytes::Bytes::copy_from_slice(chunk))?);
/// }
/// assert_eq!(splitter.type_meta(), Some(("v1", "PodList")));
/// let envelope = splitter.finish()?;
/// let rest = RawList::decode_raw(envelope.raw)?;
/// assert_eq!(rest.metadata, list.metadata);
/// assert!(rest.items.is_empty());
/// let names: Vec<_> = items.into_iter().map(|b| Pod::decode(b).unwrap().metadata.unwrap().name.unwrap()).collect();
/// assert_eq!(names, ["a", "b"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ListSplitter {
    state: State,
    /// The bytes of a magic or field header read so far.
    head: Vec<u8>,
    /// Kept `runtime.Unknown` fields (all but `raw`), as received.
    outer: Vec<u8>,
    /// Kept list fields (all but the items), as received.
    inner: Vec<u8>,
    /// The item in progress when it spans chunks.
    item: BytesMut,
    type_meta: Option<(String, String)>,
    saw_raw: bool,
    /// Whether an item's header came.
    saw_item: bool,
    /// Body offset of the start of the current chunk.
    offset: u64,
    max_item: usize,
}

impl ListSplitter {
    /// A splitter at the start of a body, taking items of at most `max_item` bytes.
    #[must_use]
    pub fn new(max_item: usize) -> Self {
        Self {
            state: State::Magic,
            head: Vec::new(),
            outer: Vec::new(),
            inner: Vec::new(),
            item: BytesMut::new(),
            type_meta: None,
            saw_raw: false,
            saw_item: false,
            offset: 0,
            max_item,
        }
    }

    /// The list's `apiVersion` and `kind` (e.g. `v1`, `PodList`) once they came; the API
    /// server sends them before the items.
    #[must_use]
    pub fn type_meta(&self) -> Option<(&str, &str)> {
        self.type_meta
            .as_ref()
            .map(|(v, k)| (v.as_str(), k.as_str()))
    }

    /// Once the first item has begun: the list's metadata read before it (the API server sends
    /// it first, so the list's `continue` token can be read before its items are), or an
    /// empty one when none came or what came is not a list's metadata. `None` before.
    #[must_use]
    pub fn list_meta_before_items(&self) -> Option<ListMeta> {
        if !self.saw_item {
            return None;
        }
        let meta = super::RawList::decode(self.inner.as_slice()).map(|l| l.metadata);
        Some(meta.ok().flatten().unwrap_or_default())
    }

    /// Takes the next chunk; returns the items it completed, in order, each its own message
    /// (a slice of `chunk` when the item lies inside it, else a buffer of its own).
    ///
    /// # Errors
    /// A [`SplitError`] when the bytes cannot be a protobuf list.
    pub fn push(&mut self, chunk: &Bytes) -> Result<Vec<Bytes>, SplitError> {
        let mut items = Vec::new();
        let mut pos = 0;
        while pos < chunk.len() {
            let at = self.offset + pos as u64;
            match self.state {
                State::Magic => {
                    self.head.push(chunk[pos]);
                    pos += 1;
                    if self.head.len() == MAGIC.len() {
                        if self.head != MAGIC {
                            return Err(malformed(at, "the body does not start with k8s\\0"));
                        }
                        self.head.clear();
                        self.state = State::Outer;
                    }
                }
                State::Outer => {
                    pos += 1;
                    let Some(h) = self.header_byte(chunk[pos - 1], at)? else {
                        continue;
                    };
                    if h.field == 2 && h.wire_type == 2 {
                        if self.saw_raw {
                            return Err(malformed(at, "two raw fields"));
                        }
                        self.saw_raw = true;
                        self.state = inner_or_outer(h.body);
                    } else {
                        keep(&mut self.outer, &self.head, at)?;
                        self.state = State::OuterBody {
                            field: h.field,
                            start: self.outer.len(),
                            left: body_len(h.body, at)?,
                        };
                        self.end_outer_body()?;
                    }
                    self.head.clear();
                }
                State::OuterBody { field, start, left } => {
                    let n = left.min(chunk.len() - pos);
                    keep(&mut self.outer, &chunk[pos..pos + n], at)?;
                    pos += n;
                    self.state = State::OuterBody {
                        field,
                        start,
                        left: left - n,
                    };
                    self.end_outer_body()?;
                }
                State::Inner { raw_left } => {
                    pos += 1;
                    let Some(h) = self.header_byte(chunk[pos - 1], at)? else {
                        continue;
                    };
                    let raw_left = raw_left
                        .checked_sub(self.head.len() as u64 + h.body)
                        .ok_or_else(|| malformed(at, "a list field runs past the list's end"))?;
                    let left = body_len(h.body, at)?;
                    if h.field == 2 && h.wire_type == 2 {
                        self.saw_item = true;
                        if left > self.max_item {
                            return Err(SplitError::ItemTooLarge {
                                at,
                                len: h.body,
                                max: self.max_item,
                            });
                        }
                        if left == 0 {
                            items.push(Bytes::new());
                            self.state = inner_or_outer(raw_left);
                        } else {
                            self.state = State::Item { raw_left, left };
                        }
                    } else {
                        keep(&mut self.inner, &self.head, at)?;
                        self.state = if left == 0 {
                            inner_or_outer(raw_left)
                        } else {
                            State::InnerBody { raw_left, left }
                        };
                    }
                    self.head.clear();
                }
                State::InnerBody { raw_left, left } => {
                    let n = left.min(chunk.len() - pos);
                    keep(&mut self.inner, &chunk[pos..pos + n], at)?;
                    pos += n;
                    self.state = if n == left {
                        inner_or_outer(raw_left)
                    } else {
                        State::InnerBody {
                            raw_left,
                            left: left - n,
                        }
                    };
                }
                State::Item { raw_left, left } => {
                    let n = left.min(chunk.len() - pos);
                    if n == left && self.item.is_empty() {
                        items.push(chunk.slice(pos..pos + n));
                    } else {
                        if self.item.is_empty() {
                            self.item.reserve(left);
                        }
                        self.item.extend_from_slice(&chunk[pos..pos + n]);
                        if n == left {
                            items.push(std::mem::take(&mut self.item).freeze());
                        }
                    }
                    pos += n;
                    self.state = if n == left {
                        inner_or_outer(raw_left)
                    } else {
                        State::Item {
                            raw_left,
                            left: left - n,
                        }
                    };
                }
            }
        }
        self.offset += chunk.len() as u64;
        Ok(items)
    }

    /// After the body's last byte: the list's envelope, its `raw` holding the list without
    /// its items (decode it with [`RawList::decode_raw`](super::RawList::decode_raw)).
    ///
    /// # Errors
    /// A [`SplitError`] when the body ended early or its envelope is not valid.
    pub fn finish(self) -> Result<Envelope, SplitError> {
        if self.state != State::Outer || !self.head.is_empty() {
            return Err(malformed(self.offset, "the body ended inside the list"));
        }
        if !self.saw_raw || self.type_meta.is_none() {
            return Err(malformed(
                self.offset,
                "the body ended before the list's type and items",
            ));
        }
        let mut body = Vec::with_capacity(MAGIC.len() + self.outer.len() + self.inner.len() + 12);
        body.extend_from_slice(&MAGIC);
        body.extend_from_slice(&self.outer);
        body.push(0x12); // field 2 (raw), length-delimited
        crate::varint::put(&mut body, self.inner.len() as u64);
        body.extend_from_slice(&self.inner);
        Ok(Envelope::decode(Bytes::from(body))?)
    }

    /// Adds one byte to the field header in `head`; returns the header once it is complete.
    fn header_byte(&mut self, b: u8, at: u64) -> Result<Option<Header>, SplitError> {
        self.head.push(b);
        if self.head.len() > MAX_HEADER {
            return Err(malformed(at, "a field header is too long"));
        }
        let Some((tag, tag_len)) = varint(&self.head, at)? else {
            return Ok(None);
        };
        let (field, wire_type) = (tag >> 3, (tag & 7) as u8);
        if field == 0 {
            return Err(malformed(at, "field number 0"));
        }
        let body = match wire_type {
            0 => match varint(&self.head[tag_len..], at)? {
                Some(_) => 0,
                None => return Ok(None),
            },
            1 => 8,
            5 => 4,
            2 => match varint(&self.head[tag_len..], at)? {
                Some((len, _)) => len,
                None => return Ok(None),
            },
            _ => return Err(malformed(at, "a group or an unknown wire type")),
        };
        Ok(Some(Header {
            field,
            wire_type,
            body,
        }))
    }

    /// Back to the top level when the kept field in progress is complete; `typeMeta` (field
    /// 1) is read then, so that items can be decoded while the rest arrives.
    fn end_outer_body(&mut self) -> Result<(), SplitError> {
        let State::OuterBody {
            field,
            start,
            left: 0,
        } = self.state
        else {
            return Ok(());
        };
        self.state = State::Outer;
        if field == 1 && self.type_meta.is_none() {
            let tm = TypeMeta::decode(&self.outer[start..])
                .map_err(|_| malformed(self.offset, "malformed typeMeta"))?;
            self.type_meta = Some((
                tm.api_version.unwrap_or_default(),
                tm.kind.unwrap_or_default(),
            ));
        }
        Ok(())
    }
}

/// Inside `raw` with `raw_left` bytes to come, or back at the top level when none are left.
fn inner_or_outer(raw_left: u64) -> State {
    if raw_left == 0 {
        State::Outer
    } else {
        State::Inner { raw_left }
    }
}

fn malformed(at: u64, what: &'static str) -> SplitError {
    SplitError::Malformed { at, what }
}

fn body_len(len: u64, at: u64) -> Result<usize, SplitError> {
    usize::try_from(len).map_err(|_| malformed(at, "a field length is out of range"))
}

fn keep(into: &mut Vec<u8>, bytes: &[u8], at: u64) -> Result<(), SplitError> {
    if into.len() + bytes.len() > MAX_KEPT {
        return Err(malformed(at, "the fields around the items are too long"));
    }
    into.extend_from_slice(bytes);
    Ok(())
}

/// A complete varint at the start of `bytes`: its value and length; `None` while more bytes
/// may complete it.
fn varint(bytes: &[u8], at: u64) -> Result<Option<(u64, usize)>, SplitError> {
    match crate::varint::read(bytes) {
        Ok(read) => Ok(Some(read)),
        Err(crate::varint::Error::TooLong) => Err(malformed(
            at,
            "a varint longer than 10 bytes or beyond 64 bits",
        )),
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests;
