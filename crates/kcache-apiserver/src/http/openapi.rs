//! `/openapi/v2`, `/openapi/v3` and `/openapi/v3/<path>`: kube-apiserver v1.36.5's recorded
//! documents for the built-in kinds ([`crate::schema`]), and for each custom resource a
//! group-version document built from its CRD's structural schema as kube-apiserver builds
//! it (the kind's schema with `apiVersion`, `kind`, `metadata` and its
//! `x-kubernetes-group-version-kind`, its list, the `meta/v1` schemas they refer to), so that
//! `kubectl explain` and kubectl's validation work on both.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{AppState, bytes_response, json_response};
use crate::resource::ResourceInfo;
use crate::schema::docs;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The `meta/v1` schemas a custom resource's document carries, as kube-apiserver's.
const META: &[&str] = &[
    "DeleteOptions",
    "FieldsV1",
    "ListMeta",
    "ManagedFieldsEntry",
    "ObjectMeta",
    "OwnerReference",
    "Patch",
    "Preconditions",
    "ShardInfo",
    "Status",
    "StatusCause",
    "StatusDetails",
    "Time",
];

/// The recorded document the `meta/v1` schemas are copied from (a small one holding them all).
const META_SOURCE: &str = "apis/node.k8s.io/v1";

/// Serves `rest`, the path after `/openapi/` (`v2`, `v3`, `v3/apis/apps/v1`); `None` is a 404.
pub(crate) fn serve(state: &AppState, rest: &str, accept: &str) -> Option<Response> {
    match rest.split_once('/').unwrap_or((rest, "")) {
        ("v2", "") => Some(v2(state, accept)),
        ("v3", "") => Some(index(state)),
        ("v3", gv) => group_version(state, gv),
        _ => None,
    }
}

/// Custom resources by group-version path.
fn custom(state: &AppState) -> BTreeMap<String, Vec<Arc<ResourceInfo>>> {
    let mut out: BTreeMap<String, Vec<Arc<ResourceInfo>>> = BTreeMap::new();
    for r in state.registry.all() {
        if r.schema.is_some()
            && !docs()
                .v3
                .contains_key(gv_path(&r.group, &r.version).as_str())
        {
            out.entry(gv_path(&r.group, &r.version))
                .or_default()
                .push(r);
        }
    }
    out
}

/// An opaque hash of a document, for the index's `serverRelativeURL` (clients cache by it).
fn hash(text: &str) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `GET /openapi/v3`: every recorded document and every custom resource group-version.
fn index(state: &AppState) -> Response {
    static BUILT_IN: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    let built_in = BUILT_IN.get_or_init(|| {
        docs()
            .v3
            .iter()
            .map(|(p, d)| ((*p).to_owned(), hash(d.get())))
            .collect()
    });
    let mut paths = Map::new();
    for (p, h) in built_in {
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={h}")}),
        );
    }
    for (p, resources) in custom(state) {
        let h = hash(&custom_document(&p, &resources).to_string());
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={h}")}),
        );
    }
    json_response(200, &json!({"paths": paths}))
}

/// `GET /openapi/v3/<gv>`: the recorded document, or a custom resource group-version's.
fn group_version(state: &AppState, gv: &str) -> Option<Response> {
    if let Some(d) = docs().v3.get(gv) {
        return Some(bytes_response(
            200,
            "application/json",
            Bytes::from_static(d.get().as_bytes()),
        ));
    }
    let resources = custom(state).remove(gv)?;
    Some(json_response(200, &custom_document(gv, &resources)))
}

/// `GET /openapi/v2`: the recorded document, with each custom resource's definition added.
/// Only JSON is served (kubectl asks for v3 first); a request for protobuf alone is a 406.
fn v2(state: &AppState, accept: &str) -> Response {
    if !accept.is_empty()
        && accept.contains("protobuf")
        && !accept.contains("json")
        && !accept.contains("*/*")
    {
        return json_response(
            406,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "only application/json is served for /openapi/v2",
                    "reason": "NotAcceptable", "code": 406}),
        );
    }
    let custom = custom(state);
    if custom.is_empty() {
        return bytes_response(
            200,
            "application/json",
            Bytes::from_static(docs().v2.get().as_bytes()),
        );
    }
    let mut doc: Value = serde_json::from_str(docs().v2.get()).unwrap_or_default();
    for resources in custom.values() {
        for r in resources {
            if let Some(defs) = doc["definitions"].as_object_mut() {
                let text = kind_schema(r)
                    .to_string()
                    .replace("#/components/schemas/", "#/definitions/");
                defs.insert(
                    schema_name(r, &r.kind),
                    serde_json::from_str(&text).unwrap_or_default(),
                );
            }
        }
    }
    json_response(200, &doc)
}

/// kube-apiserver's name of a custom resource's schema: the group reversed, the version, the
/// kind (`com.example.v1.Widget`).
fn schema_name(r: &ResourceInfo, kind: &str) -> String {
    let mut parts: Vec<&str> = r.group.split('.').collect();
    parts.reverse();
    format!("{}.{}.{kind}", parts.join("."), r.version)
}

fn meta_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.{name}")})
}

/// A custom resource's schema as kube-apiserver publishes it.
fn kind_schema(r: &ResourceInfo) -> Value {
    let mut s = r.schema.as_deref().cloned().unwrap_or_else(|| json!({}));
    if !s.is_object() {
        s = json!({});
    }
    if !s["properties"].is_object() {
        s["properties"] = json!({});
    }
    s["properties"]["apiVersion"] = json!({"description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources", "type": "string"});
    s["properties"]["kind"] = json!({"description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds", "type": "string"});
    s["properties"]["metadata"] = json!({"description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata", "allOf": [meta_ref("ObjectMeta")]});
    s["x-kubernetes-group-version-kind"] =
        json!([{"group": r.group, "kind": r.kind, "version": r.version}]);
    s
}

/// The document of a custom resource group-version.
fn custom_document(gv: &str, resources: &[Arc<ResourceInfo>]) -> Value {
    let mut schemas = Map::new();
    let source: Value = docs()
        .v3
        .get(META_SOURCE)
        .and_then(|d| serde_json::from_str(d.get()).ok())
        .unwrap_or_default();
    for name in META {
        let full = format!("io.k8s.apimachinery.pkg.apis.meta.v1.{name}");
        if let Some(s) = source["components"]["schemas"].get(&full) {
            schemas.insert(full, s.clone());
        }
    }
    let mut paths = BTreeMap::new();
    for r in resources {
        let list_kind = format!("{}List", r.kind);
        schemas.insert(schema_name(r, &r.kind), kind_schema(r));
        schemas.insert(
            schema_name(r, &list_kind),
            json!({"description": format!("{list_kind} is a list of {}", r.kind),
                "type": "object", "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{}", schema_name(r, &r.kind))}},
                    "kind": {"type": "string"},
                    "metadata": {"allOf": [meta_ref("ListMeta")]}},
                "x-kubernetes-group-version-kind": [{"group": r.group, "kind": list_kind, "version": r.version}]}),
        );
        paths.extend(resource_paths(gv, r));
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

fn operation(r: &ResourceInfo, params: &[&str], body_types: &[&str]) -> Value {
    let parameters: Vec<Value> = params
        .iter()
        .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    let mut op = json!({
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
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

/// The collection and object paths of a custom resource (the query parameters kubectl looks
/// for, `fieldValidation` above all).
fn resource_paths(gv: &str, r: &ResourceInfo) -> Vec<(String, Value)> {
    let base = if r.namespaced {
        format!("/{gv}/namespaces/{{namespace}}/{}", r.plural)
    } else {
        format!("/{gv}/{}", r.plural)
    };
    let write = ["dryRun", "fieldManager", "fieldValidation"];
    let patch_types = [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    let list = [
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "watch",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "timeoutSeconds",
    ];
    vec![
        (
            base.clone(),
            json!({"get": operation(r, &list, &[]),
                   "post": operation(r, &write, &["application/json"])}),
        ),
        (
            format!("{base}/{{name}}"),
            json!({
                "get": operation(r, &["resourceVersion"], &[]),
                "put": operation(r, &write, &["application/json"]),
                "patch": operation(r, &["dryRun", "fieldManager", "fieldValidation", "force"], &patch_types),
                "delete": operation(r, &["dryRun", "gracePeriodSeconds", "propagationPolicy"], &[]),
            }),
        ),
    ]
}
