//! Defaults kube-apiserver v1.36 gives a Job (`pkg/apis/batch/v1/defaults.go`; the selector
//! its strategy generates is in `jobs`) and a NetworkPolicy (`pkg/apis/networking/v1`).

use serde_json::{Map, Value, json};

fn default(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_owned(), value);
    }
}

/// `SetDefaults_Job`: one completion and one pod at a time unless either is set, six
/// retries (or as many as int32 allows with per-index retries), not indexed, not suspended,
/// pods replaced once terminated or failed (failed only, with a pod failure policy), no
/// manual selector, the Job's labels its template's when it has none, and the template's
/// pod defaults.
pub(crate) fn job_defaults(obj: &mut Map<String, Value>) {
    let template_labels = obj
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    if let Some(labels) = template_labels
        && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".into(), labels);
    }
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    if spec.is_null() {
        *spec = json!({});
    }
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    let unset = |s: &Map<String, Value>, k: &str| s.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
    }
    default(spec, "parallelism", json!(1));
    let per_index = !unset(spec, "backoffLimitPerIndex");
    default(
        spec,
        "backoffLimit",
        json!(if per_index { i64::from(i32::MAX) } else { 6 }),
    );
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    let replacement = if unset(spec, "podFailurePolicy") {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default(spec, "podReplacementPolicy", json!(replacement));
    default(spec, "manualSelector", json!(false));
    if let Some(pod_spec) = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    {
        super::apps::pod_spec_defaults(pod_spec);
    }
}

/// `SetDefaults_NetworkPolicy`: ports are TCP unless told, and a policy without types is an
/// Ingress policy, and an Egress one too when it has egress rules.
pub(crate) fn network_policy_defaults(obj: &mut Map<String, Value>) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for rules in ["ingress", "egress"] {
        let Some(Value::Array(rules)) = spec.get_mut(rules) else {
            continue;
        };
        for rule in rules.iter_mut() {
            let Some(Value::Array(ports)) = rule.get_mut("ports") else {
                continue;
            };
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                default(p, "protocol", json!("TCP"));
            }
        }
    }
    let no_types = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_types {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
}
