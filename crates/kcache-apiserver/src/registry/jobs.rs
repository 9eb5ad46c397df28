//! A Job's generated selector (`pkg/registry/batch/job/strategy.go`'s `generateSelector`):
//! the labels and selector kube-apiserver writes on create, and what its validation of an
//! update then requires of them (`pkg/apis/batch/validation`).

use serde_json::{Map, Value, json};

use super::field_rules::{cause, required};
use crate::resource::ResourceInfo;
use crate::status::Cause;

const LEGACY_UID: &str = "controller-uid";
const LEGACY_NAME: &str = "job-name";
const UID: &str = "batch.kubernetes.io/controller-uid";
const NAME: &str = "batch.kubernetes.io/job-name";

fn is_job(info: &ResourceInfo) -> bool {
    info.group == "batch" && info.plural == "jobs" && info.schema.is_none()
}

fn manual(obj: &Map<String, Value>) -> bool {
    obj.get("spec").and_then(|s| s.get("manualSelector")) == Some(&json!(true))
}

fn meta_str(obj: &Map<String, Value>, k: &str) -> String {
    obj.get("metadata")
        .and_then(|m| m.get(k))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// The selector kube-apiserver generates for a Job whose selector is not manual: its pods
/// carry the Job's name and uid in labels (legacy and `batch.kubernetes.io/` ones, unless
/// the template sets them), and the selector matches the uid.
pub(crate) fn job_selector(info: &ResourceInfo, obj: &mut Map<String, Value>) {
    if !is_job(info) {
        return;
    }
    let meta = obj.get("metadata");
    let field = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (name, uid) = (field("name"), field("uid"));
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("manualSelector") == Some(&json!(true)) {
        return;
    }
    let labels = [
        (LEGACY_NAME, &name),
        (NAME, &name),
        (LEGACY_UID, &uid),
        (UID, &uid),
    ];
    let template = spec.entry("template").or_insert_with(|| json!({}));
    if let Some(t) = template.as_object_mut() {
        let meta = t.entry("metadata").or_insert_with(|| json!({}));
        if !meta["labels"].is_object() {
            meta["labels"] = json!({});
        }
        for (k, v) in labels {
            if meta["labels"].get(k).is_none() {
                meta["labels"][k] = json!(v);
            }
        }
    }
    let selector = spec.entry("selector").or_insert_with(|| json!({}));
    if !selector.is_object() {
        *selector = json!({});
    }
    if !selector["matchLabels"].is_object() {
        selector["matchLabels"] = json!({});
    }
    if selector["matchLabels"].get(labels[3].0).is_none() {
        selector["matchLabels"][labels[3].0] = json!(uid);
    }
}

/// Whether `selector` (a `LabelSelector`) selects `labels`; `None`: it selects nothing.
fn selects(selector: Option<&Value>, labels: &Map<String, Value>) -> bool {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return false;
    };
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|exprs| {
            exprs.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or("");
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                    "In" => label(key).is_some_and(|v| values.contains(&v)),
                    "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                    "Exists" => label(key).is_some(),
                    "DoesNotExist" => label(key).is_none(),
                    _ => false,
                }
            })
        });
    by_labels && by_expressions
}

/// What a Job update's spec validation (run twice by kube-apiserver) says of the selector:
/// required, and matching the template's labels.
pub(crate) fn selector_causes(info: &ResourceInfo, obj: &Map<String, Value>) -> Vec<Cause> {
    if !is_job(info) {
        return Vec::new();
    }
    let spec = obj.get("spec");
    let selector = spec
        .and_then(|s| s.get("selector"))
        .filter(|s| !s.is_null());
    let labels_value = spec
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .cloned()
        .unwrap_or(Value::Null);
    let labels = labels_value.as_object().cloned().unwrap_or_default();
    let mut causes = Vec::new();
    if selector.is_none() {
        causes.push(required("spec.selector"));
    }
    if !selects(selector, &labels) {
        causes.push(cause(
            "FieldValueInvalid",
            "spec.template.metadata.labels",
            format!("Invalid value: {labels_value}: `selector` does not match template `labels`"),
        ));
    }
    causes
}

/// What a Job update's own validation (run once) says of a generated selector: the template
/// carries the Job's uid and name (the `batch.kubernetes.io/` labels too when the stored Job
/// has them), and the selector selects them.
pub(crate) fn generated_causes(
    info: &ResourceInfo,
    old: &Value,
    obj: &Map<String, Value>,
) -> Vec<Cause> {
    let selector = obj.get("spec").and_then(|s| s.get("selector"));
    if !is_job(info) || manual(obj) || selector.is_none_or(Value::is_null) {
        return Vec::new();
    }
    let prefixed = old
        .pointer("/spec/template/metadata/labels")
        .and_then(|l| l.get(UID))
        .is_some();
    let (uid, name) = (meta_str(obj, "uid"), meta_str(obj, "name"));
    let labels_value = obj
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .cloned()
        .unwrap_or(Value::Null);
    let labels = labels_value.as_object().cloned().unwrap_or_default();
    let mut wanted = vec![(LEGACY_UID, &uid), (LEGACY_NAME, &name)];
    if prefixed {
        wanted.extend([(UID, &uid), (NAME, &name)]);
    }
    let mut causes = Vec::new();
    let mut expected = Map::new();
    for (key, value) in wanted {
        expected.insert(key.to_owned(), json!(value));
        let at = format!("spec.template.metadata.labels[{key}]");
        match labels.get(key).and_then(Value::as_str) {
            None => causes.push(cause(
                "FieldValueRequired",
                &at,
                format!("Required value: must be '{value}'"),
            )),
            Some(v) if v != value.as_str() => causes.push(cause(
                "FieldValueInvalid",
                &at,
                format!("Invalid value: {labels_value}: must be '{value}'"),
            )),
            Some(_) => {}
        }
    }
    if !selects(selector, &expected) {
        causes.push(cause(
            "FieldValueInvalid",
            "spec.selector",
            format!(
                "Invalid value: {}: `selector` not auto-generated",
                selector.cloned().unwrap_or(Value::Null)
            ),
        ));
    }
    causes
}
