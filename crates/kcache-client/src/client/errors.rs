//! Responses made into errors a user can act on: non-2xx responses made into API errors with
//! the server's `Status` or one made from the status line ([`api_error`]; a redirect names
//! where it points), and bodies that are not the expected JSON ([`not_the_expected_json`]).
//! Transport failures and undecodable bodies in general are `crate::error`'s (`transport.rs`,
//! `body.rs`), below the decoders.

use std::time::Duration;

use http::{HeaderMap, StatusCode};
use kcache::lister_watcher::Error as LwError;
use kube_core::{Status, response::StatusSummary};

use crate::error::body::{DecodeError, MAX_DECODE_MESSAGE};
use crate::redact::{
    binary_body, body_excerpt, body_excerpt_within, display_safe, plausible_retry_after,
    redirect_target, sanitize_status,
};

/// Builds the API error for a non-2xx response: the body's `Status` when it is one, else a
/// `Status` made from the status line and the body text. 401/403/404 get a message that says
/// what to do when the server's own is terse.
pub(crate) fn api_error(
    code: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    verb: &str,
    path: &str,
) -> LwError {
    // A server asked for protobuf answers errors with a protobuf Status.
    #[cfg(feature = "protobuf")]
    let converted = crate::protobuf::status_as_json(body);
    #[cfg(feature = "protobuf")]
    let body = converted.as_deref().unwrap_or(body);
    if code.is_redirection() {
        return redirect_error(code, headers, verb, path);
    }
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    let mut binary = false;
    let mut status = serde_json::from_slice::<Status>(body)
        .ok()
        .filter(|s| s.code != 0 || !s.reason.is_empty() || !s.message.is_empty())
        .unwrap_or_else(|| Status {
            status: Some(StatusSummary::Failure),
            code: code.as_u16(),
            message: match binary_body(body, declared) {
                Some(described) => {
                    binary = true;
                    described
                }
                None => body_excerpt(body),
            },
            metadata: None,
            reason: default_reason(code).to_owned(),
            details: None,
        });
    // A Status is the server's own words, but a proxy may fake one (or echo the request's
    // credentials): keep it printable, short and credential-free.
    sanitize_status(&mut status);
    if status.code == 0 {
        status.code = code.as_u16();
    }
    // A binary body says nothing: 401, 403 and 404 get their actionable message instead.
    let terse = status.message.is_empty()
        || binary
        || status.message == status.reason
        || status
            .message
            .eq_ignore_ascii_case(&format!("{} page not found", code.as_u16()));
    if terse {
        let resource = describe_path(path);
        let message = match code.as_u16() {
            401 => Some(
                "Unauthorized: the API server rejected the credentials of the current \
                 kubeconfig context; check its token or client certificate"
                    .to_owned(),
            ),
            403 => Some(format!(
                "Forbidden: the current user may not {verb} {resource}; ask for RBAC permission"
            )),
            // A path that names no resource (`/api`, `/apis`): no CRD to suggest.
            404 if resource == path => Some(format!(
                "NotFound: the API server does not serve {resource}"
            )),
            404 => Some(format!(
                "NotFound: the API server does not serve {resource}; check the group, version \
                 and resource name (is the CRD installed?)"
            )),
            _ if status.message.is_empty() => Some(format!(
                "the API server answered {code} to {verb} {resource}"
            )),
            _ => None,
        };
        if let Some(message) = message {
            status.message = message;
        }
    }
    LwError::api(status, retry_after(headers))
}

/// A 3xx: kube-client's stack does not follow redirects (a redirect of an API request is a
/// login page, a load balancer's HTTPS upgrade, a wrong server address), so it is an error that
/// says where it points. The body (a link to the same place) is not shown.
fn redirect_error(code: StatusCode, headers: &HeaderMap, verb: &str, path: &str) -> LwError {
    let resource = describe_path(path);
    let target = match redirect_target(headers) {
        Some(location) => format!("to {location}"),
        None => "without a Location".to_owned(),
    };
    let message = format!(
        "redirected {verb} {resource} {target} (HTTP status {}); redirects are not followed: \
         check the server address in the kubeconfig",
        code.as_u16()
    );
    let reason = code
        .canonical_reason()
        .unwrap_or("Redirect")
        .replace([' ', '-'], "");
    LwError::api(
        Status {
            status: Some(StatusSummary::Failure),
            code: code.as_u16(),
            message,
            metadata: None,
            reason,
            details: None,
        },
        None,
    )
}

/// A 2xx body that does not decode as the expected `T`: the error says whether it is JSON at
/// all, with a short escaped excerpt of the body (or `binary body, N bytes`), or which JSON it
/// is not. `what` names the request (`GET /api`).
pub(crate) fn not_the_expected_json(
    server: &str,
    what: &str,
    expected: &str,
    body: &[u8],
    e: &serde_json::Error,
) -> LwError {
    let message = if body.iter().all(u8::is_ascii_whitespace) {
        format!("the API server at {server} answered {what} with an empty body, not JSON")
    } else if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
        let excerpt = body_excerpt_within(body, MAX_NOT_JSON_EXCERPT);
        if excerpt.starts_with("binary body") {
            format!(
                "the API server at {server} answered {what} with a body that is not JSON: {excerpt}"
            )
        } else {
            format!(
                "the API server at {server} answered {what} with a body that is not JSON ({} \
                 bytes): \"{excerpt}\"",
                body.len()
            )
        }
    } else {
        format!(
            "the API server at {server} answered {what} with JSON that is not the expected \
             {expected}: {}",
            display_safe(&e.to_string(), MAX_DECODE_MESSAGE)
        )
    };
    LwError::decode(DecodeError(message))
}

/// At most this many bytes of a body that is not JSON reach an error.
const MAX_NOT_JSON_EXCERPT: usize = 160;

/// `Retry-After` in seconds (the API server never sends the HTTP-date form), if plausible.
///
/// The rule, for this header and for a `Status`'s `details.retryAfterSeconds` alike (see
/// [`sanitize_status`]): a value within the reflector's backoff cap
/// ([`BackoffConfig::default`](kcache::reflector::BackoffConfig)`.max`, client-go's 30 s) is
/// honoured; a larger one (2^64-1, 10^9 s, `u32::MAX` seconds) is not a plausible instruction
/// but a malformed one, and is read as absent, so that the normal backoff applies. So is a
/// value that is not a number of seconds (negative, an HTTP-date, garbage).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    plausible_retry_after(Duration::from_secs(seconds))
}

fn default_reason(code: StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// `pods in namespace default` / `nodes` / `leases.coordination.k8s.io "x" in namespace y`
/// from an API path.
pub(super) fn describe_path(path: &str) -> String {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _v, rest @ ..] => ("", rest),
        ["apis", g, _v, rest @ ..] => (*g, rest),
        _ => return path.to_owned(),
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(*ns), rest),
        _ => (None, rest),
    };
    let (resource, name) = match rest {
        [r] => (*r, None),
        [r, n, ..] => (*r, Some(*n)),
        [] => return path.to_owned(),
    };
    let mut s = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    if let Some(n) = name {
        s.push_str(&format!(" {n:?}"));
    }
    if let Some(ns) = ns {
        s.push_str(&format!(" in namespace {ns}"));
    }
    s
}
