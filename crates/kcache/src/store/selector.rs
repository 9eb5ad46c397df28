//! Label selectors in the Kubernetes string syntax (`app=web,tier!=db,env in (a,b),!legacy`),
//! parsed into kube-core's [`Selector`], which does the matching.
//!
//! kube-core models selectors and matches them but does not parse the string form; this module
//! adds the parser. Set-based (`in`, `notin`), equality (`=`, `==`, `!=`) and existence (`key`,
//! `!key`) requirements are supported; the numeric `>`/`<` requirements are rejected because
//! kube-core's [`Expression`] cannot hold them.

use std::collections::{BTreeMap, BTreeSet};

use kube_core::{Expression, Resource, Selector, SelectorExt};

/// A label selector string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {reason}")]
pub struct SelectorError {
    selector: String,
    reason: String,
}

/// Parses a label selector in the Kubernetes string syntax. The empty string selects everything.
///
/// ```
/// use std::collections::BTreeMap;
/// use kcache::store::parse_label_selector;
/// use kube_core::SelectorExt;
///
/// let selector = parse_label_selector("app=web, env in (prod,staging), !legacy")?;
/// let labels = BTreeMap::from([
///     ("app".to_string(), "web".to_string()),
///     ("env".to_string(), "prod".to_string()),
/// ]);
/// assert!(selector.matches(&labels));
/// # Ok::<(), kcache::store::SelectorError>(())
/// ```
///
/// # Errors
/// [`SelectorError`] on a syntax error, an invalid label key or value, or an unsupported
/// operator (`>`, `<`).
pub fn parse_label_selector(input: &str) -> Result<Selector, SelectorError> {
    let error = |reason: String| SelectorError {
        selector: input.to_owned(),
        reason,
    };
    let tokens = lex(input).map_err(error)?;
    Parser { tokens, pos: 0 }
        .parse()
        .map(|exprs| exprs.into_iter().collect())
        .map_err(error)
}

/// Whether `obj`'s labels match `selector`.
pub fn matches_labels<K: Resource>(selector: &Selector, obj: &K) -> bool {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    selector.matches(obj.meta().labels.as_ref().unwrap_or(&EMPTY))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Not,
    Eq,
    NotEq,
    Open,
    Close,
    Comma,
    Compare(char),
}

fn lex(input: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            ',' => Token::Comma,
            '(' => Token::Open,
            ')' => Token::Close,
            '<' | '>' => Token::Compare(c),
            '!' if chars.next_if(|&(_, c)| c == '=').is_some() => Token::NotEq,
            '!' => Token::Not,
            '=' => {
                chars.next_if(|&(_, c)| c == '=');
                Token::Eq
            }
            _ => {
                let mut end = start + c.len_utf8();
                while let Some((i, c)) = chars.next_if(|&(_, c)| !is_special(c)) {
                    end = i + c.len_utf8();
                }
                Token::Ident(input[start..end].to_owned())
            }
        };
        tokens.push(token);
    }
    Ok(tokens)
}

fn is_special(c: char) -> bool {
    c.is_whitespace() || matches!(c, ',' | '(' | ')' | '<' | '>' | '!' | '=')
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        token
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn parse(mut self) -> Result<Vec<Expression>, String> {
        let mut exprs = Vec::new();
        if self.tokens.is_empty() {
            return Ok(exprs);
        }
        loop {
            exprs.push(self.requirement()?);
            match self.next() {
                None => return Ok(exprs),
                Some(Token::Comma) => {}
                Some(other) => return Err(format!("expected ',' but found {other:?}")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Expression, String> {
        match self.next() {
            Some(Token::Not) => Ok(Expression::DoesNotExist(self.key()?)),
            Some(Token::Ident(key)) => {
                validate_key(&key)?;
                match self.peek() {
                    None | Some(Token::Comma) => Ok(Expression::Exists(key)),
                    Some(Token::Eq) => {
                        self.pos += 1;
                        Ok(Expression::Equal(key, self.value()?))
                    }
                    Some(Token::NotEq) => {
                        self.pos += 1;
                        Ok(Expression::NotEqual(key, self.value()?))
                    }
                    Some(Token::Ident(op)) if op == "in" => {
                        self.pos += 1;
                        Ok(Expression::In(key, self.values()?))
                    }
                    Some(Token::Ident(op)) if op == "notin" => {
                        self.pos += 1;
                        Ok(Expression::NotIn(key, self.values()?))
                    }
                    Some(Token::Compare(op)) => Err(format!(
                        "the numeric operator {op:?} is not supported by this selector type"
                    )),
                    Some(other) => Err(format!("unexpected {other:?} after key {key:?}")),
                }
            }
            Some(other) => Err(format!("expected a label key but found {other:?}")),
            None => Err("expected a label key but found the end".to_owned()),
        }
    }

    fn key(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Token::Ident(key)) => validate_key(&key).map(|()| key),
            other => Err(format!("expected a label key but found {other:?}")),
        }
    }

    /// A single value after `=`, `==` or `!=`; may be empty (`app=`).
    fn value(&mut self) -> Result<String, String> {
        match self.peek() {
            None | Some(Token::Comma) => Ok(String::new()),
            Some(Token::Ident(_)) => match self.next() {
                Some(Token::Ident(value)) => validate_value(&value).map(|()| value),
                _ => unreachable!("peeked an identifier"),
            },
            Some(other) => Err(format!("expected a label value but found {other:?}")),
        }
    }

    /// `( v1, v2, … )`; an empty entry is the empty value.
    fn values(&mut self) -> Result<BTreeSet<String>, String> {
        if self.next() != Some(Token::Open) {
            return Err("expected '(' after 'in'/'notin'".to_owned());
        }
        let mut values = BTreeSet::new();
        loop {
            let value = match self.peek() {
                Some(Token::Ident(_)) => self.value()?,
                _ => String::new(),
            };
            values.insert(value);
            match self.next() {
                Some(Token::Comma) => {}
                Some(Token::Close) => return Ok(values),
                other => return Err(format!("expected ',' or ')' but found {other:?}")),
            }
        }
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters that starts and ends alphanumeric, with `-`, `_`, `.` inside.
fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        if !ok {
            return Err(format!("invalid label key prefix in {key:?}"));
        }
    }
    if name.is_empty() || !is_label_token(name) {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(())
}

/// A label value: empty, or at most 63 characters, alphanumeric at both ends, `-`, `_`, `.`
/// inside.
fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_token(value) {
        Ok(())
    } else {
        Err(format!("invalid label value {value:?}"))
    }
}

fn is_label_token(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn set(values: &[&str]) -> BTreeSet<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn parses_every_operator_into_kube_core_expressions() {
        let selector =
            parse_label_selector("a=1,b==2,c!=3,d in (x, y),e notin (z),f,!g,example.com/h=v")
                .unwrap();
        let expected: Selector = [
            Expression::Equal("a".into(), "1".into()),
            Expression::Equal("b".into(), "2".into()),
            Expression::NotEqual("c".into(), "3".into()),
            Expression::In("d".into(), set(&["x", "y"])),
            Expression::NotIn("e".into(), set(&["z"])),
            Expression::Exists("f".into()),
            Expression::DoesNotExist("g".into()),
            Expression::Equal("example.com/h".into(), "v".into()),
        ]
        .into_iter()
        .collect();
        assert_eq!(selector, expected);
    }

    #[test]
    fn empty_selector_selects_everything() {
        let selector = parse_label_selector("  ").unwrap();
        assert!(selector.selects_all());
        assert!(selector.matches(&labels(&[("any", "thing")])));
    }

    #[test]
    fn matching_follows_kubernetes_semantics() {
        let l = labels(&[("app", "web"), ("env", "prod")]);
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("env in (prod,dev)", true),
            ("env notin (prod)", false),
            ("missing notin (prod)", true),
            ("missing in (prod)", false),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,env=dev", false),
            ("app=", false),
        ];
        for (input, want) in cases {
            let selector = parse_label_selector(input).unwrap();
            assert_eq!(selector.matches(&l), want, "{input}");
        }
    }

    #[test]
    fn malformed_selectors_are_rejected_with_an_error() {
        for bad in [
            "app=web,",
            ",app",
            "app in prod",
            "app in (a",
            "app notin",
            "=web",
            "app=web=db",
            "app=-bad-",
            "-app=web",
            "Bad_Prefix/x=y",
            "a b",
            "replicas>3",
            "!",
            "app=(x)",
        ] {
            let err = parse_label_selector(bad).expect_err(bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
