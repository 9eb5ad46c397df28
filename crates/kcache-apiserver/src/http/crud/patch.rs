//! PATCH (JSON merge, JSON patch, strategic merge) and server-side apply, simplified: both
//! go through the shared write path (`write.rs`) and end in create or update.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use http::HeaderMap;
use serde_json::{Value, json};

use super::write::Write;
use super::{create_object, get_object, meta_mut, update_object};
use crate::http::AppState;
use crate::http::Target;
use crate::http::negotiate::{BodyType, body_type};
use crate::object::StoredObject;
use crate::registry::managed::{
    Conflict, FieldsChange, apply_conflicts, field_set, release_unapplied,
};
use crate::registry::validate::go_json_error;
use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};

/// Whether a resource is one of the built-in kinds (strategic merge patch allowed).
fn is_builtin(info: &ResourceInfo) -> bool {
    info.schema.is_none() && crate::resource::table().group_rank(&info.group).is_some()
}

/// Merges a JSON merge patch (RFC 7386) into `target`.
fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// kube-apiserver's answer to a JSON patch that cannot be applied.
fn rejected_patch() -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
    .with_details(json!({}))
}

fn patch_decode_error(body: &[u8]) -> ApiError {
    ApiError::bad_request(format!("error decoding patch: {}", go_json_error(body)))
}

/// PATCH: merge, JSON, strategic-merge (treated as merge) and apply patches.
pub(crate) fn patch(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let write = Write::open(target, query, headers, "PatchOptions")?;
    let info = &target.info;
    let name = target.name.clone().unwrap_or_default();
    let kind = body_type(headers);
    if kind == BodyType::ApplyPatch {
        let force = query.get("force").is_some_and(|f| f == "true");
        return apply(state, target, &write, headers, body, force);
    }
    let patch_value: Value = match kind {
        BodyType::MergePatch | BodyType::StrategicMergePatch | BodyType::JsonPatch => {
            serde_json::from_slice(body).map_err(|_| patch_decode_error(body))?
        }
        _ => return Err(ApiError::unsupported_patch()),
    };
    if matches!(kind, BodyType::MergePatch | BodyType::StrategicMergePatch) {
        let go_type = match &patch_value {
            Value::Array(_) => Some("array"),
            Value::String(_) => Some("string"),
            Value::Number(_) => Some("number"),
            Value::Bool(_) => Some("bool"),
            Value::Object(_) | Value::Null => None,
        };
        if let Some(t) = go_type {
            return Err(ApiError::bad_request(format!(
                "error decoding patch: json: cannot unmarshal {t} into Go value of type map[string]interface {{}}"
            )));
        }
    }
    // Decoded as kube-apiserver's `DecodePatch` does: an array of operations it cannot run
    // (an unknown `op`, a missing `path`) decodes, and fails like an operation that fails.
    let json_ops = if kind == BodyType::JsonPatch {
        Some(
            crate::jsonpatch::decode(&patch_value)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
        )
    } else {
        None
    };
    if kind == BodyType::StrategicMergePatch && !is_builtin(info) {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let change = FieldsChange::Update(write.manager(headers, "Update"));
    // Like kube-apiserver, a patch without its own resourceVersion is retried when the
    // object changed between reading and writing it.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let cur = get_object(state, target)?;
        let (next, user_rv) = patched(&cur, json_ops.as_ref(), &patch_value, kind)?;
        if user_rv
            .as_ref()
            .is_some_and(|rv| *rv != cur.rv().to_string())
        {
            return Err(ApiError::conflict(info, &name));
        }
        let mut next = next;
        // A custom resource's unknown fields are pruned, with a warning each (as for a PUT).
        let warnings: Vec<String> = match &info.schema {
            Some(schema) if write.query.field_validation != "Ignore" => {
                crate::registry::crd::prune(&mut next, schema)
                    .iter()
                    .map(|f| crate::registry::validate::unknown_field_warning(f))
                    .collect()
            }
            None => crate::registry::validate::patched_unknown_fields(
                info,
                &mut next,
                &write.query.field_validation,
            )?,
            _ => Vec::new(),
        };
        match update_object(state, target, next, write.dry_run(), &change) {
            Err(e) if e.code == 409 && user_rv.is_none() && attempts < 10 => continue,
            Err(e) => return Err(e),
            Ok(updated) => return Ok(write.respond(info, &updated, 200, &warnings)),
        }
    }
}

/// Applies a patch to the current object; returns the result (stamped with the current
/// resourceVersion) and the resourceVersion the patch itself carried, if any.
fn patched(
    cur: &StoredObject,
    json_ops: Option<&crate::jsonpatch::Operations>,
    patch_value: &Value,
    kind: BodyType,
) -> Result<(Value, Option<String>), ApiError> {
    let mut next = cur.value().clone();
    match json_ops {
        Some(ops) => crate::jsonpatch::apply(&mut next, ops).map_err(|_| rejected_patch())?,
        None if kind == BodyType::StrategicMergePatch => {
            crate::registry::smp::apply(&mut next, patch_value)
        }
        None => merge(&mut next, patch_value),
    }
    // A resourceVersion the patch changed is a precondition.
    let patched_rv = next
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|rv| *rv != cur.rv().to_string());
    if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), json!(cur.rv().to_string()));
    }
    Ok((next, patched_rv))
}

/// kube-apiserver's 409 for apply conflicts (`NewConflictError`): one cause per conflict,
/// the message grouped by manager when there are several.
fn conflict_error(conflicts: &[Conflict]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.manager),
                   "field": c.path})
        })
        .collect();
    let message = if let [c] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager, c.path
        )
    } else {
        let mut lines = Vec::new();
        let mut last: Option<&str> = None;
        for c in conflicts {
            if last != Some(c.manager.as_str()) {
                lines.push(format!("conflicts with {}:", c.manager));
                last = Some(&c.manager);
            }
            lines.push(format!("- {}", c.path));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::new(409, "Conflict", message).with_details(json!({ "causes": causes }))
}

/// Server-side apply: create when missing, else merge the applied configuration (lists of
/// built-in kinds by key) and release the fields this manager applied before and no longer
/// applies, unless another manager owns them. A field another manager owns, applied with another value,
/// is a conflict (409) unless `force=true`.
fn apply(
    state: &Arc<AppState>,
    target: &Target,
    write: &Write,
    headers: &HeaderMap,
    body: &[u8],
    force: bool,
) -> Result<Response, ApiError> {
    if write.query.field_manager().is_none() {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            vec![Cause::new(
                "FieldValueRequired",
                "Required value: is required for apply patch",
                "fieldManager",
            )],
        ));
    }
    let parsed = serde_json::from_slice::<Value>(body)
        .ok()
        .or_else(|| serde_saphyr::from_slice::<Value>(body).ok());
    let Some(Value::Object(mut applied)) = parsed else {
        return Err(ApiError::unsupported_patch());
    };
    let name = target.name.clone().unwrap_or_default();
    meta_mut(&mut applied).insert("name".into(), json!(name));
    meta_mut(&mut applied).remove("resourceVersion");
    let mut applied = Value::Object(applied);
    crate::registry::validate::applied_unknown_fields(&target.info, &applied)?;
    // List items are found by the keys their field set names, absent key fields defaulted.
    crate::registry::managed::default_item_keys(&mut applied);
    let status_only = target.sub.as_deref() == Some("status");
    let change = FieldsChange::Set(
        write.manager(headers, "Apply"),
        field_set(&applied, status_only),
    );
    for _ in 0..10 {
        match state.store.get(&target.info.id(), &target.key()) {
            None => match create_object(state, target, applied.clone(), write.dry_run(), &change) {
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
                Ok(obj) => return Ok(write.respond(&target.info, &obj, 201, &[])),
            },
            Some(cur) => {
                let mut next = cur.value().clone();
                if !force && let FieldsChange::Set(manager, now) = &change {
                    let conflicts =
                        apply_conflicts(&next, &applied, &manager.name, status_only, now);
                    if !conflicts.is_empty() {
                        return Err(conflict_error(&conflicts));
                    }
                }
                // Built-in kinds merge lists by their list-map keys (other managers' items
                // stay); custom resources' lists are atomic.
                if is_builtin(&target.info) {
                    crate::registry::smp::apply_configuration(&mut next, &applied);
                } else {
                    merge(&mut next, &applied);
                }
                if let FieldsChange::Set(manager, now) = &change {
                    release_unapplied(&mut next, &manager.name, status_only, now);
                }
                next["metadata"]["resourceVersion"] = json!(cur.rv().to_string());
                match update_object(state, target, next, write.dry_run(), &change) {
                    Err(e) if e.code == 409 => continue,
                    Err(e) => return Err(e),
                    Ok(obj) => return Ok(write.respond(&target.info, &obj, 200, &[])),
                }
            }
        }
    }
    Err(ApiError::conflict(&target.info, &name))
}
