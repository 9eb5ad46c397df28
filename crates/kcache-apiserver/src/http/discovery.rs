//! Discovery documents: `/version`, `/api`, `/apis`, group and group-version resource
//! lists, and aggregated discovery (`apidiscovery.k8s.io/v2`) with ETags.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use http::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::negotiate::{Output, output};
use super::{AppState, Route, json_response};
use crate::resource::ResourceInfo;
use crate::status::ApiError;

const DISCOVERY_CT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The `/version` document (kube-apiserver v1.36.5, the version the discovery data was
/// recorded from).
pub(crate) fn version() -> Response {
    json_response(
        200,
        &json!({
            "major": "1", "minor": "36",
            "emulationMajor": "1", "emulationMinor": "36",
            "minCompatibilityMajor": "1", "minCompatibilityMinor": "35",
            "gitVersion": "v1.36.5-kcache",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "rust",
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        }),
    )
}

fn verbs(info: &ResourceInfo) -> Vec<String> {
    let mut v = info.verbs.clone();
    v.sort();
    v
}

/// A subresource's kind and verbs: kube-apiserver's (from the discovery table) for the
/// built-in resources, else the `status` defaults. The kind is `(group, version, kind)`, with
/// empty group and version when it is the resource's own kind.
fn subresource(info: &ResourceInfo, sub: &str) -> ((String, String, String), Vec<String>) {
    let entry = crate::resource::table().entry(
        &info.group,
        &info.version,
        &format!("{}/{sub}", info.plural),
    );
    let s = |k: &str| {
        entry
            .and_then(|e| e.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let verbs: Vec<String> = match entry.and_then(|e| e.get("verbs")).and_then(Value::as_array) {
        Some(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        None if sub == "finalize" => vec!["update".into()],
        None => vec!["get".into(), "patch".into(), "update".into()],
    };
    let kind = match entry {
        Some(_) => (s("group"), s("version"), s("kind")),
        None => (String::new(), String::new(), info.kind.clone()),
    };
    (kind, verbs)
}

/// The verbs of subresource `sub` of `info`.
pub(crate) fn subresource_verbs(info: &ResourceInfo, sub: &str) -> Vec<String> {
    subresource(info, sub).1
}

fn resource_list(group: &str, version: &str, resources: &[Arc<ResourceInfo>]) -> Value {
    let mut out = Vec::new();
    for r in resources {
        let mut entry = json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": verbs(r),
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        if let Some(h) = &r.storage_version_hash {
            entry["storageVersionHash"] = json!(h);
        }
        out.push(entry);
        for sub in &r.subresources {
            let ((g, v, kind), verbs) = subresource(r, sub);
            let mut e = json!({
                "name": format!("{}/{}", r.plural, sub), "singularName": "",
                "namespaced": r.namespaced, "kind": kind, "verbs": verbs,
            });
            if !g.is_empty() || !v.is_empty() {
                e["group"] = json!(g);
                e["version"] = json!(v);
            }
            out.push(e);
        }
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    let mut doc = json!({"kind": "APIResourceList", "groupVersion": gv, "resources": out});
    if !group.is_empty() {
        doc["apiVersion"] = json!("v1");
    }
    doc
}

/// A version name as Kubernetes ranks it: `v<major>`, `v<major>beta<minor>` or
/// `v<major>alpha<minor>`; `None` for other names.
fn kube_version(v: &str) -> Option<(u8, u64, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let major: u64 = rest.get(..digits)?.parse().ok()?;
    let tail = &rest[digits..];
    let (kind, minor) = if tail.is_empty() {
        (2, "0")
    } else if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (0, m)
    } else {
        return None;
    };
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((kind, major, minor.parse().ok()?))
}

/// apimachinery's `CompareKubeAwareVersionStrings`, highest priority first: GA before beta
/// before alpha, higher numbers first, then the other names in ascending order.
fn kube_version_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (kube_version(a), kube_version(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// One group's versions, preferred first (kube-apiserver's order for the built-in groups,
/// else in Kubernetes version priority), each with its resources.
type Versions = Vec<(String, Vec<Arc<ResourceInfo>>)>;

/// The served groups in kube-apiserver's order (core first, the built-in groups in its
/// priority order, then the others by name).
fn groups(state: &AppState) -> Vec<(String, Versions)> {
    let mut g: BTreeMap<String, BTreeMap<String, Vec<Arc<ResourceInfo>>>> = BTreeMap::new();
    for r in state.registry.all() {
        g.entry(r.group.clone())
            .or_default()
            .entry(r.version.clone())
            .or_default()
            .push(r);
    }
    let table = crate::resource::table();
    let mut out: Vec<(String, Versions)> = g
        .into_iter()
        .map(|(name, versions)| {
            let mut vs: Versions = versions.into_iter().collect();
            vs.sort_by(|(a, _), (b, _)| {
                match (table.version_rank(&name, a), table.version_rank(&name, b)) {
                    (Some(x), Some(y)) => x.cmp(&y),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (None, None) => kube_version_order(a, b),
                }
            });
            (name, vs)
        })
        .collect();
    out.sort_by_key(|(name, _)| table.group_rank(name).unwrap_or(usize::MAX));
    out
}

fn group_doc(name: &str, versions: &Versions) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|(v, _)| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": vs, "preferredVersion": preferred})
}

fn aggregated_group(name: &str, versions: &Versions) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|(v, resources)| {
            let rs: Vec<Value> = resources
                .iter()
                .map(|r| {
                    let kind = json!({"group": "", "version": "", "kind": r.kind});
                    let mut e = json!({
                        "resource": r.plural, "responseKind": kind,
                        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": r.singular, "verbs": verbs(r),
                    });
                    if !r.short_names.is_empty() {
                        e["shortNames"] = json!(r.short_names);
                    }
                    if !r.categories.is_empty() {
                        e["categories"] = json!(r.categories);
                    }
                    if !r.subresources.is_empty() {
                        e["subresources"] = r
                            .subresources
                            .iter()
                            .map(|s| {
                                let ((g, v, k), verbs) = subresource(r, s);
                                let kind = json!({"group": g, "version": v, "kind": k});
                                json!({"subresource": s, "responseKind": kind, "verbs": verbs})
                            })
                            .collect();
                    }
                    e
                })
                .collect();
            json!({"version": v, "resources": rs, "freshness": "Current"})
        })
        .collect();
    let meta = if name.is_empty() {
        json!({})
    } else {
        json!({"name": name})
    };
    json!({"metadata": meta, "versions": vs})
}

fn aggregated(items: Vec<Value>, headers: &HeaderMap) -> Response {
    let doc = json!({
        "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {}, "items": items,
    });
    let mut bytes = serde_json::to_vec(&doc).unwrap_or_default();
    bytes.push(b'\n');
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    let etag = format!("\"{:016X}\"", hasher.finish());
    let etag_value = HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"0\""));
    let matched = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() == etag);
    let mut resp = if matched {
        let mut r = Response::new(axum::body::Body::empty());
        *r.status_mut() = http::StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(axum::body::Body::from(Bytes::from(bytes)));
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(DISCOVERY_CT));
        r
    };
    resp.headers_mut().insert(ETAG, etag_value);
    resp
}

/// Answers a discovery route.
pub(crate) fn handle(
    state: &AppState,
    route: &Route,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let wants_aggregated = output(headers, false).is_ok_and(|o| o == Output::Discovery);
    let all = groups(state);
    let empty = Versions::new();
    let find = |g: &str| all.iter().find(|(n, _)| n == g).map(|(_, vs)| vs);
    match route {
        Route::Api => {
            let core = find("").unwrap_or(&empty);
            if wants_aggregated {
                return Ok(aggregated(vec![aggregated_group("", core)], headers));
            }
            Ok(json_response(
                200,
                &json!({"kind": "APIVersions", "versions": core.iter().map(|(v, _)| v).collect::<Vec<_>>(),
                        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                        "serverAddress": "127.0.0.1"}]}),
            ))
        }
        Route::Apis => {
            let named = all.iter().filter(|(g, _)| !g.is_empty());
            if wants_aggregated {
                let items = named.map(|(g, vs)| aggregated_group(g, vs)).collect();
                return Ok(aggregated(items, headers));
            }
            let gs: Vec<Value> = named.map(|(g, vs)| group_doc(g, vs)).collect();
            Ok(json_response(
                200,
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs}),
            ))
        }
        Route::Group(g) => {
            let vs = find(g).unwrap_or(&empty);
            let mut doc = group_doc(g, vs);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            Ok(json_response(200, &doc))
        }
        Route::GroupVersion(g, v) => {
            let rs = find(g)
                .and_then(|vs| vs.iter().find(|(ver, _)| ver == v))
                .map(|(_, rs)| rs.clone())
                .unwrap_or_default();
            Ok(json_response(200, &resource_list(g, v, &rs)))
        }
        _ => Err(ApiError::unknown_resource()),
    }
}
