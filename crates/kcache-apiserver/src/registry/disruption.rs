//! The PodDisruptionBudget side of a pod's eviction, as kube-apiserver's eviction REST does it:
//! the budgets whose selector matches the pod (at most one may), whether it allows a
//! disruption, and the disruption it then uses up.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{AppState, Target, now_rfc3339, selector_string};
use crate::object::meta_str;
use crate::status::ApiError;
use crate::store::Mutation;

/// The PodDisruptionBudgets of the pod's namespace whose selector matches it: at most one may,
/// and it must allow a disruption, which the eviction then uses up.
pub(crate) fn check_disruption_budgets(
    state: &Arc<AppState>,
    target: &Target,
    pod: &Value,
    dry: bool,
) -> Result<(), ApiError> {
    let Some(info) = state.registry.get("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    let ns = target.namespace.clone().unwrap_or_default();
    let id = info.id();
    let mut matching = Vec::new();
    for key in state.store.keys_with_prefix(&id, &format!("{ns}/")) {
        let Some(pdb) = state.store.get(&id, &key) else {
            continue;
        };
        let pdb = pdb.value();
        let Some(selector) = pdb.pointer("/spec/selector") else {
            continue;
        };
        let Ok(sel) = crate::selector::LabelSelector::parse(&selector_string(selector)) else {
            continue;
        };
        if sel.matches(pod) {
            matching.push((key, pdb));
        }
    }
    let Some((key, pdb)) = matching.first() else {
        return Ok(());
    };
    if matching.len() > 1 {
        return Err(ApiError::new(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    let pdb_name = meta_str(pdb, "name").to_owned();
    let int = |p: &str| pdb.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let budget = |msg: String| {
        ApiError::new(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
        .with_details(json!({"causes": [{"reason": "DisruptionBudget", "message": msg}]}))
    };
    if int("/status/observedGeneration") < int("/metadata/generation") {
        return Err(budget(format!(
            "The disruption budget {pdb_name} is still being processed by the server."
        ))
        .with_retry_after(10));
    }
    let allowed = int("/status/disruptionsAllowed");
    if allowed == 0 {
        return Err(budget(format!(
            "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
            int("/status/desiredHealthy"),
            int("/status/currentHealthy")
        )));
    }
    if dry {
        return Ok(());
    }
    let pod_name = meta_str(pod, "name").to_owned();
    let now = now_rfc3339();
    state.store.mutate::<ApiError>(&id, key, |cur, _| {
        let Some(cur) = cur else {
            return Ok(Mutation::Keep);
        };
        let mut v = cur.value().clone();
        v["status"]["disruptionsAllowed"] = json!(allowed - 1);
        if !v["status"]["disruptedPods"].is_object() {
            v["status"]["disruptedPods"] = json!({});
        }
        v["status"]["disruptedPods"][&pod_name] = json!(now);
        Ok(Mutation::Put(v))
    })?;
    Ok(())
}
