//! Label selectors in the Kubernetes string syntax (`app=web,tier!=db,env in (a,b),!legacy`,
//! `replicas>3`): [`parse_label_selector`] parses them into a [`LabelSelector`], which matches
//! objects' labels.
//!
//! The grammar, the matching and the error messages are apimachinery's `labels.Parse` (the
//! parser kube-apiserver runs on `?labelSelector=`): equality (`=`, `==`, `!=`), set-based
//! (`in`, `notin`), existence (`key`, `!key`) and the numeric `>`/`<` requirements, whose value
//! must be an integer and which match only labels that parse as integers. A kube-core
//! [`Selector`] converts into a [`LabelSelector`] with [`From`].

mod parse;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use kube_core::{Expression, Resource, Selector};

/// A label selector string that could not be parsed; the message is apimachinery's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SelectorError {
    selector: String,
    message: String,
}

impl SelectorError {
    /// The selector string that failed to parse.
    #[must_use]
    pub fn selector(&self) -> &str {
        &self.selector
    }
}

/// A parsed label selector: requirements that all must hold, sorted by key as apimachinery
/// sorts them. The default (empty) selector selects everything.
///
/// ```
/// use kcache::store::LabelSelector;
///
/// let selector: LabelSelector = "tier in (web,api),replicas>2".parse()?;
/// assert_eq!(selector.to_string(), "replicas>2,tier in (api,web)");
/// # Ok::<(), kcache::store::SelectorError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// One `key op values` term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    /// Sorted and deduplicated, as apimachinery's string sets are.
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// Parses a label selector in the Kubernetes string syntax. The empty string selects everything.
///
/// ```
/// use std::collections::BTreeMap;
/// use kcache::store::parse_label_selector;
///
/// let selector = parse_label_selector("app=web, env in (prod,staging), !legacy, replicas>2")?;
/// let labels = BTreeMap::from([
///     ("app".to_string(), "web".to_string()),
///     ("env".to_string(), "prod".to_string()),
///     ("replicas".to_string(), "3".to_string()),
/// ]);
/// assert!(selector.matches(&labels));
/// # Ok::<(), kcache::store::SelectorError>(())
/// ```
///
/// # Errors
/// [`SelectorError`] on a syntax error, an invalid label key or value, or a non-integer value
/// after `>` or `<`, with apimachinery's message.
pub fn parse_label_selector(input: &str) -> Result<LabelSelector, SelectorError> {
    parse::parse(input)
        .map(|mut requirements| {
            requirements.sort_by(|a, b| a.key.cmp(&b.key));
            LabelSelector { requirements }
        })
        .map_err(|message| SelectorError {
            selector: input.to_owned(),
            message,
        })
}

/// Whether `obj`'s labels match `selector`.
pub fn matches_labels<K: Resource>(selector: &LabelSelector, obj: &K) -> bool {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    selector.matches(obj.meta().labels.as_ref().unwrap_or(&EMPTY))
}

impl LabelSelector {
    /// Whether the selector has no requirement, so selects everything.
    #[must_use]
    pub fn selects_all(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_by(|key| labels.get(key).map(String::as_str))
    }

    /// Whether the labels that `label` looks up satisfy every requirement: for labels held in
    /// another form than a map of strings (a JSON object, a compact object's metadata).
    ///
    /// ```
    /// use kcache::store::LabelSelector;
    ///
    /// let selector: LabelSelector = "app=web,!legacy".parse()?;
    /// let labels = serde_json::json!({"app": "web"});
    /// assert!(selector.matches_by(|key| labels.get(key)?.as_str()));
    /// # Ok::<(), kcache::store::SelectorError>(())
    /// ```
    #[must_use]
    pub fn matches_by<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches(label(&r.key)))
    }
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        let has = |v: &str| self.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok();
        match self.op {
            Op::Equals | Op::DoubleEquals | Op::In => value.is_some_and(has),
            Op::NotEquals | Op::NotIn => !value.is_some_and(has),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::GreaterThan | Op::LessThan => {
                let (Some(got), [want]) = (value, self.values.as_slice()) else {
                    return false;
                };
                let (Ok(got), Ok(want)) = (got.parse::<i64>(), want.parse::<i64>()) else {
                    return false;
                };
                if self.op == Op::GreaterThan {
                    got > want
                } else {
                    got < want
                }
            }
        }
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_label_selector(s)
    }
}

/// The canonical form apimachinery prints: requirements sorted by key, no spaces except around
/// `in`/`notin`, set values sorted.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if r.op == Op::DoesNotExist {
                f.write_str("!")?;
            }
            f.write_str(&r.key)?;
            let op = match r.op {
                Op::Exists | Op::DoesNotExist => continue,
                Op::Equals => "=",
                Op::DoubleEquals => "==",
                Op::NotEquals => "!=",
                Op::GreaterThan => ">",
                Op::LessThan => "<",
                Op::In => " in ",
                Op::NotIn => " notin ",
            };
            let values = r.values.join(",");
            if matches!(r.op, Op::In | Op::NotIn) {
                write!(f, "{op}({values})")?;
            } else {
                write!(f, "{op}{values}")?;
            }
        }
        Ok(())
    }
}

/// kube-core's selector (built from `matchLabels`/`matchExpressions` or by hand) as a
/// [`LabelSelector`], with the same matching.
impl From<Selector> for LabelSelector {
    fn from(selector: Selector) -> Self {
        let mut requirements: Vec<Requirement> = selector
            .into_iter()
            .map(|expression| {
                let (key, op, values) = match expression {
                    Expression::In(k, v) => (k, Op::In, v.into_iter().collect()),
                    Expression::NotIn(k, v) => (k, Op::NotIn, v.into_iter().collect()),
                    Expression::Equal(k, v) => (k, Op::Equals, vec![v]),
                    Expression::NotEqual(k, v) => (k, Op::NotEquals, vec![v]),
                    Expression::Exists(k) => (k, Op::Exists, Vec::new()),
                    Expression::DoesNotExist(k) => (k, Op::DoesNotExist, Vec::new()),
                };
                Requirement { key, op, values }
            })
            .collect();
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Self { requirements }
    }
}
