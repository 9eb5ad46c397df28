//! The action subresources and the create-only kinds kube-apiserver serves beside plain
//! storage: `pods/eviction` (the pod deleted with the Eviction's DeleteOptions, honouring a
//! PodDisruptionBudget as kube-apiserver's eviction REST does), `pods/binding` and the core
//! `bindings` (`spec.nodeName` and the `PodScheduled` condition), `serviceaccounts/token`
//! (a TokenRequest answered with a JWT-shaped token the server then accepts as a bearer
//! token), and the review kinds (`selfsubjectaccessreviews`, `subjectaccessreviews`,
//! `localsubjectaccessreviews`, `selfsubjectrulesreviews`, `selfsubjectreviews`,
//! `tokenreviews`), answered at once and never stored.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderMap;
use serde_json::{Map, Value, json};

use super::now_rfc3339;
use crate::http::negotiate::{BodyType, Output, body_type, output};
use crate::http::{AppState, Target, bytes_response, delete_object, json_response, protobuf};
use crate::object::meta_str;
use crate::registry::{ADMIN_GROUPS, ADMIN_UID, ADMIN_USER, IssuedToken};
use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};
use crate::store::Mutation;

/// The issuer and default audience of service account tokens (kube-apiserver's
/// `--service-account-issuer` in the usual setup).
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

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
fn decode_body(headers: &HeaderMap, body: &[u8], kind: &str) -> Result<Value, ApiError> {
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
        BodyType::Protobuf => crate::http::protobuf::decode::subresource_body(body, kind)
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

fn dry_run_query(query: &HashMap<String, String>) -> Result<bool, ApiError> {
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

fn pod_target(target: &Target, name: &str) -> Result<Target, ApiError> {
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
        check_disruption_budgets(state, target, &pod, dry)?;
    }
    delete_object(state, &pod_t, &opts, dry)?;
    Ok(success(out))
}

/// The PodDisruptionBudgets of the pod's namespace whose selector matches it: at most one may,
/// and it must allow a disruption, which the eviction then uses up.
fn check_disruption_budgets(
    state: &Arc<AppState>,
    target: &Target,
    pod: &Value,
    dry: bool,
) -> Result<(), ApiError> {
    let Some(info) = state.registry.get("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    let ns = target.namespace.clone().unwrap_or_default();
    let id = info.id();
    let mut matching = Vec::new();
    for key in state.store.keys_with_prefix(&id, &format!("{ns}/")) {
        let Some(pdb) = state.store.get(&id, &key) else {
            continue;
        };
        let pdb = pdb.value();
        let Some(selector) = pdb.pointer("/spec/selector") else {
            continue;
        };
        let Ok(sel) = crate::selector::LabelSelector::parse(&selector_string(selector)) else {
            continue;
        };
        if sel.matches(pod) {
            matching.push((key, pdb));
        }
    }
    let Some((key, pdb)) = matching.first() else {
        return Ok(());
    };
    if matching.len() > 1 {
        return Err(ApiError::new(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    let pdb_name = meta_str(pdb, "name").to_owned();
    let int = |p: &str| pdb.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let budget = |msg: String| {
        ApiError::new(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
        .with_details(json!({"causes": [{"reason": "DisruptionBudget", "message": msg}]}))
    };
    if int("/status/observedGeneration") < int("/metadata/generation") {
        return Err(budget(format!(
            "The disruption budget {pdb_name} is still being processed by the server."
        ))
        .with_retry_after(10));
    }
    let allowed = int("/status/disruptionsAllowed");
    if allowed == 0 {
        return Err(budget(format!(
            "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
            int("/status/desiredHealthy"),
            int("/status/currentHealthy")
        )));
    }
    if dry {
        return Ok(());
    }
    let pod_name = meta_str(pod, "name").to_owned();
    let now = now_rfc3339();
    state.store.mutate::<ApiError>(&id, key, |cur, _| {
        let Some(cur) = cur else {
            return Ok(Mutation::Keep);
        };
        let mut v = cur.value().clone();
        v["status"]["disruptionsAllowed"] = json!(allowed - 1);
        if !v["status"]["disruptedPods"].is_object() {
            v["status"]["disruptedPods"] = json!({});
        }
        v["status"]["disruptedPods"][&pod_name] = json!(now);
        Ok(Mutation::Put(v))
    })?;
    Ok(())
}

/// A `metav1.LabelSelector` (matchLabels and matchExpressions) in the string form.
pub(crate) fn selector_string(selector: &Value) -> String {
    let mut terms = Vec::new();
    if let Some(m) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            terms.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    for e in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => terms.push(format!("{key} in ({})", values.join(","))),
            "NotIn" => terms.push(format!("{key} notin ({})", values.join(","))),
            "Exists" => terms.push(key.to_owned()),
            "DoesNotExist" => terms.push(format!("!{key}")),
            _ => {}
        }
    }
    terms.join(",")
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

/// POST `serviceaccounts/{name}/token`: a TokenRequest answered with a token for the service
/// account (JWT-shaped; its signature is random, the server remembers the token).
pub(crate) fn token(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let out = output(headers, false)?;
    let dry = dry_run_query(query)?;
    let mut request = decode_body(headers, body, "TokenRequest")?;
    let name = target.name.clone().unwrap_or_default();
    let sa = crate::http::get_object(state, &pod_target(target, &name)?)?.value();
    let spec = request
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let expiration = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    let request_info = ResourceInfo::namespaced(
        "authentication.k8s.io",
        "v1",
        "tokenrequests",
        "TokenRequest",
    );
    if expiration < 600 {
        return Err(ApiError::invalid(
            &request_info,
            "",
            vec![Cause::new(
                "FieldValueInvalid",
                format!(
                    "Invalid value: {expiration}: may not specify a duration less than 10 minutes"
                ),
                "spec.expirationSeconds",
            )],
        ));
    }
    if expiration > 1 << 32 {
        return Err(ApiError::invalid(
            &request_info,
            "",
            vec![Cause::new(
                "FieldValueTooLong",
                format!(
                    "Invalid value: {expiration}: may not specify a duration larger than 2^32 seconds"
                ),
                "spec.expirationSeconds",
            )],
        ));
    }
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| vec![ISSUER.to_owned()]);
    let now = chrono::Utc::now();
    let exp = now.timestamp() + expiration;
    let ns = target.namespace.clone().unwrap_or_default();
    let uid = meta_str(&sa, "uid").to_owned();
    let jti = uuid::Uuid::new_v4().to_string();
    let claims = json!({
        "aud": audiences, "exp": exp, "iat": now.timestamp(), "iss": ISSUER,
        "jti": jti,
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}},
        "nbf": now.timestamp(), "sub": format!("system:serviceaccount:{ns}:{name}"),
    });
    let header = json!({"alg": "RS256", "kid": "kcache"});
    let signature: [u8; 32] = rand::random();
    let token = format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    );
    if !dry {
        let mut tokens = state.tokens.lock();
        tokens.retain(|_, t| t.expires > now.timestamp());
        tokens.insert(
            token.clone(),
            IssuedToken {
                namespace: ns.clone(),
                name: name.clone(),
                uid: uid.clone(),
                audiences: audiences.clone(),
                expires: exp,
                jti: jti.clone(),
            },
        );
    }
    let expires_at = chrono::DateTime::from_timestamp(exp, 0)
        .unwrap_or(now)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    request.as_object_mut().map(|m| {
        m.insert("kind".into(), json!("TokenRequest"));
        m.insert("apiVersion".into(), json!("authentication.k8s.io/v1"));
        m.insert(
            "metadata".into(),
            json!({"name": name, "namespace": ns, "uid": uid, "creationTimestamp": now_rfc3339()}),
        );
        let mut spec = spec.clone();
        spec.insert("audiences".into(), json!(audiences));
        spec.insert("expirationSeconds".into(), json!(expiration));
        spec.entry("boundObjectRef").or_insert(Value::Null);
        m.insert("spec".into(), Value::Object(spec));
        m.insert(
            "status".into(),
            json!({"token": token, "expirationTimestamp": expires_at}),
        )
    });
    let _ = out;
    Ok(json_response(201, &request))
}

/// The service account a bearer token this server issued names, if it is still valid.
pub(crate) fn token_identity(state: &AppState, token: &str) -> Option<IssuedToken> {
    let tokens = state.tokens.lock();
    let t = tokens.get(token)?;
    (t.expires > chrono::Utc::now().timestamp()).then(|| t.clone())
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
        token_review_status(state, &token, audiences.as_ref())
    } else {
        let snapshot = Value::Object(m.clone());
        crate::auth::review::answer(
            state,
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

fn token_review_status(state: &AppState, token: &str, audiences: Option<&Value>) -> Value {
    if state.config.token.as_deref() == Some(token) && !token.is_empty() {
        return json!({"authenticated": true, "user": {"username": ADMIN_USER, "uid": ADMIN_UID,
                       "groups": ADMIN_GROUPS}, "audiences": [ISSUER]});
    }
    if let Some(u) = state
        .auth
        .tokens
        .read()
        .get(token)
        .filter(|_| !token.is_empty())
    {
        return json!({"authenticated": true, "user": u.clone().with_authenticated().to_json(),
                      "audiences": [ISSUER]});
    }
    let issued = state.tokens.lock().get(token).cloned();
    match issued {
        Some(t) if t.expires > chrono::Utc::now().timestamp() => {
            let wanted: Vec<String> = audiences
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let granted: Vec<String> = if wanted.is_empty() {
                t.audiences.clone()
            } else {
                wanted
                    .into_iter()
                    .filter(|a| t.audiences.contains(a))
                    .collect()
            };
            if granted.is_empty() {
                return json!({"user": {}, "error": "token audiences don't match"});
            }
            json!({
                "authenticated": true,
                "user": {
                    "username": format!("system:serviceaccount:{}:{}", t.namespace, t.name),
                    "uid": t.uid,
                    "groups": ["system:serviceaccounts",
                               format!("system:serviceaccounts:{}", t.namespace),
                               "system:authenticated"],
                },
                "audiences": granted,
            })
        }
        _ => json!({"user": {}, "error": "invalid bearer token"}),
    }
}
