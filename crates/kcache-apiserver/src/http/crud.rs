//! get / create / update / patch / delete of single objects, with the server-set
//! metadata (uid, creationTimestamp, generation, resourceVersion), optimistic
//! concurrency, finalizers and deletionTimestamp.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use rand::Rng;
use serde_json::{Map, Value, json};

use super::list::wait_for_rv;
use super::managed::{FieldsChange, Manager, Transition, field_set, updated as updated_fields};
use super::negotiate::{BodyType, Output, body_type, output};
use super::params::parse_rv;
use super::table::{IncludeObject, partial_metadata, table};
use super::validate::{
    check_kind, check_name, check_type, decode_object, go_json_error, unknown_fields,
};
use super::{AppState, Target, bytes_response, json_response};
use crate::object::{StoredObject, meta_str, object_key};
use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};
use crate::store::Mutation;

pub(super) fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn meta_mut(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let m = obj.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut()
        .unwrap_or_else(|| unreachable!("metadata was just made an object"))
}

fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Everything of an object except `metadata` and `status` (what bumps generation).
fn spec_part(v: &Value) -> Value {
    let mut m = v.as_object().cloned().unwrap_or_default();
    m.remove("metadata");
    m.remove("status");
    Value::Object(m)
}

/// Equal apart from resourceVersion and managedFields: an update that changes nothing.
fn same_content(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        v
    };
    strip(a) == strip(b)
}

pub(super) fn has_finalizers(v: &Value) -> bool {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

pub(super) fn is_dry_run(query: &HashMap<String, String>) -> bool {
    query.get("dryRun").is_some_and(|v| v == "All")
}

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(w) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
}

fn render_object(
    info: &ResourceInfo,
    obj: &StoredObject,
    code: u16,
    out: Output,
    query: &HashMap<String, String>,
) -> Response {
    match out {
        Output::Table(api_version) => {
            let include = IncludeObject::parse(query.get("includeObject").map(String::as_str));
            let meta = json!({"resourceVersion": obj.rv().to_string()});
            json_response(
                code,
                &table(info, [&Arc::new(obj.clone())], api_version, include, meta),
            )
        }
        Output::Metadata(api_version) => {
            json_response(code, &partial_metadata(obj.value(), api_version))
        }
        Output::Json | Output::Discovery => {
            let mut b = obj.json().to_vec();
            b.push(b'\n');
            bytes_response(code, "application/json", Bytes::from(b))
        }
    }
}

/// GET of one object.
pub(crate) async fn get(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let out = output(headers)?;
    if let Some(raw) = query.get("resourceVersion").filter(|s| !s.is_empty()) {
        let rv = parse_rv(raw)?;
        if rv > state.store.current_rv() {
            wait_for_rv(state, rv).await?;
        }
    }
    let obj = get_object(state, target)?;
    Ok(render_object(&target.info, &obj, 200, out, query))
}

/// The current object a target names, or 404.
pub(crate) fn get_object(state: &AppState, target: &Target) -> Result<Arc<StoredObject>, ApiError> {
    let name = target.name.as_deref().unwrap_or("");
    state
        .store
        .get(&target.info.id(), &target.key())
        .ok_or_else(|| ApiError::not_found(&target.info, name))
}

fn namespaces_id(state: &AppState) -> Option<crate::resource::ResourceId> {
    state.registry.get("", "v1", "namespaces").map(|i| i.id())
}

fn ensure_namespace(state: &AppState, ns: &str) -> Result<(), ApiError> {
    let Some(ns_id) = namespaces_id(state) else {
        return Ok(());
    };
    if state.store.get(&ns_id, ns).is_some() {
        return Ok(());
    }
    if state.config.auto_create_namespaces {
        let info = state
            .registry
            .get("", "v1", "namespaces")
            .ok_or_else(ApiError::unknown_resource)?;
        let t = Target {
            info,
            namespace: None,
            name: None,
            sub: None,
            watch_path: false,
        };
        let change = FieldsChange::Set(Manager::handle(), json!({}));
        match create_object(state, &t, json!({"metadata": {"name": ns}}), false, &change) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::namespace_not_found(ns))
}

fn decode_body(
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Map<String, Value>, ApiError> {
    match body_type(headers) {
        BodyType::Json | BodyType::Yaml => decode_object(&target.info, body),
        BodyType::Protobuf => super::protobuf::decode(body).map_err(|e| match e {
            super::protobuf::ProtoError::Unsupported(_) => ApiError::unsupported_body(),
            e @ super::protobuf::ProtoError::Malformed(_) => ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): {e}",
                target.info.kind
            )),
        }),
        _ => Err(ApiError::unsupported_body()),
    }
}

/// POST: create an object.
pub(crate) fn create(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let out = output(headers)?;
    if target.info.namespaced && target.namespace.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    let mut obj = decode_body(target, headers, body)?;
    check_type(&target.info, &mut obj)?;
    let strict = query.get("fieldValidation").is_some_and(|v| v == "Strict");
    let warnings = unknown_fields(&target.info, &mut obj, strict)?;
    let obj = Value::Object(obj);
    let change = FieldsChange::Set(
        Manager::from_request(query, headers, "Update"),
        field_set(&obj, false),
    );
    let created = create_object(state, target, obj, is_dry_run(query), &change)?;
    Ok(with_warnings(
        render_object(&target.info, &created, 201, out, query),
        &warnings,
    ))
}

/// Creates an object (already decoded); shared by POST, apply and the Rust handle.
pub(crate) fn create_object(
    state: &AppState,
    target: &Target,
    value: Value,
    dry_run: bool,
    change: &FieldsChange,
) -> Result<Arc<StoredObject>, ApiError> {
    let info = &target.info;
    let Value::Object(mut obj) = value else {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    };
    check_type(info, &mut obj)?;
    let api_version = info.api_version();
    let meta = meta_mut(&mut obj);
    let sent_fields = meta.remove("managedFields");
    let now = now_rfc3339();
    if let Some(mf) = updated_fields(None, sent_fields.as_ref(), change, None, &api_version, &now) {
        meta.insert("managedFields".into(), mf);
    }
    if info.namespaced {
        let url_ns = target.namespace.clone().unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != url_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(url_ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    let mut name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if name.is_empty() {
        let prefix = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                info,
                "",
                vec![Cause::new(
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                    "metadata.name",
                )],
            ));
        }
        name = generate_name(prefix);
        meta.insert("name".into(), json!(name));
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(k);
    }
    if info.tracks_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    check_name(info, &name)?;
    check_kind(info, &mut obj)?;
    if info.group.is_empty() && info.plural == "pods" {
        let status = obj.entry("status").or_insert_with(|| json!({}));
        if status.get("phase").is_none()
            && let Some(s) = status.as_object_mut()
        {
            s.insert("phase".into(), json!("Pending"));
        }
    }
    if info.group.is_empty() && info.plural == "namespaces" {
        obj.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
        obj.insert("status".into(), json!({"phase": "Active"}));
    }
    let ns = target.namespace.as_deref().filter(|_| info.namespaced);
    if let Some(ns) = ns {
        ensure_namespace(state, ns)?;
    }
    let value = Value::Object(obj);
    if dry_run {
        return Ok(Arc::new(StoredObject::without_rv(value)));
    }
    let key = object_key(ns, &name);
    let outcome = state.store.mutate(&info.id(), &key, |cur, _| {
        if cur.is_some() {
            return Err(ApiError::already_exists(info, &name));
        }
        Ok(Mutation::Put(value))
    })?;
    outcome
        .object
        .ok_or_else(|| ApiError::internal("create produced no object"))
}

/// PUT: replace an object (404 if missing, 409 on a stale resourceVersion).
pub(crate) fn update(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let out = output(headers)?;
    let mut obj = decode_body(target, headers, body)?;
    check_type(&target.info, &mut obj)?;
    let strict = query.get("fieldValidation").is_some_and(|v| v == "Strict");
    let warnings = unknown_fields(&target.info, &mut obj, strict)?;
    let url_name = target.name.clone().unwrap_or_default();
    let body_name = meta_str(&Value::Object(obj.clone()), "name").to_owned();
    if !body_name.is_empty() && body_name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
        )));
    }
    let obj = Value::Object(obj);
    let change = FieldsChange::Update(Manager::from_request(query, headers, "Update"));
    let updated = update_object(state, target, obj, is_dry_run(query), &change)?;
    Ok(with_warnings(
        render_object(&target.info, &updated, 200, out, query),
        &warnings,
    ))
}

/// Replaces an object with `value`, keeping server-owned metadata; shared by PUT,
/// PATCH and the Rust handle. A `status` subresource target only replaces `.status`.
pub(crate) fn update_object(
    state: &AppState,
    target: &Target,
    value: Value,
    dry_run: bool,
    change: &FieldsChange,
) -> Result<Arc<StoredObject>, ApiError> {
    let info = &target.info;
    let name = target.name.clone().unwrap_or_default();
    let Value::Object(mut obj) = value else {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    };
    check_type(info, &mut obj)?;
    check_kind(info, &mut obj)?;
    let status_only = target.sub.as_deref() == Some("status");
    let sent_fields = obj
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .cloned();
    let api_version = info.api_version();
    let mut dry_result = None;
    let outcome = state.store.mutate(&info.id(), &target.key(), |cur, _| {
        let Some(cur) = cur else {
            return Err(ApiError::not_found(info, &name));
        };
        let wanted_rv = obj
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        if let Some(rv) = wanted_rv
            && rv != cur.rv().to_string()
        {
            return Err(ApiError::conflict(info, &name));
        }
        let mut next = if status_only {
            let mut v = cur.value().clone();
            v["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
            v
        } else {
            let mut v = Value::Object(obj);
            let cur_meta = cur
                .value()
                .get("metadata")
                .cloned()
                .unwrap_or_else(|| json!({}));
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                for k in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "namespace",
                    "name",
                ] {
                    match cur_meta.get(k) {
                        Some(x) => {
                            m.insert(k.into(), x.clone());
                        }
                        None => {
                            m.remove(k);
                        }
                    }
                }
            } else {
                v["metadata"] = cur_meta;
            }
            let has_status_subresource = info.subresources.iter().any(|s| s == "status");
            let keep_status = has_status_subresource
                || (cur.value().get("status").is_some() && v.get("status").is_none());
            if keep_status {
                // With a status subresource, the main resource cannot change status.
                match cur.value().get("status") {
                    Some(st) => v["status"] = st.clone(),
                    None => {
                        if let Some(m) = v.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            v
        };
        if info.tracks_generation && spec_part(&next) != spec_part(cur.value()) {
            let g = cur
                .value()
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            next["metadata"]["generation"] = json!(g + 1);
        }
        if same_content(&next, cur.value()) {
            return Ok(Mutation::Keep);
        }
        let cur_fields = cur.value().pointer("/metadata/managedFields");
        let transition = Transition {
            old: cur.value(),
            new: &next,
            status_only,
        };
        let fields = updated_fields(
            cur_fields,
            sent_fields.as_ref(),
            change,
            Some(&transition),
            &api_version,
            &now_rfc3339(),
        );
        if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            match fields {
                Some(f) => m.insert("managedFields".into(), f),
                None => m.remove("managedFields"),
            };
        }
        let finishing =
            next.pointer("/metadata/deletionTimestamp").is_some() && !has_finalizers(&next);
        if dry_run {
            dry_result = Some(next);
            return Ok(Mutation::Keep);
        }
        if finishing {
            return Ok(Mutation::Delete);
        }
        Ok(Mutation::Put(next))
    })?;
    if let Some(v) = dry_result {
        return Ok(Arc::new(StoredObject::without_rv(v)));
    }
    outcome
        .object
        .ok_or_else(|| ApiError::not_found(info, &name))
}

/// Whether a resource is one of the built-in kinds (strategic merge patch allowed).
fn is_builtin(info: &ResourceInfo) -> bool {
    matches!(
        info.group.as_str(),
        "" | "coordination.k8s.io" | "events.k8s.io"
    )
}

/// Merges a JSON merge patch (RFC 7386) into `target`.
fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
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
    let out = output(headers)?;
    let info = &target.info;
    let name = target.name.clone().unwrap_or_default();
    let kind = body_type(headers);
    if kind == BodyType::ApplyPatch {
        return apply(state, target, query, headers, body, out);
    }
    let patch_value: Value = match kind {
        BodyType::MergePatch | BodyType::StrategicMergePatch | BodyType::JsonPatch => {
            serde_json::from_slice(body).map_err(|_| patch_decode_error(body))?
        }
        _ => return Err(ApiError::unsupported_patch()),
    };
    let json_ops: Option<json_patch::Patch> = if kind == BodyType::JsonPatch {
        Some(
            serde_json::from_value(patch_value.clone())
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
    let change = FieldsChange::Update(Manager::from_request(query, headers, "Update"));
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
        match update_object(state, target, next, is_dry_run(query), &change) {
            Err(e) if e.code == 409 && user_rv.is_none() && attempts < 10 => continue,
            Err(e) => return Err(e),
            Ok(updated) => return Ok(render_object(info, &updated, 200, out, query)),
        }
    }
}

/// Applies a patch to the current object; returns the result (stamped with the current
/// resourceVersion) and the resourceVersion the patch itself carried, if any.
fn patched(
    cur: &StoredObject,
    json_ops: Option<&json_patch::Patch>,
    patch_value: &Value,
    kind: BodyType,
) -> Result<(Value, Option<String>), ApiError> {
    let mut next = cur.value().clone();
    match json_ops {
        Some(ops) => json_patch::patch(&mut next, ops).map_err(|_| {
            ApiError::new(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
            )
            .with_details(json!({}))
        })?,
        None if kind == BodyType::StrategicMergePatch => super::smp::apply(&mut next, patch_value),
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

/// Server-side apply, simplified: create when missing, else merge the applied fields.
fn apply(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    out: Output,
) -> Result<Response, ApiError> {
    if query.get("fieldManager").is_none_or(String::is_empty) {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            vec![Cause::new(
                "FieldValueRequired",
                "Required value: is required for apply patch",
                "fieldManager",
            )],
        ));
    }
    let Ok(Value::Object(mut applied)) = serde_json::from_slice::<Value>(body) else {
        return Err(ApiError::unsupported_patch());
    };
    let name = target.name.clone().unwrap_or_default();
    meta_mut(&mut applied).insert("name".into(), json!(name));
    meta_mut(&mut applied).remove("resourceVersion");
    let applied = Value::Object(applied);
    let status_only = target.sub.as_deref() == Some("status");
    let change = FieldsChange::Set(
        Manager::from_request(query, headers, "Apply"),
        field_set(&applied, status_only),
    );
    for _ in 0..10 {
        match state.store.get(&target.info.id(), &target.key()) {
            None => match create_object(state, target, applied.clone(), is_dry_run(query), &change)
            {
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
                Ok(obj) => return Ok(render_object(&target.info, &obj, 201, out, query)),
            },
            Some(cur) => {
                let mut next = cur.value().clone();
                merge(&mut next, &applied);
                next["metadata"]["resourceVersion"] = json!(cur.rv().to_string());
                match update_object(state, target, next, is_dry_run(query), &change) {
                    Err(e) if e.code == 409 => continue,
                    Err(e) => return Err(e),
                    Ok(obj) => return Ok(render_object(&target.info, &obj, 200, out, query)),
                }
            }
        }
    }
    Err(ApiError::conflict(&target.info, &name))
}
