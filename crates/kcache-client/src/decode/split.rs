//! A JSON list body split into its items while it arrives: [`ListSplitter`] takes the body
//! chunk by chunk and hands back each item of `items` as soon as its last byte came, keeping
//! only the item in progress and the envelope (`kind`, `apiVersion`, `metadata`, with
//! `"items":[]`). The lister-watcher decodes items as they come, so a list's decode overlaps
//! its transfer and the whole body is never held.

use bytes::Bytes;
use serde::de::IgnoredAny;

/// Why a body is not a JSON list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed list body at byte {at}: {what}")]
pub struct SplitError {
    /// Offset in the body.
    pub at: u64,
    /// What was wrong.
    pub what: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Outside `items` (before or after it).
    Envelope,
    /// After the `"items":` key, before its value.
    ItemsValue,
    /// Inside the `items` array, between items.
    Between,
    /// Inside one item.
    Item,
}

/// Splits a JSON list body into its items as chunks arrive (see the module docs).
#[derive(Debug)]
pub struct ListSplitter {
    phase: Phase,
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The last string at depth 1 (a key, when a ':' follows), only while it is short.
    last_string: Vec<u8>,
    collecting_string: bool,
    envelope: Vec<u8>,
    item: Vec<u8>,
    offset: u64,
    saw_items: bool,
}

impl Default for ListSplitter {
    fn default() -> Self {
        Self::new()
    }
}

impl ListSplitter {
    /// A splitter at the start of a body.
    #[must_use]
    pub fn new() -> Self {
        Self {
            phase: Phase::Envelope,
            depth: 0,
            in_string: false,
            escaped: false,
            last_string: Vec::new(),
            collecting_string: false,
            envelope: Vec::new(),
            item: Vec::new(),
            offset: 0,
            saw_items: false,
        }
    }

    fn fail(&self, at: usize, what: &'static str) -> SplitError {
        SplitError {
            at: self.offset + at as u64,
            what,
        }
    }

    /// Takes the next chunk; returns the items it completed, in order.
    ///
    /// # Errors
    /// A [`SplitError`] when the bytes cannot be a JSON list (an unbalanced bracket, an item
    /// that is not an object).
    #[cfg_attr(
        not(feature = "unstable-decode-internals"),
        allow(
            dead_code,
            reason = "called by the benches and tests, through `internals`"
        )
    )]
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Bytes>, SplitError> {
        struct Collect(Vec<Bytes>);
        impl ItemSink for Collect {
            fn whole(&mut self, data: &[u8]) -> Option<usize> {
                let len = whole_item(data)?;
                self.0.push(Bytes::copy_from_slice(&data[..len]));
                Some(len)
            }
            fn item(&mut self, item: Bytes) {
                self.0.push(item);
            }
        }
        let mut items = Collect(Vec::new());
        self.push_into(chunk, &mut items)?;
        Ok(items.0)
    }

    /// Takes the next chunk, handing the items it completed to `items`, in order: an item
    /// wholly inside the chunk is offered to [`ItemSink::whole`] first (which may decode it
    /// while finding its end), the others are split out by the scan.
    ///
    /// # Errors
    /// As [`ListSplitter::push`].
    pub fn push_into(&mut self, chunk: &[u8], items: &mut impl ItemSink) -> Result<(), SplitError> {
        let mut start = 0; // where the bytes not yet copied into a buffer begin
        let mut next = 0;
        while next < chunk.len() {
            if self.in_string && !self.escaped && !self.collecting_string {
                // Most of a body is string contents: jump to the next quote or backslash.
                let Some(j) = memchr::memchr2(b'"', b'\\', &chunk[next..]) else {
                    break;
                };
                next += j + 1;
                if chunk[next - 1] == b'\\' {
                    self.escaped = true;
                } else {
                    self.in_string = false;
                }
                continue;
            }
            let i = next;
            let b = chunk[i];
            next += 1;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.collecting_string = false;
                }
                if self.collecting_string && self.in_string && self.last_string.len() < 16 {
                    self.last_string.push(b);
                } else if self.collecting_string && self.in_string {
                    self.collecting_string = false;
                    self.last_string.clear();
                }
                continue;
            }
            match self.phase {
                Phase::Envelope | Phase::ItemsValue => {
                    if self.phase == Phase::ItemsValue && !b.is_ascii_whitespace() {
                        if b == b'[' {
                            self.envelope.extend_from_slice(&chunk[start..=i]);
                            start = i + 1;
                            self.depth += 1;
                            self.phase = Phase::Between;
                            self.saw_items = true;
                            continue;
                        }
                        self.phase = Phase::Envelope; // `"items": null`
                    }
                    match b {
                        b'"' => {
                            self.in_string = true;
                            self.collecting_string = self.depth == 1;
                            self.last_string.clear();
                        }
                        b'{' | b'[' => self.depth += 1,
                        b'}' | b']' => {
                            self.depth = self
                                .depth
                                .checked_sub(1)
                                .ok_or_else(|| self.fail(i, "unbalanced close"))?;
                        }
                        b':' if self.depth == 1 && self.last_string == b"items" => {
                            if self.saw_items {
                                return Err(self.fail(i, "duplicate items"));
                            }
                            self.phase = Phase::ItemsValue;
                        }
                        _ => {}
                    }
                }
                Phase::Between => match b {
                    b'{' => {
                        if let Some(len) = items.whole(&chunk[i..]) {
                            // The item is all in this chunk: the sink's parser found its end.
                            next = i + len;
                            start = next;
                            continue;
                        }
                        start = i;
                        self.depth += 1;
                        self.phase = Phase::Item;
                    }
                    b']' => {
                        start = i;
                        self.depth -= 1;
                        self.phase = Phase::Envelope;
                        self.last_string.clear();
                    }
                    b',' => {}
                    b if b.is_ascii_whitespace() => {}
                    _ => return Err(self.fail(i, "a list item is not an object")),
                },
                Phase::Item => match b {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth -= 1;
                        if self.depth == 2 {
                            items.item(self.take_item(&chunk[start..=i]));
                            start = i + 1;
                            self.phase = Phase::Between;
                        }
                    }
                    _ => {}
                },
            }
        }
        match self.phase {
            Phase::Item => self.item.extend_from_slice(&chunk[start..]),
            // Separators between items are not kept.
            Phase::Between => {}
            Phase::Envelope | Phase::ItemsValue => self.envelope.extend_from_slice(&chunk[start..]),
        }
        self.offset += chunk.len() as u64;
        Ok(())
    }

    /// While the splitter is inside `items`: the envelope read before it, up to and with the
    /// `[` of `items` (the API server sends `kind`, `apiVersion` and `metadata` first, so the
    /// list's `continue` token can be read before its items are).
    #[must_use]
    pub fn envelope_before_items(&self) -> Option<&[u8]> {
        matches!(self.phase, Phase::Between | Phase::Item).then_some(self.envelope.as_slice())
    }

    /// The item whose last bytes are `tail`, in a buffer of its exact size (a kept item holds
    /// no spare capacity, and a `Bytes` of an exact `Vec` needs no shared header).
    fn take_item(&mut self, tail: &[u8]) -> Bytes {
        if self.item.is_empty() {
            return Bytes::copy_from_slice(tail);
        }
        self.item.extend_from_slice(tail);
        Bytes::from(std::mem::take(&mut self.item).into_boxed_slice())
    }

    /// Ends the body; returns the envelope with `"items":[]`, to be decoded as a list with
    /// no items.
    ///
    /// # Errors
    /// A [`SplitError`] when the body ended inside an item or a container.
    pub fn finish(self) -> Result<Vec<u8>, SplitError> {
        if self.phase != Phase::Envelope || self.depth != 0 || self.in_string {
            return Err(SplitError {
                at: self.offset,
                what: "the body ended early",
            });
        }
        // The `[` of `items` was kept, and its `]` with what followed it.
        Ok(self.envelope)
    }
}

/// Where [`ListSplitter::push_into`] hands its items.
pub trait ItemSink {
    /// Offered an item the chunk holds wholly, with the rest of the chunk (`data` starts at the
    /// item's `{`): takes the item and returns its length in bytes, or `None` to leave it to
    /// the scan (when the item goes on past `data`, or is not valid JSON), which then hands it
    /// to [`ItemSink::item`].
    fn whole(&mut self, data: &[u8]) -> Option<usize>;

    /// Takes an item split out by the scan.
    fn item(&mut self, item: Bytes);
}

/// The length of the JSON value `data` starts with, when it is whole and valid: serde_json's
/// parser skips strings by 8 bytes at a time, several times faster than the byte-by-byte
/// scan. `None` (the value goes on past `data`, or is malformed) leaves it to the scan.
pub(crate) fn whole_item(data: &[u8]) -> Option<usize> {
    let mut values = serde_json::Deserializer::from_slice(data).into_iter::<IgnoredAny>();
    match values.next() {
        Some(Ok(IgnoredAny)) => Some(values.byte_offset()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn split(body: &[u8], cuts: &[usize]) -> Result<(Value, Vec<Value>), SplitError> {
        let mut s = ListSplitter::new();
        let mut items = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().chain(std::iter::once(&body.len())) {
            let c = c.clamp(at, body.len());
            items.extend(s.push(&body[at..c])?);
            at = c;
        }
        let env: Value = serde_json::from_slice(&s.finish()?).expect("envelope is JSON");
        let items = items
            .iter()
            .map(|b| serde_json::from_slice(b).expect("item is JSON"))
            .collect();
        Ok((env, items))
    }

    #[test]
    fn items_come_out_whole_and_the_envelope_keeps_the_rest() {
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7","items":"no"},"items":[{"metadata":{"name":"a"},"x":"}]\"{"},{"metadata":{"name":"b"},"l":[1,{"items":[]}]}]}"#;
        let (env, items) = split(body, &[]).unwrap();
        assert_eq!(
            env,
            json!({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7","items":"no"},"items":[]})
        );
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["x"], "}]\"{");
        assert_eq!(items[1]["l"][1]["items"], json!([]));
    }

    /// The envelope before `items` is there from the `[` of `items` to its `]`, whatever the
    /// cuts, and reads as the list's metadata.
    #[test]
    fn the_envelope_before_the_items_is_known_while_they_arrive() {
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"continue":"c[1]","items":[]},"items":[{"metadata":{"name":"a"}},{"b":"]"}],"x":1}"#;
        let open = body
            .windows(9)
            .rposition(|w| w == br#""items":["#)
            .map(|p| p + 9)
            .unwrap();
        let close = body.len() - 7; // after `]` of items: `,"x":1}` is left
        for cut in 0..=body.len() {
            let mut s = ListSplitter::new();
            s.push(&body[..cut]).unwrap();
            let head = s.envelope_before_items().map(<[u8]>::to_vec);
            if cut < open || cut >= close {
                assert_eq!(head, None, "cut at {cut}");
                continue;
            }
            let mut head = head.unwrap_or_else(|| panic!("cut at {cut}: no envelope"));
            assert_eq!(head, &body[..open], "cut at {cut}");
            head.extend_from_slice(b"]}");
            let env: Value = serde_json::from_slice(&head).unwrap();
            assert_eq!(env["metadata"]["continue"], "c[1]");
        }
    }

    #[test]
    fn null_or_missing_items_and_metadata_after_items_are_kept() {
        let (env, items) = split(br#"{"kind":"List","items":null}"#, &[]).unwrap();
        assert_eq!((env["items"].clone(), items.len()), (Value::Null, 0));
        let (env, items) =
            split(br#"{"items":[{"a":1}],"metadata":{"continue":"x"}}"#, &[5]).unwrap();
        assert_eq!(env["metadata"]["continue"], "x");
        assert_eq!(items, [json!({"a": 1})]);
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        assert!(split(br#"{"items":[1,2]}"#, &[]).is_err());
        assert!(split(br#"{"items":[{"a":1}"#, &[]).is_err());
        assert!(split(br#"}}"#, &[]).is_err());
        assert!(split(br#"{"items":[{"a":"#, &[3]).is_err());
    }

    #[test]
    fn items_serde_cannot_parse_are_split_by_the_scan() {
        // Invalid JSON inside an item, and nesting deeper than serde_json's limit (128): the
        // item still comes out whole, for its decoder to judge.
        let deep = format!(
            "{}{}",
            "{\"a\":".repeat(200),
            "1".to_owned() + &"}".repeat(200)
        );
        let body = format!(r#"{{"items":[{{"a":tru}},{deep},{{"b":2}}]}}"#);
        let mut s = ListSplitter::new();
        let items = s.push(body.as_bytes()).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(&items[0][..], br#"{"a":tru}"#);
        assert_eq!(&items[1][..], deep.as_bytes());
        assert_eq!(&items[2][..], br#"{"b":2}"#);
        s.finish().unwrap();
    }

    #[test]
    fn items_a_sink_declines_are_split_out_by_the_scan() {
        struct Declines(Vec<Bytes>, usize);
        impl ItemSink for Declines {
            fn whole(&mut self, _: &[u8]) -> Option<usize> {
                self.1 += 1;
                None
            }
            fn item(&mut self, item: Bytes) {
                self.0.push(item);
            }
        }
        let body = br#"{"items":[{"a":"}"},{"b":[{}]}],"metadata":{}}"#;
        let mut s = ListSplitter::new();
        let mut sink = Declines(Vec::new(), 0);
        s.push_into(body, &mut sink).unwrap();
        s.finish().unwrap();
        assert_eq!(sink.1, 2, "each item offered once");
        assert_eq!(sink.0, [&br#"{"a":"}"}"#[..], &br#"{"b":[{}]}"#[..]]);
    }

    proptest! {
        #[test]
        fn any_chunking_gives_what_one_chunk_gives(
            names in proptest::collection::vec("[a-z\"\\\\{}\\[\\]:,]{0,80}", 0..8),
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let items: Vec<Value> = names
                .iter()
                .map(|n| json!({"metadata": {"name": n}, "spec": {"list": [n, {"k": n}]}}))
                .collect();
            let body = serde_json::to_vec(&json!({"kind": "PodList", "apiVersion": "v1",
                "metadata": {"resourceVersion": "1"}, "items": items})).unwrap();
            let mut cuts = cuts;
            cuts.sort_unstable();
            let (env, got) = split(&body, &cuts).unwrap();
            prop_assert_eq!(got, items);
            prop_assert_eq!(env["items"].clone(), json!([]));
            prop_assert_eq!(env["metadata"]["resourceVersion"].clone(), json!("1"));
        }
    }
}
