//! DELETE of objects and collections: preconditions, finalizers (deletionTimestamp and
//! waiting for them to clear), the two-step deletion of pods, namespace contents.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use http::HeaderMap;
use serde_json::{Map, Value, json};

use super::crud::{has_finalizers, is_dry_run, now_rfc3339};
use super::negotiate::{BodyType, Output, body_type, output};
use super::validate::go_json_error;
use super::{AppState, Target, bytes_response, error_response, json_response, protobuf};
use crate::object::{StoredObject, meta_str};
use crate::status::ApiError;
use crate::store::Mutation;

/// The deleted object (or the list of deleted objects) in the negotiated form.
fn render_object(out: Output, obj: &StoredObject) -> Response {
    if out != Output::Protobuf {
        return json_response(200, &obj.value());
    }
    match protobuf::encode::object(obj) {
        Ok(b) => bytes_response(200, protobuf::CONTENT_TYPE, b),
        Err(e) => error_response(&e),
    }
}

/// A success `Status` in the negotiated form.
fn render_status(out: Output, status: &Value) -> Response {
    if out == Output::Protobuf {
        bytes_response(
            200,
            protobuf::CONTENT_TYPE,
            protobuf::encode::status_value(status),
        )
    } else {
        json_response(200, status)
    }
}

/// The DeleteOptions of a DELETE: the body (JSON, YAML or protobuf, as client-go sends them)
/// and the query's `dryRun`; returns them and whether the request is a dry run.
fn delete_options(
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Value, bool), ApiError> {
    let unrecognized = |e: String| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type DeleteOptions): {e}"
        ))
    };
    let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match body_type(headers) {
            BodyType::Protobuf => protobuf::decode::subresource_body(body, "DeleteOptions")
                .map_err(|e| unrecognized(e.to_string()))?,
            BodyType::Yaml => serde_saphyr::from_slice(body)
                .map_err(|e| unrecognized(format!("couldn't get version/kind; yaml: {e}")))?,
            _ => serde_json::from_slice(body).map_err(|_| {
                unrecognized(format!(
                    "couldn't get version/kind; json parse error: {}",
                    go_json_error(body)
                ))
            })?,
        }
    };
    if let Some(v) = query.get("dryRun").filter(|v| !v.is_empty() && *v != "All") {
        return Err(ApiError::invalid_options(
            "DeleteOptions",
            vec![crate::status::Cause::new(
                "FieldValueNotSupported",
                format!("Unsupported value: [\"{v}\"]: supported values: \"All\""),
                "dryRun",
            )],
        ));
    }
    let dry = is_dry_run(query)
        || opts
            .get("dryRun")
            .is_some_and(|d| d.as_array().is_some_and(|a| a.iter().any(|x| x == "All")));
    Ok((opts, dry))
}

/// DELETE of one object.
pub(crate) fn delete(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let out = output(headers, protobuf::supports(&target.info))?;
    let (opts, dry) = delete_options(query, headers, body)?;
    let (obj, gone) = delete_object(state, target, &opts, dry)?;
    let info = &target.info;
    if gone && !dry && super::crd::is_crd(info) {
        super::crd::uninstall(state, &obj.value());
    }
    if !gone
        || (info.group.is_empty() && matches!(info.plural.as_str(), "pods" | "namespaces"))
        || super::crd::is_crd(info)
    {
        return Ok(render_object(out, &obj));
    }
    let mut details = Map::new();
    details.insert("name".into(), json!(obj.name()));
    if !info.group.is_empty() {
        details.insert("group".into(), json!(info.group));
    }
    details.insert("kind".into(), json!(info.plural));
    details.insert("uid".into(), json!(meta_str(&obj.value(), "uid")));
    Ok(render_status(
        out,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
    ))
}

/// Deletes an object honouring preconditions and finalizers. Returns the last state and
/// whether it is gone (false when finalizers keep it, with deletionTimestamp set).
pub(crate) fn delete_object(
    state: &AppState,
    target: &Target,
    opts: &Value,
    dry_run: bool,
) -> Result<(Arc<StoredObject>, bool), ApiError> {
    let info = &target.info;
    let name = target.name.clone().unwrap_or_default();
    let id = info.id();
    let key = target.key();
    let want_uid = opts.pointer("/preconditions/uid").and_then(Value::as_str);
    let want_rv = opts
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str);
    let is_pod = info.group.is_empty() && info.plural == "pods";
    let is_ns = info.group.is_empty() && info.plural == "namespaces";
    let mut kept = false;
    let mut dry_obj = None;
    let mut mark_then_delete = false;
    let outcome = state.store.mutate(&id, &key, |cur, _| {
        let Some(cur) = cur else {
            return Err(ApiError::not_found(info, &name));
        };
        let cur_value = cur.value();
        let uid = meta_str(&cur_value, "uid");
        if let Some(w) = want_uid
            && w != uid
        {
            return Err(ApiError::uid_conflict(info, &name, w, uid));
        }
        if let Some(w) = want_rv
            && w != cur.rv().to_string()
        {
            return Err(ApiError::rv_precondition_conflict(
                info,
                &name,
                w,
                &cur.rv().to_string(),
            ));
        }
        if dry_run {
            dry_obj = Some(cur.clone());
            return Ok(Mutation::Keep);
        }
        if is_ns {
            // The namespace goes Terminating; its contents are deleted below and the namespace
            // itself by the maintenance tick ([`finalize_namespaces`]), as the namespace
            // controller does.
            if cur_value.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Mutation::Keep);
            }
            let mut v = cur_value.clone();
            v["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            v["status"] = json!({"phase": "Terminating"});
            return Ok(Mutation::Put(v));
        }
        if has_finalizers(&cur_value) || is_pod {
            if cur_value.pointer("/metadata/deletionTimestamp").is_some() {
                kept = true;
                return Ok(Mutation::Keep);
            }
            let mut v = cur_value.clone();
            v["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if info.tracks_generation {
                let g = v
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                v["metadata"]["generation"] = json!(g + 1);
            }
            kept = has_finalizers(&cur_value);
            mark_then_delete = !kept;
            return Ok(Mutation::Put(v));
        }
        Ok(Mutation::Delete)
    })?;
    if let Some(o) = dry_obj {
        return Ok((o, true));
    }
    let mut last = outcome
        .object
        .ok_or_else(|| ApiError::not_found(info, &name))?;
    if kept {
        return Ok((last, false));
    }
    if is_ns {
        let _ = delete_namespace_contents(state, &name);
        return Ok((last, false));
    }
    if mark_then_delete {
        let out = state.store.mutate::<ApiError>(&id, &key, |cur, _| {
            Ok(if cur.is_some() {
                Mutation::Delete
            } else {
                Mutation::Keep
            })
        })?;
        if let Some(o) = out.object {
            last = o;
        }
    }
    Ok((last, true))
}

/// How long a deleted namespace stays `Terminating` before it is removed (kube-apiserver's
/// namespace controller takes a few seconds too).
const NAMESPACE_TERMINATION: chrono::TimeDelta = chrono::TimeDelta::seconds(2);

/// Removes the namespaces that have been `Terminating` for [`NAMESPACE_TERMINATION`], hold no
/// `metadata.finalizers` and are empty once anything created in them since is deleted (an
/// object with finalizers keeps its namespace until they are removed); run by the server's
/// maintenance tick.
pub(crate) fn finalize_namespaces(state: &AppState) {
    let Some(info) = state.registry.get("", "v1", "namespaces") else {
        return;
    };
    let id = info.id();
    let now = chrono::Utc::now();
    for key in state.store.keys_with_prefix(&id, "") {
        let Some(ns) = state.store.get(&id, &key) else {
            continue;
        };
        let ns = ns.value();
        let since = ns
            .pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        let Some(since) = since else {
            continue;
        };
        if now.signed_duration_since(since) < NAMESPACE_TERMINATION || has_finalizers(&ns) {
            continue;
        }
        // Objects with finalizers keep the namespace Terminating until they are released.
        if delete_namespace_contents(state, &key) > 0 {
            continue;
        }
        let _ = state.store.mutate::<ApiError>(&id, &key, |cur, _| {
            Ok(if cur.is_some() {
                Mutation::Delete
            } else {
                Mutation::Keep
            })
        });
    }
}

/// Deletes every object in namespace `ns` as a DELETE would (objects with finalizers are only
/// marked with a deletionTimestamp, as the namespace controller leaves them); returns how many
/// objects remain in it.
fn delete_namespace_contents(state: &AppState, ns: &str) -> usize {
    let mut remaining = 0;
    for info in state.registry.all() {
        if !info.namespaced {
            continue;
        }
        let id = info.id();
        for key in state.store.keys_with_prefix(&id, &format!("{ns}/")) {
            let Some(name) = key.split_once('/').map(|(_, n)| n.to_owned()) else {
                continue;
            };
            let t = Target {
                info: info.clone(),
                namespace: Some(ns.to_owned()),
                name: Some(name),
                sub: None,
                watch_path: false,
            };
            if !matches!(delete_object(state, &t, &json!({}), false), Ok((_, true))) {
                remaining += 1;
            }
        }
    }
    remaining
}

/// DELETE of a collection: deletes every object matching the selectors.
pub(crate) fn delete_collection(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let out = output(headers, protobuf::supports(&target.info))?;
    let (opts, dry) = delete_options(query, headers, body)?;
    let mut q = query.clone();
    q.remove("watch");
    let p =
        super::params::ListParams::parse(&q, false, crate::selector::field_labels(&target.info))?;
    let id = target.info.id();
    let prefix = target
        .namespace
        .as_ref()
        .map(|ns| format!("{ns}/"))
        .unwrap_or_default();
    let mut deleted = Vec::new();
    for key in state.store.keys_with_prefix(&id, &prefix) {
        let Some(obj) = state.store.get(&id, &key) else {
            continue;
        };
        let value = obj.value();
        if !(p.labels.matches(&value) && p.fields.matches(&value)) {
            continue;
        }
        let t = Target {
            name: Some(obj.name().to_owned()),
            namespace: (!obj.namespace().is_empty()).then(|| obj.namespace().to_owned()),
            ..target.clone()
        };
        let mut each = opts.clone();
        if let Some(m) = each.as_object_mut() {
            // Preconditions name one object; a collection's apply to none.
            m.remove("preconditions");
        }
        if let Ok((o, _)) = delete_object(state, &t, &each, dry) {
            deleted.push(o);
        }
    }
    let rv = state.store.current_rv();
    let list_kind = format!("{}List", target.info.kind);
    if out == Output::Protobuf {
        let meta = protobuf::encode::list_meta(rv, None, None);
        let body = protobuf::encode::list(&target.info.api_version(), &list_kind, &meta, &deleted)?;
        return Ok(bytes_response(200, protobuf::CONTENT_TYPE, body));
    }
    let items: Vec<Value> = deleted.iter().map(|o| o.value().clone()).collect();
    Ok(json_response(
        200,
        &json!({"kind": list_kind, "apiVersion": target.info.api_version(),
                "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
    ))
}
