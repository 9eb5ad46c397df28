//! The JSON bodies of the limit line: a list's items counted and its `continue` found with
//! byte searches; watch lines told apart by their first bytes.

use anyhow::bail;
use memchr::memmem;

use super::{Kind, end_of_initial_events, kind_of};

/// Counts the items of a JSON list body (see the `limit` module docs) and finds its `continue`.
#[derive(Debug, Default)]
pub(super) struct JsonList {
    /// The body up to `"items":[` (the envelope's start, with `metadata`).
    head: Vec<u8>,
    in_items: bool,
    /// The last bytes of the previous chunk (a mark split between two chunks).
    carry: Vec<u8>,
    items: u64,
    /// Whether the envelope's `metadata` came after its items (custom resources' lists are
    /// encoded with sorted keys: `apiVersion`, `items`, `kind`, `metadata`).
    trailing_metadata: bool,
    /// The body's last [`TAIL`] bytes, kept when the metadata trails.
    tail: Vec<u8>,
    pub(super) continue_: Option<String>,
}

const ITEMS_KEY: &[u8] = b"\"items\":[";
const ITEM_MARK: &[u8] = b"\"resourceVersion\":\"";
/// A list envelope without `"items":[` in its first this many bytes is refused.
const MAX_HEAD: usize = 1 << 20;
/// The envelope's `metadata` key.
const METADATA_KEY: &[u8] = b"\"metadata\":{";
/// Bytes kept from the end of a list whose metadata trails its items (enough for the
/// envelope's metadata: a resourceVersion and a continue token).
const TAIL: usize = 16 * 1024;

impl JsonList {
    pub(super) fn push(&mut self, data: &[u8]) -> anyhow::Result<()> {
        if self.in_items {
            self.count(data);
            return Ok(());
        }
        self.head.extend_from_slice(data);
        let Some(at) = memmem::find(&self.head, ITEMS_KEY) else {
            if self.head.len() > MAX_HEAD {
                bail!("no \"items\":[ in the first {MAX_HEAD} bytes of the list");
            }
            return Ok(());
        };
        self.continue_ = json_string_after(&self.head[..at], b"\"continue\":\"");
        self.trailing_metadata = memmem::find(&self.head[..at], METADATA_KEY).is_none();
        self.in_items = true;
        let rest = self.head.split_off(at + ITEMS_KEY.len());
        self.head = Vec::new();
        self.count(&rest);
        Ok(())
    }

    fn count(&mut self, data: &[u8]) {
        if self.trailing_metadata {
            if data.len() >= TAIL {
                self.tail.clear();
            } else {
                let drop = (self.tail.len() + data.len()).saturating_sub(TAIL);
                self.tail.drain(..drop);
            }
            self.tail
                .extend_from_slice(&data[data.len().saturating_sub(TAIL)..]);
        }
        let k = ITEM_MARK.len() - 1;
        // A mark across the boundary: neither the carry nor `data`'s first k bytes can hold
        // one alone, so nothing is counted twice.
        let mut joined = std::mem::take(&mut self.carry);
        joined.extend_from_slice(&data[..data.len().min(k)]);
        self.items += memmem::find_iter(&joined, ITEM_MARK).count() as u64;
        self.items += memmem::find_iter(data, ITEM_MARK).count() as u64;
        self.carry = if data.len() >= k {
            data[data.len() - k..].to_vec()
        } else {
            joined[joined.len().saturating_sub(k)..].to_vec()
        };
    }

    /// The items counted. A trailing envelope `metadata` (the last one in the body) has its
    /// `resourceVersion` taken off the count and its `continue` read.
    pub(super) fn finish(&mut self) -> anyhow::Result<u64> {
        if !self.in_items {
            bail!("the list body has no \"items\":[");
        }
        if self.trailing_metadata {
            let Some(at) = memmem::rfind(&self.tail, METADATA_KEY) else {
                bail!("the list has no metadata before or after its items");
            };
            let meta = &self.tail[at..];
            if memmem::find(meta, ITEM_MARK).is_some() {
                self.items = self.items.saturating_sub(1);
            }
            self.continue_ = json_string_after(meta, b"\"continue\":\"");
        }
        Ok(self.items)
    }
}

/// The JSON string value after `key` (which ends with the opening quote) in `text`.
fn json_string_after(text: &[u8], key: &[u8]) -> Option<String> {
    let start = memmem::find(text, key)? + key.len();
    let len = memchr::memchr(b'"', &text[start..])?;
    Some(String::from_utf8_lossy(&text[start..start + len]).into_owned())
}

/// Reads JSON watch lines (`{"type":"ADDED","object":…}\n`), looking only at each line's
/// start; bookmark and error lines are kept whole.
#[derive(Debug)]
pub(super) struct JsonWatch {
    line: Vec<u8>,
    kind: Kind,
    pub(super) added: u64,
}

impl Default for JsonWatch {
    fn default() -> Self {
        Self {
            line: Vec::new(),
            kind: Kind::Unknown,
            added: 0,
        }
    }
}

const JSON_TYPE: &[u8] = b"{\"type\":\"";
/// Enough bytes of a line for its type: `{"type":"BOOKMARK"`.
const JSON_PREFIX: usize = 18;

impl JsonWatch {
    /// Feeds a chunk; `true` once the end bookmark was read.
    pub(super) fn push(&mut self, mut data: &[u8]) -> anyhow::Result<bool> {
        loop {
            let newline = memchr::memchr(b'\n', data);
            let part = &data[..newline.unwrap_or(data.len())];
            match self.kind {
                Kind::Unknown => {
                    self.line.extend_from_slice(part);
                    if self.line.len() >= JSON_PREFIX {
                        self.classify()?;
                    }
                }
                Kind::Keep => self.line.extend_from_slice(part),
                Kind::Added | Kind::Other => {}
            }
            let Some(i) = newline else { return Ok(false) };
            if self.kind == Kind::Unknown && !self.line.is_empty() {
                self.classify()?;
            }
            if self.kind == Kind::Keep {
                let bookmark = self.line.starts_with(b"{\"type\":\"BOOKMARK\"");
                if end_of_initial_events(&self.line, bookmark)? {
                    return Ok(true);
                }
            }
            self.line.clear();
            self.kind = Kind::Unknown;
            data = &data[i + 1..];
        }
    }

    fn classify(&mut self) -> anyhow::Result<()> {
        let Some(rest) = self.line.strip_prefix(JSON_TYPE) else {
            let start = String::from_utf8_lossy(&self.line[..self.line.len().min(64)]);
            bail!("a watch line that does not start with {{\"type\":\"…: {start}");
        };
        let end = memchr::memchr(b'"', rest).unwrap_or(rest.len());
        self.kind = kind_of(&rest[..end]);
        if self.kind == Kind::Added {
            self.added += 1;
        }
        if self.kind != Kind::Keep {
            self.line.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_list_items_are_counted_by_their_resource_version() {
        let pod = r#"{"metadata":{"name":"p","resourceVersion":"7","annotations":{"a":"{\"resourceVersion\":\"1\"}"}},"spec":{}}"#;
        let body = format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"9","continue":"abc"}},"items":[{pod},{pod},{pod}]}}"#
        );
        for size in (1..8).chain([body.len()]) {
            let mut c = JsonList::default();
            for chunk in body.as_bytes().chunks(size) {
                c.push(chunk).unwrap();
            }
            assert_eq!(c.finish().unwrap(), 3, "chunks of {size}");
            assert_eq!(c.continue_.as_deref(), Some("abc"));
        }
    }

    #[test]
    fn a_custom_resource_list_with_its_metadata_after_the_items_counts_only_the_items() {
        let cr = r#"{"apiVersion":"b/v1","kind":"W","metadata":{"name":"w","resourceVersion":"7"},"spec":{"metadata":{"x":1}}}"#;
        let body = format!(
            r#"{{"apiVersion":"b/v1","items":[{cr},{cr},{cr}],"kind":"WList","metadata":{{"continue":"next","resourceVersion":"9"}}}}"#
        );
        for size in (1..8).chain([body.len()]) {
            let mut c = JsonList::default();
            for chunk in body.as_bytes().chunks(size) {
                c.push(chunk).unwrap();
            }
            assert_eq!(c.finish().unwrap(), 3, "chunks of {size}");
            assert_eq!(c.continue_.as_deref(), Some("next"), "chunks of {size}");
        }
    }

    #[test]
    fn json_watch_counts_added_and_stops_at_the_end_bookmark() {
        let body = concat!(
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n",
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n",
            "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}\n",
            "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n",
            "{\"type\":\"ADDED\",\"object\":{}}\n",
        );
        for size in (1..8).chain([body.len()]) {
            let mut w = JsonWatch::default();
            let done = body.as_bytes().chunks(size).any(|c| w.push(c).unwrap());
            assert!(done, "chunks of {size}");
            assert_eq!(w.added, 2, "chunks of {size}");
        }
        let mut w = JsonWatch::default();
        assert!(w.push(b"{\"type\":\"ERROR\",\"object\":{}}\n").is_err());
    }
}
