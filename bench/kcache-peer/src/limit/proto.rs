//! The protobuf bodies of the limit line: a list walked field by field with every item's
//! bytes skipped; watch frames told apart by their first field.

use std::ops::Range;

use anyhow::{Context as _, bail};

use super::{Kind, MAGIC, end_of_initial_events, kind_of};

/// Walks a protobuf list body: `k8s\0`, then a `runtime.Unknown` whose field 2 (`raw`) is
/// the list — field 1 its `ListMeta` (kept, for `continue`, field 3), field 2 one item each
/// (counted, bytes skipped).
#[derive(Debug, Default)]
pub(super) struct ProtoList {
    pos: u64,
    state: PbState,
    /// The end offset of the Unknown's `raw`, while inside it.
    raw_end: Option<u64>,
    items: u64,
    pub(super) continue_: Option<String>,
}

#[derive(Debug)]
enum PbState {
    Magic(usize),
    Tag(Varint),
    Len(u64, Varint),
    SkipVarint,
    Skip(u64),
    ListMeta(u64, Vec<u8>),
}

impl Default for PbState {
    fn default() -> Self {
        PbState::Magic(0)
    }
}

/// A varint read byte by byte.
#[derive(Debug, Default, Clone, Copy)]
struct Varint {
    value: u64,
    shift: u32,
}

impl Varint {
    /// Adds one byte; the value once complete.
    fn push(&mut self, byte: u8) -> anyhow::Result<Option<u64>> {
        if self.shift >= 64 {
            bail!("a protobuf varint longer than 10 bytes");
        }
        self.value |= u64::from(byte & 0x7f) << self.shift;
        self.shift += 7;
        Ok((byte & 0x80 == 0).then_some(self.value))
    }
}

impl ProtoList {
    pub(super) fn push(&mut self, mut data: &[u8]) -> anyhow::Result<()> {
        while !data.is_empty() {
            let take = match &mut self.state {
                PbState::Skip(left) | PbState::ListMeta(left, _) => {
                    (*left).min(data.len() as u64) as usize
                }
                _ => 1,
            };
            let (now, rest) = data.split_at(take);
            data = rest;
            self.pos += take as u64;
            self.step(now)?;
        }
        Ok(())
    }

    fn step(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let inner = self.raw_end.is_some();
        let state = std::mem::take(&mut self.state);
        self.state = match state {
            PbState::Magic(seen) => {
                if bytes[0] != MAGIC[seen] {
                    bail!("the protobuf list does not start with k8s\\0");
                }
                if seen + 1 == MAGIC.len() {
                    PbState::Tag(Varint::default())
                } else {
                    PbState::Magic(seen + 1)
                }
            }
            PbState::Tag(mut v) => match v.push(bytes[0])? {
                None => PbState::Tag(v),
                Some(tag) => match tag & 7 {
                    0 => PbState::SkipVarint,
                    1 => PbState::Skip(8),
                    2 => PbState::Len(tag >> 3, Varint::default()),
                    5 => PbState::Skip(4),
                    other => bail!("protobuf wire type {other} in a list"),
                },
            },
            PbState::SkipVarint if bytes[0] & 0x80 != 0 => PbState::SkipVarint,
            PbState::SkipVarint => PbState::Tag(Varint::default()),
            PbState::Len(field, mut v) => match v.push(bytes[0])? {
                None => PbState::Len(field, v),
                Some(len) => match (inner, field) {
                    (false, 2) => {
                        self.raw_end = Some(self.pos + len);
                        PbState::Tag(Varint::default())
                    }
                    (true, 1) => PbState::ListMeta(len, Vec::new()),
                    (true, 2) => {
                        self.items += 1;
                        PbState::Skip(len)
                    }
                    _ => PbState::Skip(len),
                },
            },
            PbState::Skip(left) => PbState::Skip(left - bytes.len() as u64),
            PbState::ListMeta(left, mut buf) => {
                buf.extend_from_slice(bytes);
                let left = left - bytes.len() as u64;
                if left > 0 {
                    PbState::ListMeta(left, buf)
                } else {
                    self.continue_ = proto_string_field(&buf, 3)?;
                    PbState::Skip(0)
                }
            }
        };
        if let PbState::Skip(0) = self.state {
            self.state = PbState::Tag(Varint::default());
        }
        if matches!(self.state, PbState::Tag(Varint { shift: 0, .. }))
            && self.raw_end == Some(self.pos)
        {
            self.raw_end = None;
        }
        Ok(())
    }

    pub(super) fn finish(&self) -> anyhow::Result<u64> {
        if !matches!(self.state, PbState::Tag(Varint { shift: 0, .. })) || self.raw_end.is_some() {
            bail!("the protobuf list ended inside a field ({:?})", self.state);
        }
        Ok(self.items)
    }
}

/// The field of `msg` at `*at`: its tag and its value's byte range (empty for a varint),
/// with `*at` moved past it. The range may end past `msg` (a prefix of a message); `None` when
/// `msg` ends inside the field's tag or length.
fn next_field(msg: &[u8], at: &mut usize) -> anyhow::Result<Option<(u64, Range<usize>)>> {
    let varint = |at: &mut usize| -> anyhow::Result<Option<u64>> {
        let mut v = Varint::default();
        while let Some(&byte) = msg.get(*at) {
            *at += 1;
            if let Some(value) = v.push(byte)? {
                return Ok(Some(value));
            }
        }
        Ok(None)
    };
    let Some(tag) = varint(at)? else {
        return Ok(None);
    };
    let len = match tag & 7 {
        0 => match varint(at)? {
            Some(_) => 0,
            None => return Ok(None),
        },
        1 => 8,
        2 => match varint(at)? {
            Some(len) => usize::try_from(len).context("a protobuf field too long")?,
            None => return Ok(None),
        },
        5 => 4,
        other => bail!("protobuf wire type {other}"),
    };
    let start = *at;
    *at = start
        .checked_add(len)
        .context("a protobuf field too long")?;
    Ok(Some((tag, start..*at)))
}

/// The last string (length-delimited) field `want` of the protobuf message `msg`.
fn proto_string_field(msg: &[u8], want: u64) -> anyhow::Result<Option<String>> {
    let mut at = 0;
    let mut found = None;
    while at < msg.len() {
        let (tag, value) = next_field(msg, &mut at)?.context("a truncated protobuf field")?;
        if value.end > msg.len() {
            bail!("a protobuf field past the message's end");
        }
        if tag >> 3 == want && tag & 7 == 2 {
            found = Some(String::from_utf8_lossy(&msg[value]).into_owned());
        }
    }
    Ok(found)
}

/// Reads protobuf watch frames (4-byte big-endian length, then a bare `meta.v1.WatchEvent`:
/// field 1 its type, field 2 the object — which alone is enveloped, `k8s\0` +
/// `runtime.Unknown`), looking only at each frame's first bytes; bookmark and error frames are
/// kept whole.
#[derive(Debug, Default)]
pub(super) struct ProtoWatch {
    /// The length prefix being read.
    len: Vec<u8>,
    /// Bytes of the current frame still to come.
    left: u64,
    /// The current frame's bytes so far (its head, or all of a kept frame).
    frame: Vec<u8>,
    kind: Option<Kind>,
    pub(super) added: u64,
}

/// Enough of a frame for the event type (its first field: a tag, a length, `BOOKMARK`).
const FRAME_HEAD: usize = 16;

impl ProtoWatch {
    /// Feeds a chunk; `true` once the end bookmark was read.
    pub(super) fn push(&mut self, mut data: &[u8]) -> anyhow::Result<bool> {
        while !data.is_empty() {
            if self.kind.is_none() {
                let need = 4 - self.len.len();
                let take = need.min(data.len());
                self.len.extend_from_slice(&data[..take]);
                data = &data[take..];
                if self.len.len() < 4 {
                    return Ok(false);
                }
                let len: [u8; 4] = self.len[..].try_into()?;
                self.left = u64::from(u32::from_be_bytes(len));
                self.len.clear();
                self.kind = Some(Kind::Unknown);
            }
            let take = (self.left.min(data.len() as u64)) as usize;
            let (now, rest) = data.split_at(take);
            data = rest;
            self.left -= take as u64;
            match self.kind {
                Some(Kind::Unknown) => {
                    self.frame.extend_from_slice(now);
                    if self.frame.len() >= FRAME_HEAD || self.left == 0 {
                        let kind = kind_of(&frame_event_type(&self.frame)?);
                        if kind == Kind::Added {
                            self.added += 1;
                        }
                        if kind != Kind::Keep {
                            self.frame.clear();
                        }
                        self.kind = Some(kind);
                    }
                }
                Some(Kind::Keep) => self.frame.extend_from_slice(now),
                _ => {}
            }
            if self.left == 0 {
                if self.kind == Some(Kind::Keep) {
                    let bookmark = frame_event_type(&self.frame)? == b"BOOKMARK";
                    if end_of_initial_events(&self.frame, bookmark)? {
                        return Ok(true);
                    }
                }
                self.frame.clear();
                self.kind = None;
            }
        }
        Ok(false)
    }
}

/// The `WatchEvent.type` of a frame, from its first bytes.
fn frame_event_type(frame: &[u8]) -> anyhow::Result<Vec<u8>> {
    let event_type = proto_prefix_field(frame, 1).context("a watch event without its type")?;
    Ok(event_type.to_vec())
}

/// The bytes of length-delimited field `want` of a message prefix, cut at the prefix's end
/// (the field may go on past it); `None` when the prefix ends before the field starts.
fn proto_prefix_field(msg: &[u8], want: u64) -> Option<&[u8]> {
    let mut at = 0;
    while at < msg.len() {
        let (tag, value) = next_field(msg, &mut at).ok()??;
        if tag >> 3 == want && tag & 7 == 2 {
            return msg.get(value.start..value.end.min(msg.len()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A length-delimited protobuf field.
    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for mut v in [number << 3 | 2, bytes.len() as u64] {
            loop {
                let byte = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    out.push(byte);
                    break;
                }
                out.push(byte | 0x80);
            }
        }
        out.extend_from_slice(bytes);
        out
    }

    fn unknown(raw: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend(field(1, &[field(1, b"v1"), field(2, b"PodList")].concat()));
        out.extend(field(2, raw));
        out.extend(field(4, b"application/vnd.kubernetes.protobuf"));
        out
    }

    #[test]
    fn protobuf_list_items_are_counted_and_continue_found_in_any_chunking() {
        let meta = [field(2, b"123"), field(3, b"token-1")].concat();
        let pod = field(1, &[0x55; 300]);
        let raw = [
            field(1, &meta),
            field(2, &pod),
            field(2, &pod),
            field(2, &[]),
        ]
        .concat();
        let body = unknown(&raw);
        for size in (1..8).chain([body.len()]) {
            let mut w = ProtoList::default();
            for chunk in body.chunks(size) {
                w.push(chunk).unwrap();
            }
            assert_eq!(w.finish().unwrap(), 3, "chunks of {size}");
            assert_eq!(w.continue_.as_deref(), Some("token-1"));
        }
        let mut w = ProtoList::default();
        w.push(&body[..body.len() - 3]).unwrap();
        assert!(w.finish().is_err(), "a truncated body");
    }

    #[test]
    fn protobuf_watch_counts_added_and_stops_at_the_end_bookmark() {
        let frame = |event_type: &[u8], object: &[u8]| {
            let event = [field(1, event_type), field(2, &field(1, &unknown(object)))].concat();
            let mut out = (event.len() as u32).to_be_bytes().to_vec();
            out.extend(event);
            out
        };
        let body = [
            frame(b"ADDED", &[7; 200]),
            frame(b"ADDED", &[7; 3]),
            frame(b"BOOKMARK", b"no annotation"),
            frame(b"BOOKMARK", b"..k8s.io/initial-events-end.."),
            frame(b"ADDED", &[7; 10]),
        ]
        .concat();
        for size in (1..8).chain([body.len()]) {
            let mut w = ProtoWatch::default();
            let done = body.chunks(size).any(|c| w.push(c).unwrap());
            assert!(done, "chunks of {size}");
            assert_eq!(w.added, 2, "chunks of {size}");
        }
        let mut w = ProtoWatch::default();
        assert!(w.push(&frame(b"ERROR", b"status")).is_err());
    }
}
