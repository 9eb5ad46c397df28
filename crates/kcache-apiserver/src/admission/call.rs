//! One webhook call: the AdmissionReview sent over HTTPS (HTTP/1.1, the `caBundle` as the
//! only trusted roots) within `timeoutSeconds`, and the answer read as kube-apiserver reads
//! it: a denial with the webhook's status, a JSON patch for mutating webhooks, a failed call
//! (refused connection, timeout, bad answer) an error unless `failurePolicy` is `Ignore`.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::Attributes;
use super::matching::{Endpoint, Hook};
use super::review::review;
use crate::status::ApiError;

/// A reason in kube-apiserver's `metav1.StatusReason` list (an unknown one is dropped).
fn known_reason(r: &str) -> &'static str {
    const REASONS: [&str; 19] = [
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "StoreReadError",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    REASONS.into_iter().find(|k| *k == r).unwrap_or("")
}

/// kube-apiserver's answer to a denial (`webhookerrors.ToStatusErr`).
pub(crate) fn denial(name: &str, result: Option<&Value>) -> ApiError {
    let empty = json!({});
    let result = result.unwrap_or(&empty);
    let s = |k: &str| result.get(k).and_then(Value::as_str).unwrap_or_default();
    let code = result
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let denied = format!("admission webhook \"{name}\" denied the request");
    let message = if !s("message").is_empty() {
        format!("{denied}: {}", s("message"))
    } else if !s("reason").is_empty() {
        format!("{denied}: {}", s("reason"))
    } else {
        format!("{denied} without explanation")
    };
    let mut err = ApiError::new(code, known_reason(s("reason")), message);
    if let Some(d) = result.get("details").filter(|d| !d.is_null()) {
        err = err.with_details(d.clone());
    }
    err
}

/// A failed call (`ErrCallingWebhook`): 500 InternalError naming the webhook.
fn failed(name: &str, reason: &str) -> ApiError {
    ApiError::internal(format!("failed calling webhook \"{name}\": {reason}"))
}

/// The request path as kube-apiserver's webhook client sends it: its REST client joins the
/// URL's path with Go's `path.Join`, which drops empty and `.` segments and resolves `..`
/// (envtest's webhook URLs are `https://host:port//path`) and a trailing slash. The query is
/// left as it is.
fn clean_path(path_and_query: &str) -> String {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    let mut segments: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = format!("/{}", segments.join("/"));
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// POSTs `body` to the endpoint; the response status and body, or Go's words for the failure.
async fn post(ep: &Endpoint, url: &str, body: Vec<u8>) -> Result<(u16, Vec<u8>), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or("unsupported protocol scheme")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = clean_path(path);
    let path = path.as_str();
    let addr = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_owned()
    } else {
        format!("{authority}:443")
    };
    let post = |e: String| format!("Post \"{url}\": {e}");
    let tcp = tokio::net::TcpStream::connect(&addr).await.map_err(|e| {
        let what = if e.kind() == std::io::ErrorKind::ConnectionRefused {
            "connect: connection refused".to_owned()
        } else {
            e.to_string()
        };
        post(format!("dial tcp {addr}: {what}"))
    })?;
    let config = crate::tls::webhook_client_config(&ep.ca_bundle).map_err(post)?;
    let name = rustls::pki_types::ServerName::try_from(ep.server_name.clone())
        .map_err(|e| post(e.to_string()))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| post(format!("tls: {e}")))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| post(e.to_string()))?;
    tokio::spawn(conn);
    let req = http::Request::post(path)
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .body(Full::new(bytes::Bytes::from(body)))
        .map_err(|e| post(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| post(e.to_string()))?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| post(e.to_string()))?
        .to_bytes();
    Ok((status, bytes.to_vec()))
}

/// What a call answered: allowed (with the patched object of a mutating webhook), or the
/// error to answer the request with. `Ok((None, _))` also when a failure is ignored.
async fn call_once(
    hook: &Hook,
    attrs: &Attributes,
    warnings: &mut Vec<String>,
) -> Result<Option<Value>, ApiError> {
    if attrs.dry_run && !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook \"{}\" does not support dry run",
            hook.name
        )));
    }
    let ep = hook
        .endpoint
        .as_ref()
        .map_err(|e| failed(&hook.name, &format!("failed to call webhook: {e}")))?;
    let uid = uuid::Uuid::new_v4().to_string();
    let body = serde_json::to_vec(&review(attrs, &uid)).unwrap_or_default();
    let sep = if ep.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}timeout={}s", ep.url, hook.timeout_seconds);
    let answer = tokio::time::timeout(
        Duration::from_secs(hook.timeout_seconds),
        post(ep, &url, body),
    )
    .await
    .unwrap_or_else(|_| Err(format!("Post \"{url}\": context deadline exceeded")))
    .map_err(|e| failed(&hook.name, &format!("failed to call webhook: {e}")))?;
    let (status, bytes) = answer;
    let parsed: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !(200..300).contains(&status) {
        return Err(failed(
            &hook.name,
            &format!(
                "failed to call webhook: an error on the server (\"{}\") has prevented the request from succeeding",
                String::from_utf8_lossy(&bytes).trim()
            ),
        ));
    }
    let invalid = |why: String| {
        failed(
            &hook.name,
            &format!("received invalid webhook response: {why}"),
        )
    };
    let Some(resp) = parsed.get("response").filter(|r| r.is_object()) else {
        return Err(invalid("webhook response was absent".into()));
    };
    let got_uid = resp.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got_uid != uid {
        return Err(invalid(format!(
            "expected response.uid=\"{uid}\", got \"{got_uid}\""
        )));
    }
    let patch = resp.get("patch").filter(|p| match p {
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    });
    let patch_type = resp.get("patchType").and_then(Value::as_str);
    if hook.mutating {
        match (patch, patch_type) {
            (Some(_), None) => {
                return Err(invalid(
                    "webhook returned response.patch but not response.patchType".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "webhook returned response.patchType but not response.patch".into(),
                ));
            }
            _ => {}
        }
    } else if patch.is_some() {
        return Err(invalid(
            "validating webhook may not return response.patch".into(),
        ));
    } else if patch_type.is_some() {
        return Err(invalid(
            "validating webhook may not return response.patchType".into(),
        ));
    }
    // Warnings are passed on even with a denial, as kube-apiserver does.
    warnings.extend(
        resp.get("warnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned),
    );
    if resp.get("allowed").and_then(Value::as_bool) != Some(true) {
        return Err(denial(&hook.name, resp.get("status")));
    }
    let Some(patch) = patch else {
        return Ok(None);
    };
    if patch_type != Some("JSONPatch") {
        return Err(failed(
            &hook.name,
            &format!(
                "unsupported patch type \"{}\"",
                patch_type.unwrap_or_default()
            ),
        ));
    }
    super::patch::apply(&hook.name, attrs.object.as_ref(), patch)
}

/// Calls one webhook; a failed call of a webhook with `failurePolicy: Ignore` is ignored
/// (the object is left as it was), denials never are.
///
/// # Errors
/// The denial or the failure to answer the request with. The webhook's warnings are added
/// to `warnings` either way.
pub(crate) async fn call(
    hook: &Hook,
    attrs: &Attributes,
    warnings: &mut Vec<String>,
) -> Result<Option<Value>, ApiError> {
    match call_once(hook, attrs, warnings).await {
        Err(e)
            if hook.ignore_failures
                && e.reason == "InternalError"
                && e.message.contains("failed calling webhook") =>
        {
            tracing::warn!(webhook = %hook.name, error = %e.message, "webhook call failed, ignored (failurePolicy Ignore)");
            Ok(None)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::clean_path;

    #[test]
    fn paths_are_cleaned_as_go_path_join_cleans_them() {
        assert_eq!(clean_path("//failing?timeout=10s"), "/failing?timeout=10s");
        assert_eq!(clean_path("/a/./b/../c"), "/a/c");
        assert_eq!(clean_path("/validate/"), "/validate");
        assert_eq!(clean_path("/"), "/");
        assert_eq!(clean_path("/x?a=//b"), "/x?a=//b");
    }
}
