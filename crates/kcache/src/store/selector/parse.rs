//! The lexer and recursive-descent parser of apimachinery's `labels.Parse`, with its error
//! messages word for word (they reach users as kube-apiserver's `400 BadRequest` text).

use super::{Op, Requirement};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Ident,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// Where a token is read: in values, `in` and `notin` are plain identifiers (`a in (in)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits `s` into tokens and their literals, ending with [`Tok::End`]. Special symbols take
/// the longest operator they spell (`!=`, `==`); anything else up to a special symbol or a
/// blank is an identifier, or the keyword `in`/`notin`.
fn lex(s: &str) -> Vec<(Tok, &str)> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && is_whitespace(bytes[i]) {
            i += 1;
        }
        let Some(&b) = bytes.get(i) else {
            out.push((Tok::End, ""));
            return out;
        };
        let start = i;
        let tok = if is_special(b) {
            let two = bytes.get(i + 1) == Some(&b'=') && matches!(b, b'=' | b'!');
            i += if two { 2 } else { 1 };
            match (b, two) {
                (b'=', true) => Tok::DoubleEquals,
                (b'!', true) => Tok::NotEquals,
                (b'=', _) => Tok::Equals,
                (b'!', _) => Tok::DoesNotExist,
                (b'(', _) => Tok::OpenPar,
                (b')', _) => Tok::ClosedPar,
                (b',', _) => Tok::Comma,
                (b'>', _) => Tok::GreaterThan,
                _ => Tok::LessThan,
            }
        } else {
            while i < bytes.len() && !is_special(bytes[i]) && !is_whitespace(bytes[i]) {
                i += 1;
            }
            match &s[start..i] {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Ident,
            }
        };
        out.push((tok, &s[start..i]));
    }
}

struct Parser<'a> {
    items: Vec<(Tok, &'a str)>,
    pos: usize,
}

/// Parses `input` into requirements in their written order.
pub(super) fn parse(input: &str) -> Result<Vec<Requirement>, String> {
    let mut p = Parser {
        items: lex(input),
        pos: 0,
    };
    let mut requirements = Vec::new();
    loop {
        match p.lookahead(Context::Values) {
            (Tok::Ident | Tok::DoesNotExist, _) => {
                let r = p
                    .requirement()
                    .map_err(|e| format!("unable to parse requirement: {e}"))?;
                requirements.push(r);
                match p.consume(Context::Values) {
                    (Tok::End, _) => return Ok(requirements),
                    (Tok::Comma, _) => {
                        let (t, lit) = p.lookahead(Context::Values);
                        if t != Tok::Ident && t != Tok::DoesNotExist {
                            return Err(format!("found '{lit}', expected: identifier after ','"));
                        }
                    }
                    (_, lit) => {
                        return Err(format!("found '{lit}', expected: ',' or 'end of string'"));
                    }
                }
            }
            (Tok::End, _) => return Ok(requirements),
            (_, lit) => {
                return Err(format!(
                    "found '{lit}', expected: !, identifier, or 'end of string'"
                ));
            }
        }
    }
}

impl<'a> Parser<'a> {
    fn lookahead(&self, context: Context) -> (Tok, &'a str) {
        let (tok, lit) = self.items.get(self.pos).copied().unwrap_or((Tok::End, ""));
        match tok {
            Tok::In | Tok::NotIn if context == Context::Values => (Tok::Ident, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, context: Context) -> (Tok, &'a str) {
        let item = self.lookahead(context);
        self.pos += 1;
        item
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.key_and_inferred_operator()?;
        let (op, values) = match op {
            Some(op) => (op, Vec::new()),
            None => {
                let op = self.operator()?;
                let values = match op {
                    Op::In | Op::NotIn => self.values()?,
                    _ => self.exact_value()?,
                };
                (op, values)
            }
        };
        new_requirement(key, op, values)
    }

    /// The key, after an optional `!`; the operator when it follows from what comes next
    /// (`!key`, or `key` then `,` or the end: exists).
    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Tok::Ident {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errors = label_key_errors(lit);
        if !errors.is_empty() {
            // The key is checked with no field path, which Go prints as `<nil>`.
            return Err(invalid("<nil>", lit, &errors));
        }
        if op.is_none() && matches!(self.lookahead(Context::Values).0, Tok::End | Tok::Comma) {
            op = Some(Op::Exists);
        }
        Ok((lit.to_owned(), op))
    }

    fn operator(&mut self) -> Result<Op, String> {
        Ok(match self.consume(Context::KeyAndOperator) {
            (Tok::In, _) => Op::In,
            (Tok::Equals, _) => Op::Equals,
            (Tok::DoubleEquals, _) => Op::DoubleEquals,
            (Tok::GreaterThan, _) => Op::GreaterThan,
            (Tok::LessThan, _) => Op::LessThan,
            (Tok::NotIn, _) => Op::NotIn,
            (Tok::NotEquals, _) => Op::NotEquals,
            (_, lit) => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    /// `( v, … )`: a set, where an empty entry is the empty value and `()` is `("")`.
    fn values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Tok::Ident | Tok::Comma => {
                let set = self.identifiers()?;
                if self.consume(Context::Values).0 != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::ClosedPar => {
                self.pos += 1;
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A comma-separated list of possibly empty identifiers, up to (not including) `)`.
    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut set = Vec::new();
        loop {
            match self.consume(Context::Values) {
                (Tok::Ident, lit) => {
                    set.push(lit.to_owned());
                    match self.lookahead(Context::Values) {
                        (Tok::Comma, _) => {}
                        (Tok::ClosedPar, _) => return Ok(set),
                        (_, lit2) => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                (Tok::Comma, _) => {
                    if set.is_empty() {
                        set.push(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Tok::ClosedPar => {
                            set.push(String::new());
                            return Ok(set);
                        }
                        Tok::Comma => set.push(String::new()),
                        _ => {}
                    }
                }
                (_, lit) => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    /// The one value after `=`, `==`, `!=`, `>` or `<`; empty before `,` or the end.
    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.lookahead(Context::Values).0, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.consume(Context::Values) {
            (Tok::Ident, lit) => Ok(vec![lit.to_owned()]),
            (_, lit) => Err(format!("found '{lit}', expected: identifier")),
        }
    }
}

/// apimachinery's `NewRequirement` for what the parser produces: the values become a sorted
/// set; `>`/`<` need an integer; every value must be a valid label value.
fn new_requirement(key: String, op: Op, mut values: Vec<String>) -> Result<Requirement, String> {
    values.sort();
    values.dedup();
    let mut errors: Vec<String> = Vec::new();
    if matches!(op, Op::GreaterThan | Op::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errors.push(invalid(
                    &format!("values[{i}]"),
                    v,
                    &["for 'Gt', 'Lt' operators, the value must be an integer".to_owned()],
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let msgs = label_value_errors(v);
        if !msgs.is_empty() {
            errors.push(invalid(&format!("values[{i}][{key}]"), v, &msgs));
        }
    }
    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.as_slice() {
        [] => Ok(Requirement { key, op, values }),
        [one] => Err(one.clone()),
        many => Err(format!("[{}]", many.join(", "))),
    }
}

/// A `field.Invalid` error's text: `path: Invalid value: "value": detail; detail`.
fn invalid(path: &str, value: &str, details: &[String]) -> String {
    format!(
        "{path}: Invalid value: {}: {}",
        go_quote(value),
        details.join("; ")
    )
}

/// Go's `%q` of a string.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// apimachinery's `RegexError`: the message, examples and the regular expression.
fn regex_error(message: &str, regex: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{regex}')",
        examples.join(" or ")
    )
}

const LABEL_NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
                                  must start and end with an alphanumeric character";
const LABEL_NAME_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const NAME_EXAMPLES: &[&str] = &["MyName", "my.name", "123-abc"];

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at any length.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Lowercase RFC 1123 labels joined by dots, at any length.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        b.first()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && b.last()
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    })
}

/// apimachinery's `IsLabelKey`: an optional DNS-subdomain prefix and `/`, then a name of at
/// most 63 bytes.
fn label_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > 253 {
                    errors.push("prefix part must be no more than 253 bytes".to_owned());
                }
                if !is_dns1123_subdomain(prefix) {
                    errors.push(format!(
                        "prefix part {}",
                        regex_error(
                            "a lowercase RFC 1123 subdomain must consist of lower case \
                             alphanumeric characters, '-' or '.', and must start and end with an \
                             alphanumeric character",
                            "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                            &["example.com"],
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')",
                regex_error(LABEL_NAME_MESSAGE, LABEL_NAME_REGEX, NAME_EXAMPLES)
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 bytes".to_owned());
    }
    if !is_label_name(name) {
        errors.push(format!(
            "name part {}",
            regex_error(LABEL_NAME_MESSAGE, LABEL_NAME_REGEX, NAME_EXAMPLES)
        ));
    }
    errors
}

/// apimachinery's `IsLabelValue`: empty, or a label name of at most 63 bytes.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 bytes".to_owned());
    }
    if !value.is_empty() && !is_label_name(value) {
        errors.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}
