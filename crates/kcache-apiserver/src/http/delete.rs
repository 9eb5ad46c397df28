//! DELETE of objects and collections: preconditions, finalizers (deletionTimestamp and
//! waiting for them to clear), the two-step deletion of pods, namespace contents.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use http::HeaderMap;
use serde_json::{Map, Value, json};

use super::crud::is_dry_run;
use super::negotiate::{BodyType, Output, body_type, output};
use super::{AppState, Target, bytes_response, error_response, json_response, protobuf};
use crate::object::{StoredObject, meta_str};
use crate::registry::validate::go_json_error;
use crate::registry::{delete_object, propagation};
use crate::status::ApiError;

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
        query_options(query)?
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
    // Checked before the object is looked up, as kube-apiserver's handler does.
    propagation::validate(&opts)?;
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

/// The DeleteOptions of a DELETE without a body, from the query as kube-apiserver reads them:
/// `propagationPolicy`, `orphanDependents` and `gracePeriodSeconds`.
fn query_options(query: &HashMap<String, String>) -> Result<Value, ApiError> {
    let mut opts = Map::new();
    if let Some(p) = query.get("propagationPolicy") {
        opts.insert("propagationPolicy".into(), json!(p));
    }
    for (field, parse) in [
        (
            "orphanDependents",
            (|s: &str| s.parse::<bool>().ok().map(|b| json!(b))) as fn(&str) -> Option<Value>,
        ),
        ("gracePeriodSeconds", |s: &str| {
            s.parse::<i64>().ok().map(|n| json!(n))
        }),
    ] {
        if let Some(raw) = query.get(field) {
            let v = parse(raw).ok_or_else(|| {
                ApiError::bad_request(format!("invalid value {raw:?} for query parameter {field}"))
            })?;
            opts.insert(field.into(), v);
        }
    }
    Ok(Value::Object(opts))
}

/// Adds the Warning a kind's default policy asks for (Jobs) to a DELETE's answer.
fn with_policy_warning(mut resp: Response, target: &Target, opts: &Value) -> Response {
    if let Some(w) = propagation::default_policy_warning(&target.info, opts)
        && let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{w}\""))
    {
        resp.headers_mut().append("Warning", v);
    }
    resp
}

/// DELETE of one object.
pub(crate) fn delete(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let (opts, _) = delete_options(query, headers, body)?;
    delete_one(state, target, query, headers, body).map(|r| with_policy_warning(r, target, &opts))
}

fn delete_one(
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
    if gone && !dry && crate::registry::crd::is_crd(info) {
        crate::registry::crd::uninstall(state, &obj.value());
    }
    if !gone
        || (info.group.is_empty() && matches!(info.plural.as_str(), "pods" | "namespaces"))
        || crate::registry::crd::is_crd(info)
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

/// DELETE of a collection: deletes every object matching the selectors.
pub(crate) fn delete_collection(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let (opts, _) = delete_options(query, headers, body)?;
    collection(state, target, query, headers, body).map(|r| with_policy_warning(r, target, &opts))
}

fn collection(
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
