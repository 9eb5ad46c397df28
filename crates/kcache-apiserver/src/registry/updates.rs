//! What an update may change, as kube-apiserver v1.36's update validation decides it
//! (`pkg/apis/*/validation`'s `Validate*Update`, `pkg/registry/*/strategy.go`): the fields a
//! kind keeps once stored (a pod's spec but for images and a few more, a workload's selector,
//! most of a StatefulSet's spec, a claim's spec, a Job's completions, selector and template,
//! a Service's cluster IPs), a DaemonSet's template generation, and how many times the
//! object meta checks report a bad label or annotation on an update.

use serde_json::{Map, Value, json};

use super::field_rules::{cause, invalid_int};
use crate::resource::ResourceInfo;
use crate::status::Cause;

/// The annotation through which `apps/v1` carries a DaemonSet's template generation.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

fn is(info: &ResourceInfo, group: &str, plural: &str) -> bool {
    info.schema.is_none() && info.group == group && info.plural == plural
}

/// A value as Go's semantic equality sees it once decoded into a typed object: `null`, empty
/// strings, lists and maps are what an absent field is.
fn normal(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(a) => {
            let items: Vec<Value> = a.iter().map(|x| normal(x).unwrap_or(json!({}))).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(m) => {
            let kept: Map<String, Value> = m
                .iter()
                .filter_map(|(k, x)| normal(x).map(|x| (k.clone(), x)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    }
}

fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    a.and_then(normal) == b.and_then(normal)
}

fn shown(v: Option<&Value>) -> String {
    v.and_then(normal).unwrap_or(Value::Null).to_string()
}

/// `ValidateImmutableField`'s error.
fn immutable(field: &str, new: Option<&Value>) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {}: field is immutable", shown(new)),
    )
}

/// How many times an update reports each bad label or annotation: the generic update checks
/// validate the object meta twice (as on create and as an update), then the kind's own
/// update validation once more, twice where it also runs its create validation, or not at
/// all (PodDisruptionBudgets).
fn meta_repeats(info: &ResourceInfo) -> usize {
    if info.schema.is_some() {
        return 3;
    }
    match (info.group.as_str(), info.plural.as_str()) {
        ("policy", "poddisruptionbudgets") => 2,
        ("", "configmaps" | "secrets" | "pods" | "serviceaccounts" | "persistentvolumeclaims")
        | ("batch", "jobs")
        | ("networking.k8s.io", "ingresses")
        | (
            "rbac.authorization.k8s.io",
            "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings",
        ) => 4,
        _ => 3,
    }
}

/// The causes of an update as kube-apiserver lists them: `causes` holds the object's own
/// validation (as on create); bad labels and annotations are repeated as its update checks
/// repeat them, and a Job's own validation runs twice (as a Job and as a Job update).
pub(crate) fn repeated(info: &ResourceInfo, causes: Vec<Cause>) -> Vec<Cause> {
    let meta = |c: &Cause| c.field == "metadata.labels" || c.field == "metadata.annotations";
    let (labels, rest): (Vec<Cause>, Vec<Cause>) = causes.into_iter().partition(meta);
    let mut out = Vec::new();
    for _ in 0..meta_repeats(info) {
        out.extend(labels.iter().cloned());
    }
    let spec_repeats = if is(info, "batch", "jobs") { 2 } else { 1 };
    for _ in 0..spec_repeats {
        out.extend(rest.iter().cloned());
    }
    out
}

/// The fields of `old` an update to `new` may not change (both after defaulting).
pub(crate) fn immutable_causes(
    info: &ResourceInfo,
    old: &Value,
    new: &Map<String, Value>,
) -> Vec<Cause> {
    let old_spec = old.get("spec");
    let new_spec = new.get("spec");
    let at = |s: Option<&Value>, k: &str| s.and_then(|s| s.get(k)).cloned();
    let mut causes = Vec::new();
    if is(info, "", "pods") {
        causes.extend(pod_spec_causes(old_spec, new_spec));
    }
    if is(info, "apps", "deployments")
        || is(info, "apps", "replicasets")
        || is(info, "apps", "daemonsets")
    {
        let (a, b) = (at(old_spec, "selector"), at(new_spec, "selector"));
        if !same(a.as_ref(), b.as_ref()) {
            causes.push(immutable("spec.selector", b.as_ref()));
        }
    }
    if is(info, "apps", "statefulsets") {
        let strip = |s: Option<&Value>| {
            let mut s = s.cloned().unwrap_or(json!({}));
            if let Some(m) = s.as_object_mut() {
                for k in [
                    "replicas",
                    "ordinals",
                    "template",
                    "updateStrategy",
                    "minReadySeconds",
                    "revisionHistoryLimit",
                    "persistentVolumeClaimRetentionPolicy",
                ] {
                    m.remove(k);
                }
            }
            s
        };
        if !same(Some(&strip(old_spec)), Some(&strip(new_spec))) {
            causes.push(cause(
                "FieldValueForbidden",
                "spec",
                "Forbidden: updates to statefulset spec for fields other than 'replicas', \
                 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', \
                 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
                    .to_owned(),
            ));
        }
    }
    if is(info, "", "persistentvolumeclaims") {
        causes.extend(claim_causes(old_spec, new_spec));
    }
    if is(info, "batch", "jobs") {
        causes.extend(job_causes(old_spec, new_spec));
    }
    if is(info, "", "services") {
        causes.extend(cluster_ip_causes(old_spec, new_spec));
    }
    causes
}

/// `ValidatePodUpdate`: containers may not be added or removed (reported elsewhere), and the
/// spec may change only in its containers' images, `activeDeadlineSeconds` and tolerations.
fn pod_spec_causes(old: Option<&Value>, new: Option<&Value>) -> Vec<Cause> {
    let count = |s: Option<&Value>, k: &str| {
        s.and_then(|s| s.get(k))
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    if count(old, "containers") != count(new, "containers") {
        return Vec::new();
    }
    if count(old, "initContainers") != count(new, "initContainers") {
        return vec![cause(
            "FieldValueForbidden",
            "spec.initContainers",
            "Forbidden: pod updates may not add or remove containers".to_owned(),
        )];
    }
    let mut munged = new.cloned().unwrap_or(json!({}));
    let Some(m) = munged.as_object_mut() else {
        return Vec::new();
    };
    for list in ["containers", "initContainers"] {
        let olds = old.and_then(|s| s.get(list)).and_then(Value::as_array);
        if let (Some(Value::Array(items)), Some(olds)) = (m.get_mut(list), olds) {
            for (c, o) in items.iter_mut().zip(olds) {
                if let Some(c) = c.as_object_mut() {
                    match o.get("image") {
                        Some(img) => c.insert("image".into(), img.clone()),
                        None => c.remove("image"),
                    };
                }
            }
        }
    }
    for k in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        match old.and_then(|s| s.get(k)) {
            Some(v) => m.insert(k.into(), v.clone()),
            None => m.remove(k),
        };
    }
    // Compared as decoded: what the update left out is defaulted again.
    let mut old = old.cloned().unwrap_or(json!({}));
    for spec in [&mut munged, &mut old] {
        if let Some(m) = spec.as_object_mut() {
            super::apps::pod_spec_defaults(m);
        }
    }
    if same(Some(&munged), Some(&old)) {
        return Vec::new();
    }
    vec![cause(
        "FieldValueForbidden",
        "spec",
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,\
         `spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only \
         additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to \
         be set to 1 if it was previously negative)"
            .to_owned(),
    )]
}

/// A storage quantity in bytes, roughly (enough to order two requests).
fn storage_bytes(v: Option<&Value>) -> f64 {
    let s = match v {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Number(n)) => return n.as_f64().unwrap_or(0.0),
        _ => return 0.0,
    };
    let units: [(&str, f64); 12] = [
        ("Ki", 1024.0),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("m", 1e-3),
    ];
    for (suffix, factor) in units {
        if let Some(n) = s.strip_suffix(suffix) {
            return n.parse::<f64>().map_or(0.0, |n| n * factor);
        }
    }
    s.parse().unwrap_or(0.0)
}

/// `ValidatePersistentVolumeClaimUpdate` for a claim not yet bound: its spec is immutable
/// (a volume name may still be set), and its storage request may not fall to the capacity
/// it has (none).
fn claim_causes(old: Option<&Value>, new: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut old_munged = old.cloned().unwrap_or(json!({}));
    let empty_name = old
        .and_then(|s| s.get("volumeName"))
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if empty_name && let Some(m) = old_munged.as_object_mut() {
        match new.and_then(|s| s.get("volumeName")) {
            Some(v) => m.insert("volumeName".into(), v.clone()),
            None => m.remove("volumeName"),
        };
    }
    if !same(Some(&old_munged), new) {
        causes.push(cause(
            "FieldValueForbidden",
            "spec",
            "Forbidden: spec is immutable after creation except resources.requests and \
             volumeAttributesClassName for bound claims"
                .to_owned(),
        ));
    }
    let size =
        |s: Option<&Value>| storage_bytes(s.and_then(|s| s.pointer("/resources/requests/storage")));
    if size(new) < size(old) && size(new) <= 0.0 {
        causes.push(cause(
            "FieldValueForbidden",
            "spec.resources.requests.storage",
            "Forbidden: field can not be less than status.capacity".to_owned(),
        ));
    }
    causes
}

/// `ValidateJobSpecUpdate`: completions (unless indexed), the selector and, unless the Job is
/// suspended, the pod template are immutable.
fn job_causes(old: Option<&Value>, new: Option<&Value>) -> Vec<Cause> {
    let get = |s: Option<&Value>, k: &str| s.and_then(|s| s.get(k)).cloned();
    let mut causes = Vec::new();
    let indexed = new.and_then(|s| s.get("completionMode")) == Some(&json!("Indexed"));
    let (a, b) = (get(old, "completions"), get(new, "completions"));
    if !indexed && a != b {
        causes.push(match b.as_ref().and_then(Value::as_i64) {
            Some(n) => invalid_int("spec.completions", n, "field is immutable"),
            None => immutable("spec.completions", b.as_ref()),
        });
    }
    let (a, b) = (get(old, "selector"), get(new, "selector"));
    if !same(a.as_ref(), b.as_ref()) {
        causes.push(immutable("spec.selector", b.as_ref()));
    }
    let suspended = old.and_then(|s| s.get("suspend")) == Some(&json!(true));
    let (a, b) = (get(old, "template"), get(new, "template"));
    if !suspended && !same(a.as_ref(), b.as_ref()) {
        causes.push(immutable("spec.template", b.as_ref()));
    }
    for k in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        let (a, b) = (get(old, k), get(new, k));
        if !same(a.as_ref(), b.as_ref()) {
            causes.push(immutable(&format!("spec.{k}"), b.as_ref()));
        }
    }
    causes
}

/// A Service's primary cluster IP may not change once set (unless it is or becomes an
/// ExternalName service); a `clusterIP` changed without `clusterIPs` replaces them.
fn cluster_ip_causes(old: Option<&Value>, new: Option<&Value>) -> Vec<Cause> {
    let ty = |s: Option<&Value>| {
        s.and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_owned()
    };
    if ty(old) == "ExternalName" || ty(new) == "ExternalName" {
        return Vec::new();
    }
    let ip = |s: Option<&Value>| {
        s.and_then(|s| s.get("clusterIP"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let ips = |s: Option<&Value>| s.and_then(|s| s.get("clusterIPs")).cloned();
    let mut new_ips = ips(new);
    if ips(new) == ips(old) && ip(new) != ip(old) && !ip(new).is_empty() {
        new_ips = Some(json!([ip(new)]));
    }
    let first = |v: &Option<Value>| v.as_ref().and_then(|v| v.get(0)).cloned();
    match (first(&ips(old)), first(&new_ips)) {
        (Some(a), Some(b)) if a != b => vec![cause(
            "FieldValueInvalid",
            "spec.clusterIPs[0]",
            format!(
                "Invalid value: {}: may not change once set",
                shown(new_ips.as_ref())
            ),
        )],
        _ => Vec::new(),
    }
}

/// A DaemonSet's template generation (kept in an annotation by `apps/v1`): 1 on create
/// unless the object carries a higher one, one more than before when an update changes the
/// template, else the stored one.
pub(crate) fn template_generation(
    info: &ResourceInfo,
    old: Option<&Value>,
    obj: &mut Map<String, Value>,
) {
    if !is(info, "apps", "daemonsets") {
        return;
    }
    let generation_of = |m: Option<&Value>| {
        m.and_then(|m| m.pointer(&format!("/metadata/annotations/{TEMPLATE_GENERATION}")))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<i64>().ok())
    };
    let generation = match old {
        None => generation_of(Some(&Value::Object(obj.clone())))
            .unwrap_or(1)
            .max(1),
        Some(old) => {
            let was = generation_of(Some(old)).unwrap_or(0);
            let (a, b) = (
                old.pointer("/spec/template"),
                obj.get("spec").and_then(|s| s.get("template")),
            );
            if same(a, b) { was } else { was + 1 }
        }
    };
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[TEMPLATE_GENERATION] = json!(generation.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_null_and_empty_values_are_the_same_field() {
        assert!(same(Some(&json!({"a": [], "b": null, "c": ""})), None));
        assert!(!same(Some(&json!({"a": 0})), None));
    }

    #[test]
    fn a_changed_cluster_ip_without_cluster_ips_is_reported_on_the_first_of_them() {
        let old = json!({"clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"]});
        let new = json!({"clusterIP": "10.0.0.123", "clusterIPs": ["10.96.0.5"]});
        let causes = cluster_ip_causes(Some(&old), Some(&new));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.clusterIPs[0]");
        assert!(
            causes[0].message.contains("[\"10.0.0.123\"]"),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn a_pod_may_change_its_images_but_not_its_restart_policy() {
        let old = json!({"containers": [{"name": "c", "image": "a"}], "restartPolicy": "Always"});
        let image = json!({"containers": [{"name": "c", "image": "b"}], "restartPolicy": "Always"});
        assert!(pod_spec_causes(Some(&old), Some(&image)).is_empty());
        let policy = json!({"containers": [{"name": "c", "image": "a"}], "restartPolicy": "Never"});
        assert_eq!(pod_spec_causes(Some(&old), Some(&policy))[0].field, "spec");
    }
}
