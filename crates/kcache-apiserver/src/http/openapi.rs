//! A minimal OpenAPI v3 surface: enough for kubectl to learn that every resource
//! accepts server-side field validation (`fieldValidation`) and the patch types we
//! implement, so that `kubectl apply/create` validate on the server instead of
//! downloading schemas. Schemas themselves are not published (objects are schemaless).

use std::collections::BTreeMap;

use axum::response::Response;
use serde_json::{Value, json};

use super::{AppState, json_response};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3`: the index of group-version documents.
pub(crate) fn index(state: &AppState) -> Response {
    let mut paths = BTreeMap::new();
    for r in state.registry.all() {
        let p = gv_path(&r.group, &r.version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=kcache")}),
        );
    }
    json_response(200, &json!({"paths": paths}))
}

fn operation(
    group: &str,
    version: &str,
    kind: &str,
    params: &[&str],
    body_types: &[&str],
) -> Value {
    let parameters: Vec<Value> = params
        .iter()
        .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    let mut op = json!({
        "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind},
        "parameters": parameters,
        "responses": {"200": {"description": "OK"}},
    });
    if !body_types.is_empty() {
        let content: BTreeMap<&str, Value> = body_types
            .iter()
            .map(|t| (*t, json!({"schema": {"type": "object"}})))
            .collect();
        op["requestBody"] = json!({"content": content, "required": true});
    }
    op
}

/// `GET /openapi/v3/<gv>`: paths of every resource in the group version, or `None`.
pub(crate) fn group_version(state: &AppState, rest: &str) -> Option<Response> {
    let resources: Vec<_> = state
        .registry
        .all()
        .into_iter()
        .filter(|r| gv_path(&r.group, &r.version) == rest)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let mut paths = BTreeMap::new();
    for r in &resources {
        let base = if r.namespaced {
            format!("/{rest}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("/{rest}/{}", r.plural)
        };
        let write = ["dryRun", "fieldManager", "fieldValidation"];
        let patch_types = [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        paths.insert(
            base.clone(),
            json!({
                "get": operation(&r.group, &r.version, &r.kind, &["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "resourceVersionMatch", "watch", "allowWatchBookmarks", "sendInitialEvents", "timeoutSeconds"], &[]),
                "post": operation(&r.group, &r.version, &r.kind, &write, &["application/json"]),
            }),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": operation(&r.group, &r.version, &r.kind, &["resourceVersion"], &[]),
                "put": operation(&r.group, &r.version, &r.kind, &write, &["application/json"]),
                "patch": operation(&r.group, &r.version, &r.kind, &["dryRun", "fieldManager", "fieldValidation", "force"], &patch_types),
                "delete": operation(&r.group, &r.version, &r.kind, &["dryRun", "gracePeriodSeconds", "propagationPolicy"], &[]),
            }),
        );
    }
    Some(json_response(
        200,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes (kcache embedded API server)", "version": "v1.36.2"},
            "paths": paths,
            "components": {"schemas": {}},
        }),
    ))
}
