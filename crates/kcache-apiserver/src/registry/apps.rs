//! `apps/v1` workloads (Deployments, ReplicaSets, StatefulSets, DaemonSets) as kube-apiserver
//! v1.36 defaults and validates them (`pkg/apis/apps/v1/defaults.go`,
//! `pkg/apis/apps/validation`): the workload's defaults, its pod template's defaults, a
//! required selector that matches the template's labels, and containers required.

use serde_json::{Map, Value, json};

use crate::resource::ResourceInfo;
use crate::status::Cause;

/// Whether `info` is one of the `apps/v1` workloads with a pod template.
pub(crate) fn is_workload(info: &ResourceInfo) -> bool {
    info.group == "apps"
        && matches!(
            info.plural.as_str(),
            "deployments" | "replicasets" | "statefulsets" | "daemonsets"
        )
}

/// Sets `key` in `m` when absent.
fn default(m: &mut Map<String, Value>, key: &str, value: Value) {
    m.entry(key.to_owned()).or_insert(value);
}

fn object<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let v = m.entry(key.to_owned()).or_insert_with(|| json!({}));
    if v.is_null() {
        *v = json!({});
    }
    v.as_object_mut()
}

/// The workload's defaults and its template's.
pub(crate) fn set_defaults(info: &ResourceInfo, obj: &mut Map<String, Value>) {
    let Some(spec) = object(obj, "spec") else {
        return;
    };
    match info.plural.as_str() {
        "deployments" => {
            default(spec, "replicas", json!(1));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "progressDeadlineSeconds", json!(600));
            if let Some(strategy) = object(spec, "strategy") {
                default(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate"))
                    && let Some(ru) = object(strategy, "rollingUpdate")
                {
                    default(ru, "maxUnavailable", json!("25%"));
                    default(ru, "maxSurge", json!("25%"));
                }
            }
        }
        "replicasets" => default(spec, "replicas", json!(1)),
        "statefulsets" => {
            default(spec, "replicas", json!(1));
            default(spec, "podManagementPolicy", json!("OrderedReady"));
            default(spec, "revisionHistoryLimit", json!(10));
            if let Some(strategy) = object(spec, "updateStrategy") {
                default(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate"))
                    && let Some(ru) = object(strategy, "rollingUpdate")
                {
                    default(ru, "partition", json!(0));
                }
            }
            if let Some(policy) = object(spec, "persistentVolumeClaimRetentionPolicy") {
                default(policy, "whenDeleted", json!("Retain"));
                default(policy, "whenScaled", json!("Retain"));
            }
        }
        "daemonsets" => {
            default(spec, "revisionHistoryLimit", json!(10));
            if let Some(strategy) = object(spec, "updateStrategy") {
                default(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate"))
                    && let Some(ru) = object(strategy, "rollingUpdate")
                {
                    default(ru, "maxUnavailable", json!(1));
                    default(ru, "maxSurge", json!(0));
                }
            }
        }
        _ => {}
    }
    if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut)
        && let Some(pod_spec) = template.get_mut("spec").and_then(Value::as_object_mut)
    {
        pod_spec_defaults(pod_spec);
    }
}

/// `SetDefaults_PodSpec` and `SetDefaults_Container` for the fields every pod gets.
pub(crate) fn pod_spec_defaults(spec: &mut Map<String, Value>) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers"] {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            default(c, "terminationMessagePath", json!("/dev/termination-log"));
            default(c, "terminationMessagePolicy", json!("File"));
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            let tag = image.rsplit('/').next().unwrap_or("");
            let latest = !image.contains('@') && (!tag.contains(':') || tag.ends_with(":latest"));
            default(
                c,
                "imagePullPolicy",
                json!(if latest { "Always" } else { "IfNotPresent" }),
            );
            if let Some(Value::Array(ports)) = c.get_mut("ports") {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default(p, "protocol", json!("TCP"));
                }
            }
            // Go always writes a container's resources, and a quantity as a string.
            default(c, "resources", json!({}));
            for list in ["requests", "limits"] {
                let quantities = c.get_mut("resources").and_then(|r| r.get_mut(list));
                for q in quantities
                    .and_then(Value::as_object_mut)
                    .into_iter()
                    .flat_map(|m| m.values_mut())
                {
                    if let Some(n) = q.as_u64().filter(|n| *n < 1000) {
                        *q = json!(n.to_string());
                    }
                }
            }
        }
    }
}

/// What is wrong with a workload: no selector (a DaemonSet's is only left unmatched), an
/// empty one, a selector its template's labels do not match, no containers.
pub(crate) fn causes(info: &ResourceInfo, obj: &Map<String, Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec_value = obj.get("spec");
    let spec = spec_value.and_then(Value::as_object);
    let selector = spec
        .and_then(|s| s.get("selector"))
        .and_then(Value::as_object);
    let template_labels = spec_value
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .and_then(Value::as_object);
    let labels = template_labels.cloned().unwrap_or_default();
    let match_labels = selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object);
    let has_expressions = selector
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let daemon_set = info.plural == "daemonsets";
    let empty = match_labels.is_none_or(Map::is_empty) && !has_expressions;
    // A missing selector matches nothing (`LabelSelectorAsSelector(nil)`), an empty one
    // everything.
    let unmatched = match selector {
        None => true,
        Some(_) if empty => false,
        Some(_) => {
            match_labels.is_some_and(|want| want.iter().any(|(k, v)| labels.get(k) != Some(v)))
        }
    };
    let kind = match info.plural.as_str() {
        "daemonsets" => "daemonset",
        "statefulsets" => "statefulset",
        _ => "deployment",
    };
    let empty_cause = Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: {{}}: empty selector is invalid for {kind}"),
        "spec.selector",
    );
    if selector.is_none() && !daemon_set {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.selector",
        ));
    } else if selector.is_some() && empty && !daemon_set {
        causes.push(empty_cause.clone());
    }
    if unmatched {
        let shown = template_labels.map_or_else(
            || "null".to_owned(),
            |l| serde_json::to_string(l).unwrap_or_default(),
        );
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {shown}: `selector` does not match template `labels`"),
            "spec.template.metadata.labels",
        ));
    }
    if selector.is_some() && empty && daemon_set {
        causes.push(empty_cause);
    }
    let containers = spec_value
        .and_then(|s| s.pointer("/template/spec/containers"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if containers == 0 {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.template.spec.containers",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_without_a_tag_or_latest_are_always_pulled() {
        let mut spec = json!({"containers": [{"name": "a", "image": "nginx"},
            {"name": "b", "image": "nginx:1.27"}, {"name": "c", "image": "reg:5000/x:latest"}]});
        pod_spec_defaults(spec.as_object_mut().unwrap());
        let policies: Vec<&str> = spec["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["imagePullPolicy"].as_str().unwrap())
            .collect();
        assert_eq!(policies, ["Always", "IfNotPresent", "Always"]);
    }

    #[test]
    fn a_selector_that_misses_the_template_labels_is_reported_in_go_words() {
        let obj = json!({"spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c"}]}}}});
        let info = ResourceInfo::namespaced("apps", "v1", "deployments", "Deployment");
        let causes = causes(&info, obj.as_object().unwrap());
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].message,
            "Invalid value: {\"app\":\"b\"}: `selector` does not match template `labels`"
        );
    }
}
