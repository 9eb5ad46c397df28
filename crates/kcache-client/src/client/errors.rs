//! Failures made into errors a user can act on: transport failures worded for the user
//! ([`transport_error`]), non-2xx responses made into API errors with the server's `Status`
//! or one made from the status line ([`api_error`]), and body decoding failures
//! ([`decode_error`]).

use std::time::Duration;

use http::{HeaderMap, StatusCode};
use kcache::lister_watcher::Error as LwError;
use kube_core::{Status, response::StatusSummary};

use super::redact::{body_excerpt, display_safe, sanitize_status};
use crate::error::redact_quoted;

/// At most this many bytes of a decoder's message (which may quote the body) reach an error.
const MAX_DECODE_MESSAGE: usize = 512;

/// A transport failure, worded for the user.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct TransportError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// Turns a kube-client error into a one-sentence transport error. Auth errors lose their source
/// chain: credential plugins' output may carry tokens.
pub(crate) fn transport_error(e: kube_client::Error, server: &str) -> LwError {
    use kube_client::Error as K;
    let (message, source): (String, Option<Box<dyn std::error::Error + Send + Sync>>) = match e {
        K::Auth(auth) => (
            format!(
                "cannot obtain credentials for {server}: {}; check the user entry of the \
                 current kubeconfig context",
                redact_quoted(&auth.to_string())
            ),
            None,
        ),
        K::Api(status) => {
            let mut status = *status;
            sanitize_status(&mut status);
            return LwError::api(status, None);
        }
        // The server answered, but not with what was asked (garbage, an HTML page): not a
        // connection problem.
        K::SerdeError(e) => {
            return LwError::decode(DecodeError(format!(
                "the API server at {server} answered with a body that is not the expected \
                 JSON: {}",
                display_safe(&e.to_string(), MAX_DECODE_MESSAGE)
            )));
        }
        other => {
            let chain = error_chain(&other);
            let lower = chain.to_ascii_lowercase();
            let message = if lower.contains("connection refused") {
                format!(
                    "cannot connect to the API server at {server}: connection refused; is it \
                     running, and is the server address in the kubeconfig right?"
                )
            } else if lower.contains("certificate")
                || lower.contains("tls")
                || lower.contains("handshake")
            {
                format!(
                    "TLS handshake with {server} failed ({}); check the cluster's \
                     certificate-authority in the kubeconfig",
                    redact_quoted(&chain)
                )
            } else if lower.contains("dns") || lower.contains("lookup") {
                format!("cannot resolve the API server's host name in {server}: {chain}")
            } else if lower.contains("parsed")
                || lower.contains("invalid http")
                || lower.contains("message head")
            {
                // hyper refused what came back (a header with a forbidden byte, a broken
                // status line): the server is reachable but speaks broken HTTP.
                format!(
                    "the API server at {server} sent a malformed HTTP response: {}",
                    display_safe(&chain, MAX_DECODE_MESSAGE)
                )
            } else if lower.contains("timed out") || lower.contains("timeout") {
                format!("the API server at {server} did not answer in time: {chain}")
            } else {
                format!("cannot reach the API server at {server}: {chain}")
            };
            (message, Some(Box::new(other)))
        }
    };
    LwError::transport(TransportError { message, source })
}

/// `a: b: c` for an error and its sources, without repeating a message its source repeats.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let msg = err.to_string();
        if !parts.iter().any(|p| p.contains(&msg)) {
            parts.push(msg);
        }
        cur = err.source();
    }
    parts.join(": ")
}

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
    let mut status = serde_json::from_slice::<Status>(body)
        .ok()
        .filter(|s| s.code != 0 || !s.reason.is_empty() || !s.message.is_empty())
        .unwrap_or_else(|| Status {
            status: Some(StatusSummary::Failure),
            code: code.as_u16(),
            message: body_excerpt(body),
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
    let terse = status.message.is_empty()
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

/// A decoding failure whose message may quote the body (serde quotes unexpected strings):
/// made safe to show, and without the original error, which keeps the quote.
pub(crate) fn decode_error(e: impl std::fmt::Display) -> LwError {
    LwError::decode(DecodeError(display_safe(
        &e.to_string(),
        MAX_DECODE_MESSAGE,
    )))
}

/// A response body could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct DecodeError(String);

/// `Retry-After` in seconds (the API server never sends the HTTP-date form).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
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
