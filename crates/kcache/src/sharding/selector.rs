//! KEP-5866 shard selectors: `shardRange(object.metadata.uid, '0x…', '0x…') || …`.
//!
//! The grammar is the one kube-apiserver v1.36 accepts (`k8s.io/apiserver/pkg/sharding`): one
//! or more `shardRange(field, start, end)` calls joined with `||`; `field` is
//! `object.metadata.uid` or `object.metadata.namespace` (the same in every call); `start` and
//! `end` are quoted `0x`-prefixed lower-case hex strings of exactly 16 digits, or
//! `0x10000000000000000` (2^64) as an end; `start < end`. An object matches when the 64-bit
//! FNV-1a hash of the field's value lies in `[start, end)` of any range.
//!
//! (The field's doc comment in `k8s.io/apimachinery` shows `'0x0'` in its example; the server
//! rejects that, and so does [`Selector::parse`].)

use std::fmt;

use kube_core::ObjectMeta;

/// 2^64: the exclusive end of the hash space.
pub const HASH_SPACE: u128 = 1 << 64;

/// The 64-bit FNV-1a hash of `bytes` (Go's `hash/fnv.New64a`), the hash KEP-5866 shards on.
///
/// ```
/// use kcache::sharding::fnv1a64;
/// assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
/// assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
/// ```
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// The object field a shard selector hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Field {
    /// `object.metadata.uid`: spreads objects evenly, whatever their namespaces.
    #[default]
    Uid,
    /// `object.metadata.namespace`: keeps each namespace on one shard. FNV-1a mixes a
    /// string's last bytes into its high bits poorly, so namespaces that differ only in a
    /// suffix (`team-1`, `team-2`, …) tend to fall into the same shard: check the spread.
    Namespace,
}

impl Field {
    /// The CEL path the server expects (`object.metadata.uid`).
    pub fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }

    /// The hash of this field of an object (an absent field hashes as `""`, as on the server).
    pub fn hash(self, meta: &ObjectMeta) -> u64 {
        let value = match self {
            Self::Uid => meta.uid.as_deref(),
            Self::Namespace => meta.namespace.as_deref(),
        };
        fnv1a64(value.unwrap_or("").as_bytes())
    }
}

/// One hash range `[start, end)`, `start < end ≤ 2^64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Range {
    start: u128,
    end: u128,
}

impl Range {
    /// `[start, end)`; `None` unless `start < end ≤ 2^64`.
    pub fn new(start: u128, end: u128) -> Option<Self> {
        (start < end && end <= HASH_SPACE).then_some(Self { start, end })
    }

    /// The inclusive start.
    pub fn start(&self) -> u128 {
        self.start
    }

    /// The exclusive end.
    pub fn end(&self) -> u128 {
        self.end
    }

    /// Whether `hash` lies in the range.
    pub fn contains(&self, hash: u64) -> bool {
        let h = u128::from(hash);
        self.start <= h && h < self.end
    }
}

/// A parsed shard selector: the field and the ranges (OR-ed).
///
/// A selector with no ranges matches nothing. The server cannot be asked for nothing (it
/// rejects an empty selector), so [`Selector::to_wire`] then asks for the smallest range there
/// is, `[2^64−1, 2^64)`, and the client-side filter drops whatever that brings.
///
/// ```
/// use kcache::sharding::{Field, Selector};
/// let s = Selector::parse(
///     "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
/// )?;
/// assert_eq!(s.field(), Field::Uid);
/// assert!(s.matches_hash(0x7fff_ffff_ffff_ffff));
/// assert!(!s.matches_hash(0x8000_0000_0000_0000));
/// assert_eq!(Selector::parse(&s.to_wire())?, s);
/// # Ok::<(), kcache::sharding::ParseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Selector {
    field: Field,
    ranges: Vec<Range>,
}

impl Selector {
    /// A selector over `field` matching any of `ranges` (none: matches nothing).
    pub fn new(field: Field, ranges: Vec<Range>) -> Self {
        Self { field, ranges }
    }

    /// The hashed field.
    pub fn field(&self) -> Field {
        self.field
    }

    /// The ranges, in the order given.
    pub fn ranges(&self) -> &[Range] {
        &self.ranges
    }

    /// Whether the selector matches nothing.
    pub fn is_nothing(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether a hash is in any range.
    pub fn matches_hash(&self, hash: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(hash))
    }

    /// Whether an object (by its metadata) is selected.
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        !self.ranges.is_empty() && self.matches_hash(self.field.hash(meta))
    }

    /// The `shardSelector` query value to send (see the type docs for a selector of nothing).
    pub fn to_wire(&self) -> String {
        if self.ranges.is_empty() {
            return format!(
                "shardRange({}, '{}', '{}')",
                self.field.path(),
                hex(HASH_SPACE - 1),
                hex(HASH_SPACE)
            );
        }
        self.to_string()
    }

    /// Parses a selector in the server's grammar (see the module docs).
    ///
    /// # Errors
    /// [`ParseError`] saying what is wrong and where, for anything kube-apiserver would reject.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        Parser::new(text).selector()
    }
}

impl fmt::Display for Selector {
    /// The canonical form (the server echoes it in `shardInfo.selector`): `shardRange(field,
    /// '0x%016x', '0x%016x')` joined by ` || `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.field.path(),
                hex(r.start),
                hex(r.end)
            )?;
        }
        Ok(())
    }
}

fn hex(v: u128) -> String {
    if v == HASH_SPACE {
        "0x10000000000000000".to_owned()
    } else {
        format!("0x{v:016x}")
    }
}

/// A shard selector the server would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid shard selector at byte {at}: {message}")]
pub struct ParseError {
    at: usize,
    message: String,
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, pos: 0 }
    }

    fn fail<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            at: self.pos,
            message: message.into(),
        })
    }

    fn skip_ws(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        if self.text[self.pos..].starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), ParseError> {
        if self.eat(token) {
            Ok(())
        } else {
            self.fail(format!("expected `{token}`"))
        }
    }

    fn ident(&mut self) -> Result<&'a str, ParseError> {
        self.skip_ws();
        let rest = &self.text[self.pos..];
        let len = rest
            .char_indices()
            .find(|(i, c)| {
                !(c.is_ascii_alphabetic() || *c == '_' || (*i > 0 && c.is_ascii_digit()))
            })
            .map_or(rest.len(), |(i, _)| i);
        if len == 0 {
            return self.fail("expected a name");
        }
        self.pos += len;
        Ok(&rest[..len])
    }

    fn selector(&mut self) -> Result<Selector, ParseError> {
        if self.text.trim().is_empty() {
            return self.fail("empty shard selector; omit the parameter for an unfiltered list");
        }
        let (field, first) = self.call()?;
        let mut ranges = vec![first];
        loop {
            self.skip_ws();
            if self.pos == self.text.len() {
                break;
            }
            if !self.eat("||") {
                return self.fail("only shardRange() calls joined with || are allowed");
            }
            let (f, r) = self.call()?;
            if f != field {
                return self.fail(format!(
                    "all shard ranges must use the same field, got {} and {}",
                    field.path(),
                    f.path()
                ));
            }
            ranges.push(r);
        }
        Ok(Selector { field, ranges })
    }

    fn call(&mut self) -> Result<(Field, Range), ParseError> {
        let name = self.ident()?;
        if name != "shardRange" {
            return self.fail(format!(
                "unsupported function {name:?}; only shardRange() and || are allowed"
            ));
        }
        self.expect("(")?;
        let mut path = self.ident()?.to_owned();
        while self.eat(".") {
            path.push('.');
            path.push_str(self.ident()?);
        }
        let field = match path.as_str() {
            "object.metadata.uid" => Field::Uid,
            "object.metadata.namespace" => Field::Namespace,
            other => {
                return self.fail(format!(
                    "unsupported field path {other:?}; supported: object.metadata.uid, object.metadata.namespace"
                ));
            }
        };
        self.expect(",")?;
        let start = self.hex_literal("start")?;
        self.expect(",")?;
        let end = self.hex_literal("end")?;
        self.expect(")")?;
        match Range::new(start, end) {
            Some(r) if start < HASH_SPACE => Ok((field, r)),
            _ => self.fail(format!(
                "shard range start {} must be less than end {}",
                hex(start),
                hex(end)
            )),
        }
    }

    fn hex_literal(&mut self, what: &str) -> Result<u128, ParseError> {
        self.skip_ws();
        let quote = match self.text[self.pos..].chars().next() {
            Some(q @ ('\'' | '"')) => q,
            _ => return self.fail(format!("{what} must be a quoted string such as '0x…'")),
        };
        let body_start = self.pos + 1;
        let Some(len) = self.text[body_start..].find(quote) else {
            return self.fail("unterminated string");
        };
        let s = &self.text[body_start..body_start + len];
        self.pos = body_start + len + 1;
        let Some(digits) = s.strip_prefix("0x") else {
            return self.fail(format!("{what} must have the '0x' prefix, got {s:?}"));
        };
        if digits.is_empty() {
            return self.fail(format!("{what}: a hex value is required after '0x'"));
        }
        if !digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return self.fail(format!("{what}: invalid hex digits in {s:?}"));
        }
        match digits.len() {
            16 => u128::from_str_radix(digits, 16)
                .or_else(|_| self.fail(format!("{what}: invalid hex {s:?}"))),
            17 if digits == "10000000000000000" => Ok(HASH_SPACE),
            _ => self.fail(format!(
                "{what} must be a 0x-prefixed 16-digit hex value, got {s:?}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "object.metadata.uid";

    fn r(start: u128, end: u128) -> Range {
        Range::new(start, end).unwrap()
    }

    /// `TestParse` of `k8s.io/apiserver/pkg/sharding` v0.36.5, case by case.
    #[test]
    fn parses_what_kube_apiserver_parses_and_rejects_what_it_rejects() {
        type Case<'a> = (&'a str, Field, &'a [(u128, u128)]);
        let ok: &[Case<'_>] = &[
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
                Field::Uid,
                &[(0, 1 << 63)],
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
                Field::Uid,
                &[(0, HASH_SPACE)],
            ),
            (
                "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
                Field::Namespace,
                &[(0xaa, 0xff)],
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
                Field::Uid,
                &[(0, 1 << 63), (1 << 63, HASH_SPACE)],
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000005') || shardRange(object.metadata.uid, '0x0000000000000005', '0x000000000000000a') || shardRange(object.metadata.uid, '0x000000000000000a', '0x000000000000000f')",
                Field::Uid,
                &[(0, 5), (5, 10), (10, 15)],
            ),
            (
                "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')",
                Field::Uid,
                &[(0, 1 << 63)],
            ),
            (
                "  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  ",
                Field::Uid,
                &[(0, 1 << 63)],
            ),
        ];
        for (text, field, ranges) in ok {
            let s = Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.field(), *field, "{text}");
            let want: Vec<Range> = ranges.iter().map(|(a, b)| r(*a, *b)).collect();
            assert_eq!(s.ranges(), &want[..], "{text}");
        }
        let rejected = [
            "",
            "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '8000000000000000')",
            "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
            "shardRange(object.metadata.name, '0x00', '0x80')",
            "shardRange(object.metadata.labels, '0x00', '0x80')",
            "invalidFunc(object.metadata.uid, '0x00', '0x80')",
            "shardRange(object.metadata.uid, '0x000000000000000000', '0x80')",
            "shardRange(object.metadata.uid, '0x0g', '0x80')",
            "shardRange(object.metadata.uid, '0x0', '0x8') && shardRange(object.metadata.uid, '0x8', '0xf')",
            "shardRange(object.metadata.uid, 0, 8)",
            "object.metadata.uid > '0x0'",
            "shardRange(object.metadata.uid, '0x0')",
            "shardRange(object.metadata.uid, hex(0), '0x8')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0xff')",
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0xffffffffffffffff', '0x0000000000000000')",
        ];
        for text in rejected {
            assert!(Selector::parse(text).is_err(), "accepted {text:?}");
        }
    }

    /// `TestParseRoundTrip` of the same package: `String()` gives the input back.
    #[test]
    fn displays_the_canonical_form_the_server_echoes() {
        for text in [
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
        ] {
            let s = Selector::parse(text).unwrap();
            assert_eq!(s.to_string(), text);
            assert_eq!(Selector::parse(&s.to_string()).unwrap(), s);
        }
    }

    /// Go's `hash/fnv` 64a test vectors (`hash/fnv/fnv_test.go`, `golden64a`).
    #[test]
    fn fnv1a64_matches_go_hash_fnv() {
        let golden: &[(u64, &str)] = &[
            (0xcbf29ce484222325, ""),
            (0xaf63dc4c8601ec8c, "a"),
            (0x089c4407b545986a, "ab"),
            (0xe71fa2190541574b, "abc"),
        ];
        for (want, input) in golden {
            assert_eq!(fnv1a64(input.as_bytes()), *want, "{input:?}");
        }
    }

    /// `TestSelectorMatches`: a range is `[start, end)`, ranges are OR-ed, none matches nothing.
    #[test]
    fn matches_is_start_inclusive_end_exclusive() {
        let meta = ObjectMeta {
            uid: Some("test-uid-123".into()),
            namespace: Some("test-namespace".into()),
            ..ObjectMeta::default()
        };
        let h = u128::from(Field::Uid.hash(&meta));
        let at = |start: u128, end: u128| Selector::new(Field::Uid, vec![r(start, end)]);
        assert!(at(0, HASH_SPACE).matches(&meta));
        assert!(at(h, h + 1).matches(&meta));
        assert!(!at(h + 1, HASH_SPACE).matches(&meta));
        assert!(!at(0, h).matches(&meta));
        assert!(!Selector::new(Field::Uid, vec![]).matches(&meta));
        let ns = Selector::new(Field::Namespace, vec![r(0, HASH_SPACE)]);
        assert!(ns.matches(&meta));
        assert_eq!(
            u128::from(Field::Namespace.hash(&meta)),
            u128::from(fnv1a64(b"test-namespace"))
        );
        assert_eq!(UID, Field::Uid.path());
    }

    #[test]
    fn a_selector_of_nothing_asks_the_server_for_the_smallest_range() {
        let nothing = Selector::new(Field::Uid, vec![]);
        let wire = Selector::parse(&nothing.to_wire()).unwrap();
        assert_eq!(wire.ranges(), &[r(HASH_SPACE - 1, HASH_SPACE)]);
        assert!(!nothing.matches_hash(u64::MAX));
    }
}
