//! The AdmissionReview a webhook is sent (and whose `request` its `matchConditions` see),
//! built from a request's admission attributes.

use serde_json::{Value, json};

use super::Attributes;
use crate::auth::{ADMIN_GROUPS, ADMIN_UID, ADMIN_USER};

/// The AdmissionReview request of `attrs` with `uid`.
pub(crate) fn review(attrs: &Attributes, uid: &str) -> Value {
    let info = &attrs.info;
    let typed = attrs.object.as_ref().or(attrs.old_object.as_ref());
    let (group, version, kind) = match typed {
        Some(o) => {
            let api_version = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
            let kind = o.get("kind").and_then(Value::as_str).unwrap_or(&info.kind);
            (g.to_owned(), v.to_owned(), kind.to_owned())
        }
        None => (info.group.clone(), info.version.clone(), info.kind.clone()),
    };
    let kind = json!({"group": group, "version": version, "kind": kind});
    let resource = json!({"group": info.group, "version": info.version, "resource": info.plural});
    let mut req = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "operation": attrs.operation.as_str(),
        "userInfo": {"username": ADMIN_USER, "uid": ADMIN_UID, "groups": ADMIN_GROUPS},
        "object": attrs.object.clone().unwrap_or(Value::Null),
        "oldObject": attrs.old_object.clone().unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
        "options": attrs.options,
    });
    if let Some(sub) = &attrs.sub {
        req["subResource"] = json!(sub);
        req["requestSubResource"] = json!(sub);
    }
    if !attrs.name.is_empty() {
        req["name"] = json!(attrs.name);
    }
    if let Some(ns) = attrs.namespace.as_ref().filter(|_| info.namespaced) {
        req["namespace"] = json!(ns);
    }
    json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": req})
}
