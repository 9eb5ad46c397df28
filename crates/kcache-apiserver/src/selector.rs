//! Label and field selectors: parsing and matching.
//!
//! Label selectors are parsed and matched by the cache's parser (`kcache::store`): `=`, `==`,
//! `!=`, `in`, `notin`, `key` (exists), `!key` (does not exist) and the numeric `>`/`<`.
//! Field selectors support `=`, `==`, `!=` on
//! `metadata.name`, `metadata.namespace` and the extra fields a resource allows.

use serde_json::Value;

/// Why a selector could not be parsed; the message is the real server's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SelectorError(pub(crate) String);

/// A parsed label selector; the empty selector matches everything. The grammar, the
/// matching and the error words are the cache's ([`kcache::store::LabelSelector`],
/// apimachinery's `labels.Parse`): one parser for the client and the server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(kcache::store::LabelSelector);

impl LabelSelector {
    /// Parses a selector string such as `app=web,tier in (a,b),!legacy`.
    ///
    /// # Errors
    /// A [`SelectorError`] with the real server's wording when the string is malformed.
    pub(crate) fn parse(s: &str) -> Result<Self, SelectorError> {
        kcache::store::parse_label_selector(s)
            .map(Self)
            .map_err(|e| SelectorError(e.to_string()))
    }

    /// Whether the selector is empty (matches everything).
    #[must_use]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.selects_all()
    }

    /// Whether an object (its full JSON) matches.
    #[must_use]
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        self.0
            .matches_by(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
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
