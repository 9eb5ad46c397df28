//! kube-apiserver's validation of the kinds controllers write most, with its field paths and
//! wording (`k8s.io/apimachinery/pkg/util/validation`, `pkg/apis/core/validation`,
//! `pkg/apis/apps/validation`, `pkg/apis/rbac/validation`): label and annotation keys and
//! values of every built-in kind, pod specs (in pods and in the templates of workloads, Jobs,
//! CronJobs, ReplicationControllers and PodTemplates), Service ports, workload replicas, Job
//! and CronJob specs; RBAC is in `rbac`, other kinds in `kinds`.

use serde_json::{Map, Value, json};

use super::field_rules::{
    DNS_SUBDOMAIN_MSG, RBAC_GROUP, invalid, is_subdomain_format, port_name_errors, required,
};
use super::rbac;
use crate::resource::ResourceInfo;
use crate::status::Cause;

pub(crate) use super::rbac::{rbac_defaults, rbac_update_causes};

const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' \
     or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or \
     'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of \
     alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
     character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
     '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const DNS_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case \
     alphanumeric characters or '-', and must start and end with an alphanumeric character \
     (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// `content.IsLabelKey`: an optional DNS-subdomain prefix and `/`, then a name part (a
/// length and a format error may both be reported).
fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 bytes".to_owned());
                }
                if !is_subdomain_format(prefix) {
                    errs.push(format!("prefix part {DNS_SUBDOMAIN_MSG}"));
                }
            }
            *name
        }
        _ => {
            let msg = QUALIFIED_NAME_MSG.trim_start_matches("name part ");
            return vec![format!(
                "a valid label key {msg} with an optional DNS subdomain prefix and '/' \
                 (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_owned());
    }
    if !is_name_part(name) {
        errs.push(QUALIFIED_NAME_MSG.to_owned());
    }
    errs
}

/// `content.IsLabelValue`: at most 63 bytes, and empty or a name part (both may fail).
fn label_value_errors(v: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push("must be no more than 63 bytes");
    }
    if !v.is_empty() && !is_name_part(v) {
        errs.push(LABEL_VALUE_MSG);
    }
    errs
}

fn sorted_entries(m: Option<&Value>) -> Vec<(String, Value)> {
    let mut v: Vec<(String, Value)> = m
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Label keys and values and annotation keys (`ValidateObjectMeta`'s share of it).
pub(crate) fn metadata_causes(obj: &Map<String, Value>) -> Vec<Cause> {
    let meta = obj.get("metadata");
    let mut causes = Vec::new();
    for (k, v) in sorted_entries(meta.and_then(|m| m.get("labels"))) {
        for e in qualified_name_errors(&k) {
            causes.push(invalid("metadata.labels", &k, &e));
        }
        let v = v.as_str().unwrap_or("");
        for e in label_value_errors(v) {
            causes.push(invalid("metadata.labels", v, e));
        }
    }
    for (k, _) in sorted_entries(meta.and_then(|m| m.get("annotations"))) {
        for e in qualified_name_errors(&k.to_ascii_lowercase()) {
            causes.push(invalid("metadata.annotations", &k, &e));
        }
    }
    causes
}

/// Containers and their names and images of the pod spec at `path`.
fn pod_spec_causes(spec: Option<&Value>, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if containers.is_empty() {
        causes.push(required(&format!("{path}.containers")));
    }
    let mut seen: Vec<String> = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        let at = format!("{path}.containers[{i}]");
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            causes.push(required(&format!("{at}.name")));
        } else if !is_dns_label(name) {
            causes.push(invalid(&format!("{at}.name"), name, DNS_LABEL_MSG));
        } else if seen.iter().any(|n| n == name) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("Duplicate value: \"{name}\""),
                &format!("{at}.name"),
            ));
        }
        seen.push(name.to_owned());
        if c.get("image")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            causes.push(required(&format!("{at}.image")));
        }
        for (j, p) in c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let port = p.get("containerPort").and_then(Value::as_i64);
            if port.is_none_or(|n| n == 0) {
                causes.push(required(&format!("{at}.ports[{j}].containerPort")));
            } else if let Some(n) = port
                && !(1..=65535).contains(&n)
            {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {n}: must be between 1 and 65535, inclusive"),
                    &format!("{at}.ports[{j}].containerPort"),
                ));
            }
        }
        causes.extend(resource_limit_causes(c.get("resources"), &at));
        let env = c.get("env").and_then(Value::as_array);
        for (j, e) in env.into_iter().flatten().enumerate() {
            if e.get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                causes.push(required(&format!("{at}.env[{j}].name")));
            }
        }
    }
    causes
}

/// Service ports: `port` and an integer `targetPort` in 1..=65535.
fn service_causes(obj: &Map<String, Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ports = obj
        .get("spec")
        .and_then(|s| s.get("ports"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        // Several ports need names, and distinct ones.
        let name = p.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() && ports.len() > 1 {
            causes.push(required(&format!("spec.ports[{i}].name")));
        } else if names.contains(&name) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("Duplicate value: \"{name}\""),
                &format!("spec.ports[{i}].name"),
            ));
        }
        names.push(name);
        for field in ["port", "targetPort"] {
            // A missing `port` is Go's zero value.
            let n = p
                .get(field)
                .and_then(Value::as_i64)
                .or((field == "port").then_some(0));
            if field == "targetPort"
                && let Some(name) = p.get(field).and_then(Value::as_str)
            {
                for e in port_name_errors(name) {
                    causes.push(invalid(&format!("spec.ports[{i}].{field}"), name, e));
                }
            }
            if let Some(n) = n
                && !(1..=65535).contains(&n)
                && !(field == "targetPort" && n == 0)
            {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {n}: must be between 1 and 65535, inclusive"),
                    &format!("spec.ports[{i}].{field}"),
                ));
            }
        }
    }
    causes
}

/// A quantity (a JSON number or a Kubernetes quantity string) as a float, to compare two.
fn quantity_value(v: &Value) -> Option<f64> {
    if let Some(n) = v.as_f64() {
        return Some(n);
    }
    let s = v.as_str()?;
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(num * scale)
}

fn quantity_shown(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// `ValidateResourceRequirements`' comparison of each request with its limit: not above it,
/// and equal for resources that may not be overcommitted (huge pages, extended resources).
fn resource_limit_causes(resources: Option<&Value>, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let limits = resources.and_then(|r| r.get("limits"));
    let requests = resources.and_then(|r| r.get("requests"));
    for (name, request) in sorted_entries(requests) {
        let Some(limit) = limits.and_then(|l| l.get(&name)) else {
            continue;
        };
        let (Some(req), Some(lim)) = (quantity_value(&request), quantity_value(limit)) else {
            continue;
        };
        let overcommit = !name.starts_with("hugepages-")
            && (!name.contains('/') || name.starts_with("kubernetes.io/"));
        let why = if !overcommit && req != lim {
            "equal to"
        } else if req > lim {
            "less than or equal to"
        } else {
            continue;
        };
        causes.push(invalid(
            &format!("{at}.resources.requests"),
            &quantity_shown(&request),
            &format!("must be {why} {name} limit of {}", quantity_shown(limit)),
        ));
    }
    causes
}

/// `spec.replicas` of a workload, not negative.
fn replicas_causes(obj: &Map<String, Value>) -> Vec<Cause> {
    match obj
        .get("spec")
        .and_then(|s| s.get("replicas"))
        .and_then(Value::as_i64)
    {
        Some(n) if n < 0 => vec![Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {n}: must be greater than or equal to 0"),
            "spec.replicas",
        )],
        _ => Vec::new(),
    }
}

/// A Job's `backoffLimit` not negative.
fn job_causes(obj: &Map<String, Value>) -> Vec<Cause> {
    match obj
        .get("spec")
        .and_then(|s| s.get("backoffLimit"))
        .and_then(Value::as_i64)
    {
        Some(n) if n < 0 => vec![Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {n}: must be greater than or equal to 0"),
            "spec.backoffLimit",
        )],
        _ => Vec::new(),
    }
}

/// A Job's pod template's `restartPolicy`: `OnFailure` or `Never` (after the pod spec's own
/// causes, as kube-apiserver orders them).
fn job_restart_policy_causes(obj: &Map<String, Value>, spec_path: &str) -> Vec<Cause> {
    let field = format!("{spec_path}.restartPolicy");
    // `spec_path` starts at `spec`: the pointer below it.
    let below = spec_path.strip_prefix("spec").unwrap_or(spec_path);
    let pointer = format!("{}/restartPolicy", below.replace('.', "/"));
    let policy = obj
        .get("spec")
        .and_then(|s| s.pointer(&pointer))
        .and_then(Value::as_str)
        .unwrap_or("");
    // Any other value, `Always` included, is reported as required (kube-apiserver's words).
    match policy {
        "OnFailure" | "Never" => Vec::new(),
        _ => vec![Cause::new(
            "FieldValueRequired",
            "Required value: valid values: \"OnFailure\", \"Never\"",
            &field,
        )],
    }
}

/// Where a kind keeps its pod spec, if it has one.
fn pod_spec_path(info: &ResourceInfo) -> Option<(&'static str, &'static str)> {
    Some(match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => ("/spec", "spec"),
        ("", "podtemplates") => ("/template/spec", "template.spec"),
        ("", "replicationcontrollers")
        | ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => ("/spec/template/spec", "spec.template.spec"),
        ("batch", "cronjobs") => (
            "/spec/jobTemplate/spec/template/spec",
            "spec.jobTemplate.spec.template.spec",
        ),
        _ => return None,
    })
}

/// Every cause of `obj` as a `info` (create or update), in kube-apiserver's order: metadata,
/// then the kind's own.
pub(crate) fn causes(info: &ResourceInfo, obj: &Map<String, Value>) -> Vec<Cause> {
    let mut causes = metadata_causes(obj);
    if matches!(
        (info.group.as_str(), info.plural.as_str()),
        ("apps", "deployments" | "replicasets" | "statefulsets") | ("", "replicationcontrollers")
    ) {
        causes.extend(replicas_causes(obj));
    }
    if info.group.is_empty() && info.plural == "services" {
        causes.extend(service_causes(obj));
    }
    if info.group == RBAC_GROUP && info.plural.ends_with("bindings") {
        causes.extend(rbac::binding_causes(info, obj));
    }
    if info.group == RBAC_GROUP && matches!(info.plural.as_str(), "roles" | "clusterroles") {
        causes.extend(rbac::rule_causes(info, obj));
    }
    if info.group == "batch" && info.plural == "jobs" {
        causes.extend(job_causes(obj));
    }
    // apps/v1 workloads report a missing container list themselves (apps.rs).
    if let Some((ptr, path)) = pod_spec_path(info) {
        let spec = Value::Object(obj.clone());
        let mut pod = pod_spec_causes(spec.pointer(ptr), path);
        if info.group == "apps" {
            pod.retain(|c| c.field != format!("{path}.containers"));
        }
        causes.extend(pod);
    }
    if info.group == "batch" && info.plural == "jobs" {
        causes.extend(job_restart_policy_causes(obj, "spec.template.spec"));
    }
    if info.group == "batch" && info.plural == "cronjobs" {
        causes.extend(job_restart_policy_causes(
            obj,
            "spec.jobTemplate.spec.template.spec",
        ));
    }
    causes.extend(super::kinds::causes(info, obj));
    causes
}

/// What a create adds to the name's own causes (`name_causes`): a CronJob's name leaves room
/// for the 11 characters its Jobs append, and a Job's name becomes the value of the
/// `job-name` labels of its pod template (unless the template sets them or the selector is
/// manual), so a name that is no label value is reported twice more.
pub(crate) fn create_name_causes(
    info: &ResourceInfo,
    obj: &Map<String, Value>,
    name: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    if info.group != "batch" {
        return causes;
    }
    if info.plural == "cronjobs" && name.len() > 52 {
        causes.push(invalid(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
    let spec = obj.get("spec");
    let manual = spec.and_then(|s| s.get("manualSelector")) == Some(&json!(true));
    if info.plural == "jobs" && !manual {
        let labels = spec.and_then(|s| s.pointer("/template/metadata/labels"));
        for key in ["job-name", "batch.kubernetes.io/job-name"] {
            if labels.and_then(|l| l.get(key)).is_some() {
                continue;
            }
            for e in label_value_errors(name) {
                causes.push(invalid("spec.template.labels", name, e));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(qualified_name_errors("app.kubernetes.io/name").is_empty());
        assert!(qualified_name_errors("a").is_empty());
        assert_eq!(qualified_name_errors("-a"), [QUALIFIED_NAME_MSG]);
        assert_eq!(qualified_name_errors("a b"), [QUALIFIED_NAME_MSG]);
        assert_eq!(
            qualified_name_errors("/a"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(
            qualified_name_errors("a/"),
            ["name part must be non-empty", QUALIFIED_NAME_MSG]
        );
        assert_eq!(
            qualified_name_errors(&format!("{}-", "a".repeat(63))),
            [
                "name part must be no more than 63 bytes",
                QUALIFIED_NAME_MSG
            ]
        );
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
    }
}
