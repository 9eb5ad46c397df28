//! ClusterRole aggregation, as kube-controller-manager's clusterrole-aggregation controller
//! does it: a ClusterRole with an `aggregationRule` gets, as its `rules`, the rules of every
//! other ClusterRole whose labels match one of its `clusterRoleSelectors`, in name order,
//! each rule once. Run after every write of a ClusterRole and once a second.

use serde_json::{Value, json};

use super::rbac::{Rule, id};
use crate::status::ApiError;
use crate::store::Store;

/// Whether `labels` match a LabelSelector (`matchLabels`, `matchExpressions` with `In`,
/// `NotIn`, `Exists`, `DoesNotExist`); an empty selector matches everything, as
/// `metav1.LabelSelectorAsSelector` makes it.
pub(crate) fn selector_matches(selector: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    if let Some(m) = match_labels
        && !m.iter().all(|(k, v)| get(k) == v.as_str())
    {
        return false;
    }
    exprs.into_iter().flatten().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => get(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            _ => false,
        }
    })
}

/// Brings every aggregated ClusterRole's rules up to date (one pass, as the controller's one
/// sync of each role), reading the roles from `store` and writing each changed one with
/// `update` (path, object); whether a role changed.
pub(crate) fn aggregate(
    store: &Store,
    mut update: impl FnMut(&str, Value) -> Result<(), ApiError>,
) -> bool {
    let mut changed = false;
    let mut roles: Vec<Value> = store
        .objects(&id("clusterroles"))
        .iter()
        .map(|o| o.value())
        .collect();
    roles.sort_by(|a, b| {
        let n = |v: &Value| {
            v.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        n(a).cmp(&n(b))
    });
    let empty = serde_json::Map::new();
    for role in &roles {
        let Some(selectors) = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let name = role
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut rules: Vec<Rule> = Vec::new();
        for selector in selectors {
            for other in &roles {
                let other_name = other
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if other_name == name {
                    continue;
                }
                let labels = other
                    .pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .unwrap_or(&empty);
                if selector_matches(selector, labels) {
                    for r in Rule::all_from(other) {
                        if !rules.contains(&r) {
                            rules.push(r);
                        }
                    }
                }
            }
        }
        if Rule::all_from(role) == rules {
            continue;
        }
        let mut updated = role.clone();
        updated["rules"] = json!(rules.iter().map(Rule::to_json).collect::<Vec<_>>());
        let path = format!("/apis/{}/v1/clusterroles/{name}", super::rbac::GROUP);
        match update(&path, updated) {
            Ok(_) => changed = true,
            Err(e) => tracing::debug!(role = name, error = %e, "aggregating a ClusterRole failed"),
        }
    }
    changed
}
