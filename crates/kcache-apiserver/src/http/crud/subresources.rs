//! The action subresources and the create-only kinds kube-apiserver serves beside plain
//! storage: `pods/eviction` (the pod deleted with the Eviction's DeleteOptions, honouring a
//! PodDisruptionBudget as kube-apiserver's eviction REST does), `pods/binding` and the core
//! `bindings` (`spec.nodeName` and the `PodScheduled` condition), `serviceaccounts/token`
//! (in `token.rs`), and the review kinds (`selfsubjectaccessreviews`, `subjectaccessreviews`,
//! `localsubjectaccessreviews`, `selfsubjectrulesreviews`, `selfsubjectreviews`,
//! `tokenreviews`), answered at once and never stored.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use http::HeaderMap;
use serde_json::{Map, Value, json};

use super::now_rfc3339;
use crate::http::negotiate::{BodyType, Output, body_type, output};
use crate::http::{AppState, Target, bytes_response, delete_object, json_response, protobuf};
use crate::object::meta_str;
use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};
use crate::store::Mutation;

/// Whether `kind` is one of the create-only review kinds.
pub(crate) fn is_review(info: &ResourceInfo) -> bool {
    matches!(
        (info.group.as_str(), info.plural.as_str()),
        (
            "authorization.k8s.io",
            "selfsubjectaccessreviews"
                | "subjectaccessreviews"
                | "localsubjectaccessreviews"
                | "selfsubjectrulesreviews"
        ) | (
            "authentication.k8s.io",
            "selfsubjectreviews" | "tokenreviews"
        )
    )
}

/// Whether `info` is the core `bindings` collection.
pub(crate) fn is_core_binding(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.plural == "bindings"
}

/// A request body (JSON or YAML; protobuf for the kinds `decode` knows) as a JSON object.
pub(super) fn decode_body(headers: &HeaderMap, body: &[u8], kind: &str) -> Result<Value, ApiError> {
    let unrecognized = |e: String| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {e}"
        ))
    };
    match body_type(headers) {
        BodyType::Json => serde_json::from_slice::<Value>(body)
            .map_err(|e| unrecognized(format!("couldn't get version/kind; json parse error: {e}"))),
        BodyType::Yaml => serde_saphyr::from_slice::<Value>(body)
            .map_err(|e| unrecognized(format!("couldn't get version/kind; yaml: {e}"))),
        BodyType::Protobuf => crate::object::protobuf::decode::subresource_body(body, kind)
            .map_err(|e| unrecognized(e.to_string())),
        _ => Err(ApiError::unsupported_body()),
    }
    .and_then(|v| {
        if v.is_object() {
            Ok(v)
        } else {
            Err(unrecognized("the body is not an object".into()))
        }
    })
}

/// `{"kind": "Status", "status": "Success", "code": 201}` in the negotiated form.
fn success(out: Output) -> Response {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "code": 201});
    if out == Output::Protobuf {
        bytes_response(
            201,
            protobuf::CONTENT_TYPE,
            protobuf::encode::status_value(&status),
        )
    } else {
        json_response(201, &status)
    }
}

pub(super) fn dry_run_query(query: &HashMap<String, String>) -> Result<bool, ApiError> {
    match query.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(v) => Err(ApiError::invalid_options(
            "CreateOptions",
            vec![Cause::new(
                "FieldValueNotSupported",
                format!("Unsupported value: [\"{v}\"]: supported values: \"All\""),
                "dryRun",
            )],
        )),
    }
}

pub(super) fn pod_target(target: &Target, name: &str) -> Result<Target, ApiError> {
    Ok(Target {
        sub: None,
        name: Some(name.to_owned()),
        ..target.clone()
    })
}

/// POST `pods/{name}/eviction`.
pub(crate) fn evict(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let out = output(headers, true)?;
    let dry = dry_run_query(query)?;
    let eviction = decode_body(headers, body, "Eviction")?;
    let name = target.name.clone().unwrap_or_default();
    if meta_str(&eviction, "name") != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let opts = eviction
        .get("deleteOptions")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let dry = dry
        || opts
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"));
    let pod_t = pod_target(target, &name)?;
    let pod = crate::http::get_object(state, &pod_t)?.value();
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ignore_pdb = matches!(phase, "Succeeded" | "Failed" | "Pending")
        || pod.pointer("/metadata/deletionTimestamp").is_some();
    if !ignore_pdb {
        crate::registry::check_disruption_budgets(state, target, &pod, dry)?;
    }
    delete_object(state, &pod_t, &opts, dry)?;
    Ok(success(out))
}

/// POST `pods/{name}/binding`, or POST of the core `bindings` collection (the pod named by
/// the Binding).
pub(crate) fn bind(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let out = output(headers, true)?;
    let dry = dry_run_query(query)?;
    let binding = decode_body(headers, body, "Binding")?;
    let name = match &target.name {
        Some(n) => {
            let in_body = meta_str(&binding, "name");
            if !in_body.is_empty() && in_body != n {
                return Err(ApiError::bad_request(
                    "name in URL does not match name in Binding object",
                ));
            }
            n.clone()
        }
        None => meta_str(&binding, "name").to_owned(),
    };
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let pods = state
        .registry
        .get("", "v1", "pods")
        .ok_or_else(ApiError::unknown_resource)?;
    let binding_info = ResourceInfo::namespaced("", "v1", "bindings", "Binding");
    if node.is_empty() {
        return Err(ApiError::invalid(
            &binding_info,
            &name,
            vec![Cause::new(
                "FieldValueRequired",
                "Required value",
                "target.name",
            )],
        ));
    }
    let pod_t = Target {
        info: pods.clone(),
        sub: None,
        name: Some(name.clone()),
        ..target.clone()
    };
    let conflict = |msg: String| {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on pods/binding \"{name}\": {msg}"),
        )
        .with_details(json!({"name": name, "kind": "pods/binding"}))
    };
    let annotations = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let now = now_rfc3339();
    state.store.mutate(&pods.id(), &pod_t.key(), |cur, _| {
        let Some(cur) = cur else {
            return Err(ApiError::not_found(&pods, &name));
        };
        let mut v = cur.value().clone();
        if v.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(conflict(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        let assigned = v
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !assigned.is_empty() {
            return Err(conflict(format!(
                "pod {name} is already assigned to node \"{assigned}\""
            )));
        }
        if dry {
            return Ok(Mutation::Keep);
        }
        v["spec"]["nodeName"] = json!(node);
        if !annotations.is_empty() {
            if !v["metadata"]["annotations"].is_object() {
                v["metadata"]["annotations"] = json!({});
            }
            for (k, a) in &annotations {
                v["metadata"]["annotations"][k] = a.clone();
            }
        }
        if !v["status"].is_object() {
            v["status"] = json!({});
        }
        let mut conditions: Vec<Value> = v["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
        conditions.push(json!({"type": "PodScheduled", "status": "True",
                               "lastProbeTime": null, "lastTransitionTime": now}));
        v["status"]["conditions"] = Value::Array(conditions);
        Ok(Mutation::Put(v))
    })?;
    Ok(success(out))
}

/// POST of a review kind: the review answered (status filled in), never stored. Access
/// reviews are answered by the server's authorizer for `user` (the requester, or the subject
/// the spec names), `selfsubjectreviews` with `user`.
pub(crate) fn review(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    user: &crate::auth::UserInfo,
) -> Result<Response, ApiError> {
    let out = output(headers, false)?;
    dry_run_query(query)?;
    let info = &target.info;
    let mut obj = decode_body(headers, body, &info.kind)?;
    let Some(m) = obj.as_object_mut() else {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    };
    m.insert("kind".into(), json!(info.kind));
    m.insert("apiVersion".into(), json!(info.api_version()));
    let meta = m
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let mut meta: Map<String, Value> = meta;
    meta.remove("managedFields");
    if info.plural == "selfsubjectreviews" {
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    }
    m.entry("spec").or_insert_with(|| json!({}));
    let status = if info.plural == "tokenreviews" {
        let token = m
            .get("spec")
            .and_then(|s| s.get("token"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let audiences = m.get("spec").and_then(|s| s.get("audiences")).cloned();
        super::token::token_review_status(state, &token, audiences.as_ref())
    } else {
        let snapshot = Value::Object(m.clone());
        crate::auth::review::answer(
            &state.authz(),
            user,
            &info.plural,
            &snapshot,
            target.namespace.as_deref(),
        )?
    };
    m.insert("metadata".into(), Value::Object(meta));
    m.insert("status".into(), status);
    let _ = out;
    Ok(json_response(201, &obj))
}
