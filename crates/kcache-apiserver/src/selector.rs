//! Label and field selectors: parsing and matching.
//!
//! Label selectors support `=`, `==`, `!=`, `in`, `notin`, `key` (exists), `!key`
//! (does not exist) and the numeric `>`/`<`. Field selectors support `=`, `==`, `!=` on
//! `metadata.name`, `metadata.namespace` and the extra fields a resource allows.

use serde_json::Value;

/// Why a selector could not be parsed; the message is the real server's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SelectorError(pub(crate) String);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    reqs: Vec<(String, Op)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Open,
    Close,
    Comma,
    Eq,
    DoubleEq,
    NotEq,
    Bang,
    Gt,
    Lt,
    End,
}

impl Tok {
    fn literal(&self) -> String {
        match self {
            Tok::Ident(s) => s.clone(),
            Tok::Open => "(".into(),
            Tok::Close => ")".into(),
            Tok::Comma => ",".into(),
            Tok::Eq => "=".into(),
            Tok::DoubleEq => "==".into(),
            Tok::NotEq => "!=".into(),
            Tok::Bang => "!".into(),
            Tok::Gt => ">".into(),
            Tok::Lt => "<".into(),
            Tok::End => String::new(),
        }
    }
}

fn lex(s: &str) -> Vec<Tok> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push(Tok::Open);
                i += 1;
            }
            ')' => {
                out.push(Tok::Close);
                i += 1;
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            '=' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::DoubleEq);
                i += 2;
            }
            '=' => {
                out.push(Tok::Eq);
                i += 1;
            }
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::NotEq);
                i += 2;
            }
            '!' => {
                out.push(Tok::Bang);
                i += 1;
            }
            '>' => {
                out.push(Tok::Gt);
                i += 1;
            }
            '<' => {
                out.push(Tok::Lt);
                i += 1;
            }
            _ => {
                let start = i;
                while i < chars.len() && !"(),=!<> \t\n\r".contains(chars[i]) {
                    i += 1;
                }
                out.push(Tok::Ident(chars[start..i].iter().collect()));
            }
        }
    }
    out.push(Tok::End);
    out
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.pos).unwrap_or(&Tok::End)
    }
    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }
    fn err(found: &Tok, expected: &str) -> SelectorError {
        SelectorError(format!(
            "unable to parse requirement: found '{}', expected: {expected}",
            found.literal()
        ))
    }
    fn values(&mut self) -> Result<Vec<String>, SelectorError> {
        match self.next() {
            Tok::Open => {}
            t => return Err(Self::err(&t, "'('")),
        }
        let mut vals = Vec::new();
        loop {
            match self.next() {
                Tok::Ident(v) => vals.push(v),
                Tok::Close if vals.is_empty() => return Ok(vals),
                Tok::Comma => {
                    vals.push(String::new());
                    continue;
                }
                t => return Err(Self::err(&t, "',', ')' or identifier")),
            }
            match self.next() {
                Tok::Comma => {}
                Tok::Close => return Ok(vals),
                t => return Err(Self::err(&t, "',', ')' or identifier")),
            }
        }
    }
    fn single_value(&mut self) -> Result<String, SelectorError> {
        match self.peek().clone() {
            Tok::Ident(v) => {
                self.pos += 1;
                Ok(v)
            }
            Tok::Comma | Tok::End => Ok(String::new()),
            t => Err(Self::err(&t, "identifier")),
        }
    }
    fn requirement(&mut self) -> Result<(String, Op), SelectorError> {
        let negated = if *self.peek() == Tok::Bang {
            self.pos += 1;
            true
        } else {
            false
        };
        let key = match self.next() {
            Tok::Ident(k) => k,
            t => return Err(Self::err(&t, "identifier")),
        };
        validate_key(&key)?;
        if negated {
            return Ok((key, Op::NotExists));
        }
        let op = match self.peek().clone() {
            Tok::Comma | Tok::End => return Ok((key, Op::Exists)),
            Tok::Eq | Tok::DoubleEq => {
                self.pos += 1;
                Op::Eq(self.single_value()?)
            }
            Tok::NotEq => {
                self.pos += 1;
                Op::NotEq(self.single_value()?)
            }
            Tok::Gt | Tok::Lt => {
                let gt = *self.peek() == Tok::Gt;
                self.pos += 1;
                let v = self.single_value()?;
                let n: i64 = v.parse().map_err(|_| {
                    SelectorError(
                        "unable to parse requirement: for 'Gt', 'Lt' operators, the value must \
                         be an integer"
                            .to_owned(),
                    )
                })?;
                if gt { Op::Gt(n) } else { Op::Lt(n) }
            }
            Tok::Ident(w) if w == "in" => {
                self.pos += 1;
                Op::In(self.values()?)
            }
            Tok::Ident(w) if w == "notin" => {
                self.pos += 1;
                Op::NotIn(self.values()?)
            }
            t => {
                return Err(Self::err(&t, "in, notin, =, ==, !=, gt, lt"));
            }
        };
        Ok((key, op))
    }
}

fn validate_key(key: &str) -> Result<(), SelectorError> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(SelectorError(format!(
            "unable to parse requirement: invalid label key \"{key}\": name part must consist \
             of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character"
        )))
    }
}

impl LabelSelector {
    /// Parses a selector string such as `app=web,tier in (a,b),!legacy`.
    ///
    /// # Errors
    /// A [`SelectorError`] with the real server's wording when the string is malformed.
    pub(crate) fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut p = Parser {
            toks: lex(s),
            pos: 0,
        };
        let mut reqs = Vec::new();
        if *p.peek() == Tok::End {
            return Ok(Self { reqs });
        }
        loop {
            reqs.push(p.requirement()?);
            match p.next() {
                Tok::End => break,
                Tok::Comma => match p.peek() {
                    Tok::Ident(_) | Tok::Bang => {}
                    t => {
                        return Err(SelectorError(format!(
                            "found '{}', expected: identifier after ','",
                            t.literal()
                        )));
                    }
                },
                t => return Err(Parser::err(&t, "','")),
            }
        }
        Ok(Self { reqs })
    }

    /// Whether the selector is empty (matches everything).
    #[must_use]
    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether an object (its full JSON) matches.
    #[must_use]
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        self.reqs.iter().all(|(key, op)| {
            let val = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            match op {
                Op::Exists => val.is_some(),
                Op::NotExists => val.is_none(),
                Op::Eq(v) => val == Some(v.as_str()),
                Op::NotEq(v) => val != Some(v.as_str()),
                Op::In(vs) => val.is_some_and(|x| vs.iter().any(|v| v == x)),
                Op::NotIn(vs) => val.is_none_or(|x| vs.iter().all(|v| v != x)),
                Op::Gt(n) => val
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                Op::Lt(n) => val
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }
}

/// The field-selector fields of a kind with its own field label conversion in
/// kube-apiserver (`pkg/apis/core/v1/conversion.go`); `None` for the others, which allow
/// `metadata.name` and `metadata.namespace`.
#[must_use]
pub(crate) fn field_labels(
    info: &crate::resource::ResourceInfo,
) -> Option<&'static [&'static str]> {
    if !info.group.is_empty() {
        return None;
    }
    Some(match info.plural.as_str() {
        "pods" => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        "nodes" => &["metadata.name", "spec.unschedulable"],
        "events" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        "namespaces" => &["status.phase", "metadata.name"],
        "secrets" => &["type", "metadata.namespace", "metadata.name"],
        "services" => &[
            "metadata.namespace",
            "metadata.name",
            "spec.clusterIP",
            "spec.type",
        ],
        _ => return None,
    })
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    /// Field, `=` (or `!=`), value, and the value of the field when the object does not set it.
    reqs: Vec<(String, bool, String, &'static str)>,
}

/// Boolean fields that kube-apiserver's field label functions format with Go's `false` when
/// the object does not set them (nodes' `spec.unschedulable`, pods' `spec.hostNetwork`).
const FALSE_WHEN_MISSING: &[&str] = &["spec.unschedulable", "spec.hostNetwork"];

impl FieldSelector {
    /// Parses `metadata.name=x,metadata.namespace!=y`, allowing `metadata.name`,
    /// `metadata.namespace` and `extra_fields`.
    ///
    /// # Errors
    /// A [`SelectorError`] for unknown fields or malformed terms.
    pub(crate) fn parse(s: &str, extra_fields: &[&str]) -> Result<Self, SelectorError> {
        Self::parse_with(s, |field| {
            (field == "metadata.name"
                || field == "metadata.namespace"
                || extra_fields.contains(&field))
            .then_some("")
            .ok_or_else(|| {
                format!(
                    "\"{field}\" is not a known field selector: only \"metadata.name\", \
                         \"metadata.namespace\""
                )
            })
        })
    }

    /// Parses a selector for a kind with its own field labels (kube-apiserver's field label
    /// conversion functions): any other field is `field label not supported: F`.
    ///
    /// # Errors
    /// A [`SelectorError`] for unknown fields or malformed terms.
    pub(crate) fn parse_labels(s: &str, labels: &[&str]) -> Result<Self, SelectorError> {
        Self::parse_with(s, |field| {
            labels
                .contains(&field)
                .then_some(if FALSE_WHEN_MISSING.contains(&field) {
                    "false"
                } else {
                    ""
                })
                .ok_or_else(|| format!("field label not supported: {field}"))
        })
    }

    fn parse_with(
        s: &str,
        known: impl Fn(&str) -> Result<&'static str, String>,
    ) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if field.is_empty() && value.trim().is_empty() {
                // kube-apiserver drops a term with neither field nor value.
                continue;
            }
            let missing = known(field).map_err(SelectorError)?;
            reqs.push((field.to_owned(), eq, value.trim().to_owned(), missing));
        }
        Ok(Self { reqs })
    }

    /// Whether the selector is empty (matches everything).
    #[must_use]
    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The name a `metadata.name=` term pins, if any (lets a list skip a scan).
    #[must_use]
    #[cfg(test)]
    pub(crate) fn exact_name(&self) -> Option<&str> {
        self.reqs
            .iter()
            .find(|(f, eq, _, _)| *eq && f == "metadata.name")
            .map(|(_, _, v, _)| v.as_str())
    }

    /// Whether an object (its full JSON) matches.
    #[must_use]
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(field, eq, want, missing)| {
            let mut cur = Some(obj);
            for part in field.split('.') {
                cur = cur.and_then(|v| v.get(part));
            }
            let got = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => (*missing).to_owned(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_selector_operators_match_like_kubernetes() {
        let o = obj(json!({"app": "web", "n": "3"}));
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "app in (web,db)",
            "app notin (db)",
            "app",
            "!missing",
            "n>2",
            "n<4",
            "app=web,n in (1,3)",
            "missing notin (x)",
        ];
        for s in yes {
            assert!(
                LabelSelector::parse(s).unwrap().matches(&o),
                "{s} should match"
            );
        }
        let no = [
            "app=db",
            "app!=web",
            "app in (db)",
            "app notin (web)",
            "!app",
            "missing",
            "n>3",
        ];
        for s in no {
            assert!(
                !LabelSelector::parse(s).unwrap().matches(&o),
                "{s} should not match"
            );
        }
    }

    #[test]
    fn unterminated_in_list_is_rejected_with_the_real_message() {
        let e = LabelSelector::parse("a in (").unwrap_err();
        assert_eq!(
            e.0,
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
    }

    #[test]
    fn field_selector_rejects_unknown_fields() {
        let e = FieldSelector::parse("data.i=1", &[]).unwrap_err();
        assert_eq!(
            e.0,
            "\"data.i\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let f = FieldSelector::parse("metadata.name=a,metadata.namespace!=x", &[]).unwrap();
        assert!(f.matches(&obj(json!({}))));
        assert_eq!(f.exact_name(), Some("a"));
    }
}
