//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets,
//! ReplicationControllers and custom resources whose CRD declares one (its
//! `specReplicasPath`, `statusReplicasPath` and `labelSelectorPath`): an
//! `autoscaling/v1` `Scale` view of `spec.replicas`, `status.replicas` and the selector, read
//! with GET and written with PUT (JSON, YAML or protobuf), a patch (what `kubectl scale`
//! sends) or an apply patch.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use http::HeaderMap;
use serde_json::{Map, Value, json};

use super::write::Write;
use super::{get_object, update_object};
use crate::http::negotiate::{BodyType, body_type, output};
use crate::http::{AppState, Target, json_response};
use crate::object::StoredObject;
use crate::registry::crd::ScalePaths;
use crate::registry::managed::FieldsChange;
use crate::status::ApiError;

/// The selector string of a `matchLabels` selector: `a=b,c=d`.
fn selector_string(obj: &Value) -> String {
    // apps/v1 workloads have a LabelSelector; a ReplicationController a plain map.
    let Some(labels) = obj
        .pointer("/spec/selector/matchLabels")
        .or_else(|| {
            obj.pointer("/spec/selector")
                .filter(|s| s.get("matchLabels").is_none() && s.get("matchExpressions").is_none())
        })
        .and_then(Value::as_object)
    else {
        return String::new();
    };
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// A custom resource's scale paths (from its CRD); `None` for a workload.
fn paths_of(state: &AppState, target: &Target) -> Option<ScalePaths> {
    crate::registry::crd::scale_paths(state, &target.info)
}

/// The `Scale` view of a workload, or of a custom resource by its CRD's `paths`.
fn scale_of(obj: &StoredObject, paths: Option<&ScalePaths>) -> Value {
    let v = obj.value();
    let mut meta = Map::new();
    for k in ["name", "namespace", "uid", "creationTimestamp"] {
        if let Some(x) = v.pointer(&format!("/metadata/{k}")) {
            meta.insert(k.into(), x.clone());
        }
    }
    meta.insert("resourceVersion".into(), json!(obj.rv().to_string()));
    let (spec, status) = paths.map_or(("/spec/replicas", "/status/replicas"), |p| {
        (p.spec.as_str(), p.status.as_str())
    });
    let mut status = json!({"replicas": v.pointer(status).cloned().unwrap_or(json!(0))});
    match paths {
        None => status["selector"] = json!(selector_string(&v)),
        Some(p) => {
            if let Some(sel) = p
                .selector
                .as_deref()
                .and_then(|s| v.pointer(s))
                .and_then(Value::as_str)
            {
                status["selector"] = json!(sel);
            }
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": v.pointer(spec).cloned().unwrap_or(json!(0))},
        "status": status,
    })
}

/// Sets the value at JSON pointer `ptr`, creating the objects on the way.
fn set_at(v: &mut Value, ptr: &str, value: Value) {
    let mut cur = v;
    let parts: Vec<String> = ptr
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(m) = cur.as_object_mut() else {
            return;
        };
        if i + 1 == parts.len() {
            m.insert(p.clone(), value);
            return;
        }
        cur = m.entry(p.clone()).or_insert_with(|| json!({}));
    }
}

fn main_target(target: &Target) -> Target {
    Target {
        sub: None,
        ..target.clone()
    }
}

/// GET of `…/scale`.
pub(crate) fn get_scale(
    state: &Arc<AppState>,
    target: &Target,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    output(headers, false)?;
    let obj = get_object(state, &main_target(target))?;
    Ok(json_response(
        200,
        &scale_of(&obj, paths_of(state, target).as_ref()),
    ))
}

/// Writes `scale`'s `spec.replicas` into the workload (409 on a stale resourceVersion).
fn write_scale(
    state: &Arc<AppState>,
    target: &Target,
    write: &Write,
    headers: &HeaderMap,
    scale: &Value,
) -> Result<Response, ApiError> {
    let main = main_target(target);
    let cur = get_object(state, &main)?;
    let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    if !replicas.is_i64() || replicas.as_i64().is_some_and(|r| r < 0) {
        return Err(ApiError::invalid(
            &target.info,
            target.name.as_deref().unwrap_or(""),
            vec![crate::status::Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                "spec.replicas",
            )],
        ));
    }
    let mut next = cur.value().clone();
    let paths = paths_of(state, target);
    match &paths {
        None => next["spec"]["replicas"] = replicas,
        Some(p) => set_at(&mut next, &p.spec, replicas),
    }
    match scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty())
    {
        Some(rv) => next["metadata"]["resourceVersion"] = json!(rv),
        None => next["metadata"]["resourceVersion"] = json!(cur.rv().to_string()),
    }
    let change = FieldsChange::Update(write.manager(headers, "Update"));
    let updated = update_object(state, &main, next, write.dry_run(), &change)?;
    Ok(json_response(200, &scale_of(&updated, paths.as_ref())))
}

/// PUT of `…/scale`.
pub(crate) fn update_scale(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let write = Write::open(target, query, headers, "UpdateOptions")?;
    let unrecognized = |e: String| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type Scale): {e}"
        ))
    };
    let scale: Value = match body_type(headers) {
        BodyType::Protobuf => crate::object::protobuf::decode::subresource_body(body, "Scale")
            .map_err(|e| unrecognized(e.to_string()))?,
        BodyType::Yaml => serde_saphyr::from_slice(body)
            .map_err(|e| unrecognized(format!("couldn't get version/kind; yaml: {e}")))?,
        BodyType::Json => serde_json::from_slice(body).map_err(|e| {
            unrecognized(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        _ => return Err(ApiError::unsupported_body()),
    };
    write_scale(state, target, &write, headers, &scale)
}

/// PATCH of `…/scale`: a merge, strategic merge or JSON patch of the `Scale` view, or a
/// server-side apply of a Scale.
pub(crate) fn patch_scale(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let write = Write::open(target, query, headers, "PatchOptions")?;
    let kind = body_type(headers);
    let patch: Value = match kind {
        BodyType::MergePatch | BodyType::StrategicMergePatch | BodyType::JsonPatch => {
            serde_json::from_slice(body)
                .map_err(|_| ApiError::bad_request("error decoding patch: invalid JSON"))?
        }
        // Server-side apply of a Scale: the applied `spec.replicas` is written (the Scale view
        // has no other field a manager can own).
        BodyType::ApplyPatch => {
            if write.query.field_manager().is_none() {
                return Err(ApiError::invalid_options(
                    "PatchOptions",
                    vec![crate::status::Cause::new(
                        "FieldValueRequired",
                        "Required value: is required for apply patch",
                        "fieldManager",
                    )],
                ));
            }
            serde_json::from_slice(body)
                .or_else(|_| serde_saphyr::from_slice(body))
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
        }
        _ => return Err(ApiError::unsupported_patch()),
    };
    let cur = get_object(state, &main_target(target))?;
    let mut scale = scale_of(&cur, paths_of(state, target).as_ref());
    if kind == BodyType::JsonPatch {
        let ops: json_patch::Patch = serde_json::from_value(patch.clone())
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        json_patch::patch(&mut scale, &ops).map_err(|_| {
            ApiError::new(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
            )
            .with_details(json!({}))
        })?;
    } else {
        json_patch::merge(&mut scale, &patch);
    }
    if patch.pointer("/metadata/resourceVersion").is_none()
        && let Some(m) = scale.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("resourceVersion");
    }
    write_scale(state, target, &write, headers, &scale)
}
