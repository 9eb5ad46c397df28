//! kube-apiserver's validation of HorizontalPodAutoscalers (`pkg/apis/autoscaling/validation`),
//! PodDisruptionBudgets, CronJob schedules and PersistentVolumeClaims (Ingresses and
//! NetworkPolicies in `networking`), with their field paths, words and order of causes.

use serde_json::{Map, Value, json};

use super::field_rules::{
    array, cause, int_at, invalid_int, invalid_str, not_supported, present, required_detail, str_at,
};
use super::networking;
use crate::resource::ResourceInfo;
use crate::status::Cause;

/// `content.IsPathSegmentName`.
fn path_segment_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// kube-apiserver's defaults of a HorizontalPodAutoscaler (`pkg/apis/autoscaling/v2`): one
/// minimum replica and, in `autoscaling/v2`, a CPU utilization target of 80% when no metric
/// is given; a Job's and a NetworkPolicy's are in `defaults`.
pub(crate) fn set_defaults(info: &ResourceInfo, obj: &mut Map<String, Value>) {
    if info.schema.is_some() {
        return;
    }
    match (info.group.as_str(), info.plural.as_str()) {
        ("batch", "jobs") => super::defaults::job_defaults(obj),
        ("networking.k8s.io", "networkpolicies") => super::defaults::network_policy_defaults(obj),
        _ => {}
    }
    if info.group != "autoscaling" || info.plural != "horizontalpodautoscalers" {
        return;
    }
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    if spec.is_null() {
        *spec = json!({});
    }
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    if spec.get("minReplicas").is_none_or(Value::is_null) {
        spec.insert("minReplicas".into(), json!(1));
    }
    let no_metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if info.version == "v2" && no_metrics {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
}

/// The causes of a HorizontalPodAutoscaler, Ingress or NetworkPolicy (after its metadata's).
pub(crate) fn causes(info: &ResourceInfo, obj: &Map<String, Value>) -> Vec<Cause> {
    let spec = obj.get("spec");
    match (info.group.as_str(), info.plural.as_str()) {
        ("autoscaling", "horizontalpodautoscalers") => hpa_causes(spec),
        ("networking.k8s.io", "ingresses") => networking::ingress_causes(spec),
        ("networking.k8s.io", "networkpolicies") => networking::network_policy_causes(spec),
        ("policy", "poddisruptionbudgets") => pdb_causes(spec),
        ("batch", "cronjobs") => cron_job_causes(spec),
        ("", "persistentvolumeclaims") => pvc_causes(spec),
        _ => Vec::new(),
    }
}

/// `ValidatePodDisruptionBudgetSpec`'s bounds: not both set, each a non-negative integer or
/// a percentage of at most 100%.
fn pdb_causes(spec: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let min = spec
        .and_then(|s| s.get("minAvailable"))
        .filter(|v| !v.is_null());
    let max = spec
        .and_then(|s| s.get("maxUnavailable"))
        .filter(|v| !v.is_null());
    if min.is_some() && max.is_some() {
        causes.push(cause(
            "FieldValueInvalid",
            "spec",
            "Invalid value: \"object\": minAvailable and maxUnavailable cannot be both set"
                .to_owned(),
        ));
    }
    for (key, v) in [("minAvailable", min), ("maxUnavailable", max)] {
        let Some(v) = v else { continue };
        let field = format!("spec.{key}");
        match v {
            Value::String(p) => {
                let digits = p.strip_suffix('%').unwrap_or("");
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    causes.push(invalid_str(
                        &field,
                        p,
                        "a valid percent string must be a numeric string followed by an ending \
                         '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                    ));
                } else if digits.parse::<u64>().map_or(true, |n| n > 100) {
                    causes.push(invalid_str(&field, p, "must not be greater than 100%"));
                }
            }
            v => {
                if let Some(n) = v.as_i64()
                    && n < 0
                {
                    causes.push(invalid_int(&field, n, "must be greater than or equal to 0"));
                }
            }
        }
    }
    causes
}

/// `validateCronJobSpec`'s required schedule and non-negative counts (the job template is
/// checked with the pod specs).
fn cron_job_causes(spec: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if str_at(spec, "schedule").is_empty() {
        causes.push(required_detail("spec.schedule", ""));
    }
    for key in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        if let Some(n) = int_at(spec, key)
            && n < 0
        {
            causes.push(invalid_int(
                &format!("spec.{key}"),
                n,
                "must be greater than or equal to 0",
            ));
        }
    }
    causes
}

/// `ValidatePersistentVolumeClaimSpec`'s required access modes and storage request.
fn pvc_causes(spec: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if array(spec, "accessModes").is_empty() {
        causes.push(required_detail(
            "spec.accessModes",
            "at least 1 access mode is required",
        ));
    }
    let requests = spec.and_then(|s| s.pointer("/resources/requests"));
    if !present(requests, "storage") {
        causes.push(required_detail("spec.resources[storage]", ""));
    }
    causes
}

/// `validateHorizontalPodAutoscalerSpec` with the create options of v1.36 (`minReplicas` at
/// least 1, a scale target with an API group).
fn hpa_causes(spec: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let min = int_at(spec, "minReplicas");
    let max = int_at(spec, "maxReplicas").unwrap_or(0);
    if let Some(n) = min
        && n < 1
    {
        causes.push(invalid_int(
            "spec.minReplicas",
            n,
            "must be greater than or equal to 1",
        ));
    }
    if max == 0 {
        causes.push(required_detail(
            "spec.maxReplicas",
            "must be set and greater than 0",
        ));
    } else if max < 0 {
        causes.push(invalid_int(
            "spec.maxReplicas",
            max,
            "must be greater than or equal to 1",
        ));
    }
    if let Some(n) = min
        && max < n
    {
        causes.push(invalid_int(
            "spec.maxReplicas",
            max,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    causes.extend(object_reference_causes(
        spec.and_then(|s| s.get("scaleTargetRef")),
        "spec.scaleTargetRef",
        false,
    ));
    let metrics = array(spec, "metrics");
    let mut scales_to_zero = false;
    for (i, m) in metrics.iter().enumerate() {
        causes.extend(metric_causes(m, &format!("spec.metrics[{i}]")));
        scales_to_zero |= matches!(str_at(Some(m), "type"), "Object" | "External");
    }
    if min == Some(0) && !scales_to_zero {
        causes.push(cause(
            "FieldValueForbidden",
            "spec.metrics",
            "Forbidden: must specify at least one Object or External metric to support scaling \
             to zero replicas"
                .to_owned(),
        ));
    }
    causes
}

/// `ValidateCrossVersionObjectReference`.
fn object_reference_causes(r: Option<&Value>, path: &str, allow_empty_group: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    for key in ["kind", "name"] {
        let v = str_at(r, key);
        let field = format!("{path}.{key}");
        if v.is_empty() {
            causes.push(required_detail(&field, ""));
        }
        for e in path_segment_errors(v) {
            causes.push(invalid_str(&field, v, &e));
        }
    }
    let api_version = str_at(r, "apiVersion");
    let field = format!("{path}.apiVersion");
    let group = match api_version.matches('/').count() {
        _ if api_version.is_empty() || api_version == "/" => Some(""),
        0 => Some(""),
        1 => api_version.split('/').next(),
        _ => None,
    };
    match group {
        None => causes.push(invalid_str(
            &field,
            api_version,
            &format!("unexpected GroupVersion string: {api_version}"),
        )),
        Some("") if !allow_empty_group => causes.push(invalid_str(
            &field,
            api_version,
            "apiVersion must specify API group",
        )),
        Some(_) => {}
    }
    causes
}

const METRIC_SOURCE_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// `validateMetricSpec`: the type, the one source it names, and that source's fields.
fn metric_causes(m: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let typ = str_at(Some(m), "type");
    let type_field = format!("{path}.type");
    if typ.is_empty() {
        causes.push(required_detail(
            &type_field,
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&typ) {
        causes.push(not_supported(&type_field, typ, &METRIC_SOURCE_TYPES));
    }
    // Sources in kube-apiserver's order; only the first present one is validated.
    let sources = [
        "object",
        "external",
        "pods",
        "resource",
        "containerResource",
    ];
    let present_sources: Vec<&str> = sources
        .into_iter()
        .filter(|s| present(Some(m), s))
        .collect();
    if let Some(first) = present_sources.first() {
        let at = format!("{path}.{first}");
        let src = m.get(*first);
        match *first {
            "resource" | "containerResource" => causes.extend(resource_source_causes(src, &at)),
            _ => causes.extend(metric_target_causes(src.and_then(|s| s.get("target")), &at)),
        }
    }
    let expected = match typ {
        "Object" => "object",
        "Pods" => "pods",
        "Resource" => "resource",
        "External" => "external",
        "ContainerResource" => "containerResource",
        _ => {
            causes.push(not_supported(&type_field, typ, &METRIC_SOURCE_TYPES));
            ""
        }
    };
    if !expected.is_empty() && !present(Some(m), expected) {
        causes.push(required_detail(
            &format!("{path}.{expected}"),
            "must populate information for the given metric source",
        ));
    }
    if present_sources.len() != 1 {
        for s in present_sources.iter().filter(|s| **s != expected) {
            causes.push(cause(
                "FieldValueForbidden",
                &format!("{path}.{s}"),
                "Forbidden: must populate the given metric source only".to_owned(),
            ));
        }
    }
    causes
}

/// `validateResourceSource` (the resource name, the target, a utilization or raw value).
fn resource_source_causes(src: Option<&Value>, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if str_at(src, "name").is_empty() {
        causes.push(required_detail(
            &format!("{path}.name"),
            "must specify a resource name",
        ));
    }
    let target = src.and_then(|s| s.get("target"));
    causes.extend(metric_target_causes(target, path));
    let (utilization, average) = (
        present(target, "averageUtilization"),
        present(target, "averageValue"),
    );
    if !utilization && !average {
        causes.push(required_detail(
            &format!("{path}.target.averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
    if utilization && average {
        causes.push(cause(
            "FieldValueForbidden",
            &format!("{path}.target.averageValue"),
            "Forbidden: may not set both a target raw value and a target utilization".to_owned(),
        ));
    }
    causes
}

/// `validateMetricTarget`: its type and a positive utilization.
fn metric_target_causes(target: Option<&Value>, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let at = format!("{path}.target");
    let typ = str_at(target, "type");
    if typ.is_empty() {
        causes.push(required_detail(
            &format!("{at}.type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(typ, "Utilization" | "Value" | "AverageValue") {
        causes.push(invalid_str(
            &format!("{at}.type"),
            typ,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    if let Some(n) = int_at(target, "averageUtilization")
        && n < 1
    {
        causes.push(invalid_int(
            &format!("{at}.averageUtilization"),
            n,
            "must be greater than 0",
        ));
    }
    causes
}
