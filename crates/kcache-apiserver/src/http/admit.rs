//! Admission at the HTTP front: which writes are admitted and how a mutated object becomes
//! the write.
//!
//! A create (POST), an update (PUT, every PATCH type and apply, also of subresources) or a
//! delete of one object is admitted when any webhook configuration exists. The write is first
//! run as a dry run, which gives the object as it would be stored (decoded, patched,
//! defaulted, validated); the mutating webhooks see it and may patch it; when one did, the
//! patched object is written instead (a POST, or a PUT conditional on the resourceVersion the
//! dry run started from), dry-run once more for the validating webhooks to see the final
//! object; then the validating webhooks are called and the write is done for real. A write
//! refused by the server's own validation is refused before any webhook is called.
//!
//! A `deletecollection` admits each object it deletes as a DELETE; a POST of `eviction` or
//! `binding` is a CREATE of the subresource with the posted object. Not admitted:
//! `serviceaccounts/token`
//! and the reviews (kube-apiserver calls webhooks for those too).

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, request::Parts};
use http_body_util::BodyExt;
use serde_json::Value;

use super::{AppState, Target, crud, dispatch};
use crate::admission::{self, Attributes, Operation};
use crate::status::ApiError;

/// The admission operation of a request, when it is admitted.
fn operation(state: &AppState, target: &Target, method: &Method) -> Option<Operation> {
    let sub = target.sub.as_deref();
    match (target.name.is_some(), method) {
        (false, &Method::POST)
            if sub.is_none()
                && !crud::is_review(&target.info)
                && !crud::is_core_binding(&target.info) =>
        {
            Some(Operation::Create)
        }
        (true, &Method::PUT | &Method::PATCH) => {
            let exists = crud::get_object(state, target).is_ok();
            Some(if exists || sub.is_some() {
                Operation::Update
            } else {
                Operation::Create
            })
        }
        (_, &Method::DELETE) if sub.is_none() => Some(Operation::Delete),
        (true, &Method::POST) if matches!(sub, Some("eviction" | "binding")) => {
            Some(Operation::Create)
        }
        _ => None,
    }
}

fn request_parts(method: Method, parts: &Parts, headers: HeaderMap) -> Parts {
    let mut r = http::Request::new(());
    *r.method_mut() = method;
    *r.uri_mut() = parts.uri.clone();
    *r.headers_mut() = headers;
    r.into_parts().0
}

fn with_json(headers: &HeaderMap, content_type: bool) -> HeaderMap {
    let mut h = headers.clone();
    h.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json"),
    );
    if content_type {
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    h
}

async fn body_json(resp: Response) -> Value {
    match resp.into_body().collect().await {
        Ok(b) => serde_json::from_slice(&b.to_bytes()).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

/// The object of a write as the webhooks are sent it: without what kube-apiserver sets
/// after admission on a create.
fn as_sent(mut obj: Value, op: Operation) -> Value {
    if op == Operation::Create
        && let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("resourceVersion");
    }
    obj
}

/// A mutated object as the body of the write that replaces the request.
fn as_body(mut obj: Value, op: Operation, old: Option<&Value>) -> Bytes {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        if op == Operation::Create {
            for k in ["uid", "creationTimestamp", "resourceVersion", "generation"] {
                m.remove(k);
            }
        } else if let Some(rv) = old.and_then(|o| o.pointer("/metadata/resourceVersion")) {
            m.insert("resourceVersion".into(), rv.clone());
        }
    }
    Bytes::from(serde_json::to_vec(&obj).unwrap_or_default())
}

fn add_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
}

/// The options a webhook is sent: the request's, as far as its query carries them.
fn options(op: Operation, query: &HashMap<String, String>, dry: bool) -> Value {
    let mut o = Attributes::options(op, query.get("fieldManager").map(String::as_str), dry);
    if op == Operation::Delete {
        if let Some(p) = query.get("propagationPolicy") {
            o["propagationPolicy"] = Value::String(p.clone());
        }
        if let Some(g) = query
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse::<i64>().ok())
        {
            o["gracePeriodSeconds"] = g.into();
        }
    }
    o
}

/// A webhook's refusal as the answer, in the negotiated form, with the webhooks' warnings.
fn refusal(parts: &Parts, target: &Target, e: &ApiError, warnings: &[String]) -> Response {
    let protobuf =
        super::negotiate::output(&parts.headers, super::protobuf::supports(&target.info))
            == Ok(super::negotiate::Output::Protobuf);
    let resp = if protobuf {
        super::protobuf_error_response(e)
    } else {
        super::error_response(e)
    };
    add_warnings(resp, warnings)
}

/// A POST of a pod's `eviction` or `binding`: a CREATE of the subresource, the webhooks sent
/// the request's Eviction or Binding (a mutated one is what is posted).
async fn post_subresource(
    state: &Arc<AppState>,
    parts: &Parts,
    target: Target,
    query: &HashMap<String, String>,
    body: Bytes,
    mut attrs: Attributes,
) -> Result<Response, ApiError> {
    let Ok(sent) = serde_json::from_slice::<Value>(&body) else {
        return dispatch(state, parts, target, query, body).await;
    };
    attrs.object = Some(sent);
    let mut warnings = Vec::new();
    let mutated = match admission::mutate(state, &attrs, &mut warnings).await {
        Ok(m) => m,
        Err(e) => return Ok(refusal(parts, &target, &e, &warnings)),
    };
    if let Some(m) = &mutated {
        attrs.object = Some(m.clone());
    }
    if let Err(e) = admission::validate(state, &attrs, &mut warnings).await {
        return Ok(refusal(parts, &target, &e, &warnings));
    }
    let body = match mutated {
        Some(m) => Bytes::from(serde_json::to_vec(&m).unwrap_or_default()),
        None => body,
    };
    let resp = dispatch(state, parts, target, query, body).await?;
    Ok(add_warnings(resp, &warnings))
}

/// `deletecollection`: each object it would delete is admitted as a DELETE of its own, in
/// order; when all are admitted the collection is deleted, else the objects before the first
/// refused one are deleted one by one and the refusal is the answer (kube-apiserver deletes
/// the objects one after the other, with one worker by default, and stops at the first
/// error).
async fn delete_collection(
    state: &Arc<AppState>,
    parts: &Parts,
    target: Target,
    query: &HashMap<String, String>,
    dry_query: &HashMap<String, String>,
    body: Bytes,
    attrs: Attributes,
) -> Result<Response, ApiError> {
    let json_parts = request_parts(Method::DELETE, parts, with_json(&parts.headers, false));
    let listed = dispatch(state, &json_parts, target.clone(), dry_query, body.clone()).await?;
    let items = body_json(listed).await["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut warnings = Vec::new();
    let mut refused = None;
    let mut admitted = Vec::new();
    for item in items {
        let meta = |k: &str| {
            item.pointer(&format!("/metadata/{k}"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let one = Target {
            name: meta("name"),
            namespace: meta("namespace").or_else(|| target.namespace.clone()),
            ..target.clone()
        };
        let mut a = attrs.clone();
        a.name = one.name.clone().unwrap_or_default();
        a.namespace = one.namespace.clone();
        a.old_object = crud::get_object(state, &one).ok().map(|o| o.value());
        let verdict = match admission::mutate(state, &a, &mut warnings).await {
            Ok(_) => admission::validate(state, &a, &mut warnings).await,
            Err(e) => Err(e),
        };
        match verdict {
            Ok(()) => admitted.push(one),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let Some(e) = refused else {
        let resp = dispatch(state, parts, target, query, body).await?;
        return Ok(add_warnings(resp, &warnings));
    };
    let mut each = query.clone();
    each.remove("labelSelector");
    each.remove("fieldSelector");
    for one in admitted {
        let p = request_parts(Method::DELETE, parts, parts.headers.clone());
        let _ = dispatch(state, &p, one, &each, body.clone()).await;
    }
    Ok(refusal(parts, &target, &e, &warnings))
}

/// A resource request, through admission when it is admitted.
pub(super) async fn dispatch_admitted(
    state: &Arc<AppState>,
    parts: &Parts,
    target: Target,
    query: &HashMap<String, String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some(op) = operation(state, &target, &parts.method) else {
        return dispatch(state, parts, target, query, body).await;
    };
    let dry = query.get("dryRun").is_some_and(|v| v == "All");
    let mut attrs = Attributes {
        operation: op,
        info: target.info.clone(),
        sub: target.sub.clone(),
        namespace: target.namespace.clone(),
        name: target.name.clone().unwrap_or_default(),
        object: None,
        old_object: None,
        dry_run: dry,
        options: options(op, query, dry),
    };
    if !admission::may_apply(state, &attrs) {
        return dispatch(state, parts, target, query, body).await;
    }
    super::check_verb(&target, &parts.method, query)?;
    let mut dry_query = query.clone();
    dry_query.insert("dryRun".into(), "All".into());
    if target.name.is_some() && parts.method == Method::POST {
        return post_subresource(state, parts, target, query, body, attrs).await;
    }
    if op == Operation::Delete && target.name.is_none() {
        return delete_collection(state, parts, target, query, &dry_query, body, attrs).await;
    }
    let old = if op == Operation::Create {
        None
    } else {
        crud::get_object(state, &target).ok().map(|o| o.value())
    };
    let old = match (target.sub.as_deref(), old) {
        (Some("scale"), Some(_)) => {
            let get = request_parts(Method::GET, parts, with_json(&parts.headers, false));
            let t = target.clone();
            Some(body_json(dispatch(state, &get, t, query, Bytes::new()).await?).await)
        }
        (_, old) => old,
    };

    let json_parts = request_parts(
        parts.method.clone(),
        parts,
        with_json(&parts.headers, false),
    );
    let first = dispatch(state, &json_parts, target.clone(), &dry_query, body.clone()).await?;
    let object = if op == Operation::Delete {
        None
    } else {
        Some(as_sent(body_json(first).await, op))
    };
    if attrs.name.is_empty() {
        attrs.name = object
            .as_ref()
            .and_then(|o| o.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
    }
    attrs.object = object;
    attrs.old_object = old.clone();
    let mut warnings = Vec::new();
    let mutated = match admission::mutate(state, &attrs, &mut warnings).await {
        Ok(m) => m,
        Err(e) => return Ok(refusal(parts, &target, &e, &warnings)),
    };

    // The write that replaces the request when a webhook changed the object.
    let rewrite = mutated.map(|obj| {
        let (method, t) = if op == Operation::Create {
            let t = Target {
                name: None,
                sub: None,
                ..target.clone()
            };
            (Method::POST, t)
        } else {
            (Method::PUT, target.clone())
        };
        (method, t, as_body(obj, op, old.as_ref()))
    });
    if let Some((method, t, b)) = &rewrite {
        let p = request_parts(method.clone(), parts, with_json(&parts.headers, true));
        let checked = dispatch(state, &p, t.clone(), &dry_query, b.clone()).await?;
        attrs.object = Some(as_sent(body_json(checked).await, op));
    }
    if let Err(e) = admission::validate(state, &attrs, &mut warnings).await {
        return Ok(refusal(parts, &target, &e, &warnings));
    }

    let resp = match rewrite {
        Some((method, t, b)) => {
            let mut headers = parts.headers.clone();
            headers.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            let p = request_parts(method, parts, headers);
            dispatch(state, &p, t, query, b).await?
        }
        None => dispatch(state, parts, target, query, body).await?,
    };
    Ok(add_warnings(resp, &warnings))
}
