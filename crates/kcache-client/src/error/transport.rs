//! Transport failures (refused, reset, TLS, DNS, timeout; credentials that could not be
//! obtained; an answer that is not HTTP) worded for the user, and what kind of failure an
//! error of the lister-watcher is, which [`Error`](super::Error)'s checks read.

use kcache::lister_watcher::Error as LwError;

use super::body::{DecodeError, MAX_DECODE_MESSAGE};
use super::redact_quoted;
use crate::redact::{binary_body, display_safe, sanitize_status};

/// A transport failure, worded for the user.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct TransportError {
    message: String,
    kind: TransportKind,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// What kind of transport failure a [`TransportError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TransportKind {
    /// The credentials could not be obtained (an exec plugin failed, …): nothing was sent.
    Credentials,
    /// The server answered with something that is not HTTP as hyper reads it.
    MalformedResponse,
    /// Anything else: refused, reset, TLS, DNS, timeout.
    Connection,
}

/// Whether the server answered, but with something that cannot be used: a body that is not
/// the expected JSON (or not text), a redirect (never followed), a malformed HTTP response, a
/// watch event outside the protocol.
pub(crate) fn is_unusable_answer(e: &LwError) -> bool {
    e.is_decode()
        || e.is_protocol()
        || e.code().is_some_and(|c| (300..400).contains(&c))
        || transport_kind(e) == Some(TransportKind::MalformedResponse)
}

/// Whether the request was not sent for want of credentials.
pub(crate) fn is_credentials_unavailable(e: &LwError) -> bool {
    transport_kind(e) == Some(TransportKind::Credentials)
}

fn transport_kind(e: &LwError) -> Option<TransportKind> {
    if !e.is_transport() {
        return None;
    }
    std::error::Error::source(e)?
        .downcast_ref::<TransportError>()
        .map(|t| t.kind)
}

/// Turns a kube-client error into a one-sentence transport error. Auth errors lose their source
/// chain: credential plugins' output may carry tokens.
pub(crate) fn transport_error(e: kube_client::Error, server: &str) -> LwError {
    use kube_client::Error as K;
    type Source = Option<Box<dyn std::error::Error + Send + Sync>>;
    let (message, kind, source): (String, TransportKind, Source) = match e {
        K::Auth(auth) => (
            format!(
                "cannot obtain credentials for {server}: {}; check the user entry of the \
                 current kubeconfig context",
                redact_quoted(&auth.to_string())
            ),
            TransportKind::Credentials,
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
        // kube-client reads an error body as UTF-8 text before anything else.
        K::FromUtf8(e) => {
            let what = binary_body(e.as_bytes(), None).unwrap_or_else(|| {
                format!(
                    "a body that is not UTF-8 text (a stray byte at {} of {})",
                    e.utf8_error().valid_up_to(),
                    e.as_bytes().len()
                )
            });
            return LwError::decode(DecodeError(format!(
                "the API server at {server} answered with {what}"
            )));
        }
        other => {
            let chain = error_chain(&other);
            let lower = chain.to_ascii_lowercase();
            let mut kind = TransportKind::Connection;
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
                kind = TransportKind::MalformedResponse;
                format!(
                    "the API server at {server} sent a malformed HTTP response: {}",
                    display_safe(&chain, MAX_DECODE_MESSAGE)
                )
            } else if lower.contains("timed out") || lower.contains("timeout") {
                format!("the API server at {server} did not answer in time: {chain}")
            } else {
                format!("cannot reach the API server at {server}: {chain}")
            };
            (message, kind, Some(Box::new(other)))
        }
    };
    LwError::transport(TransportError {
        message,
        kind,
        source,
    })
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
