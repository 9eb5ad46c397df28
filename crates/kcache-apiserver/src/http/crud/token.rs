//! Service account tokens: POST `serviceaccounts/{name}/token` (a TokenRequest answered with
//! a JWT-shaped token the server remembers and then accepts as a bearer token), the identity
//! such a token names, and the status a `tokenreviews` POST answers for a token.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderMap;
use serde_json::{Value, json};

use super::now_rfc3339;
use super::subresources::{decode_body, dry_run_query, pod_target};
use crate::auth::{ADMIN_GROUPS, ADMIN_UID, ADMIN_USER};
use crate::http::negotiate::output;
use crate::http::{AppState, Target, json_response};
use crate::object::meta_str;
use crate::registry::IssuedToken;
use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};

/// The issuer and default audience of service account tokens (kube-apiserver's
/// `--service-account-issuer` in the usual setup).
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

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

pub(super) fn token_review_status(
    state: &AppState,
    token: &str,
    audiences: Option<&Value>,
) -> Value {
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
