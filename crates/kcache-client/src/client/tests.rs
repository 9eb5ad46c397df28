//! Error wording: resource names from API paths, credentials withheld from server text,
//! `Status` bodies and `Retry-After` kept.

use std::time::Duration;

use http::{HeaderMap, StatusCode};

use super::errors::{api_error, decode_error, describe_path};
use super::redact::{MAX_STATUS_MESSAGE, display_safe, display_safe_lines};

#[test]
fn describe_path_names_resource_group_and_namespace() {
    assert_eq!(
        describe_path("/api/v1/namespaces/default/pods"),
        "pods in namespace default"
    );
    assert_eq!(describe_path("/api/v1/nodes"), "nodes");
    assert_eq!(
        describe_path("/apis/coordination.k8s.io/v1/namespaces/x/leases/l"),
        "leases.coordination.k8s.io \"l\" in namespace x"
    );
    assert_eq!(describe_path("/apis/foo.io/v1/bars"), "bars.foo.io");
}

#[test]
fn kube_apiservers_own_words_about_tokens_are_kept_whole() {
    let msg = "The provided continue parameter is too old to display a consistent list \
               result. You can start a new list without the continue parameter, or use the \
               continue token in this response to retrieve the remainder of the results. \
               Continuing with the provided token results in an inconsistent list - objects \
               that were created, modified, or deleted between the time the first chunk was \
               returned and now may show up in the list.";
    assert_eq!(display_safe_lines(msg, MAX_STATUS_MESSAGE), msg);
    let garbage = "invalid continue token: not-base64";
    assert_eq!(display_safe_lines(garbage, MAX_STATUS_MESSAGE), garbage);
    assert!(!display_safe("token=s3cr3t", 64).contains("s3cr3t"));
    assert!(!display_safe(r#"{"token":"s3cr3t"}"#, 64).contains("s3cr3t"));
    assert!(!display_safe("password: s3cr3t", 64).contains("s3cr3t"));
    assert!(!display_safe("Authorization: Bearer s3cr3t", 64).contains("s3cr3t"));
}

#[test]
fn a_non_status_error_body_is_trimmed_escaped_and_withholds_credentials() {
    let mut page = String::from("<html><body><h1>502 Bad Gateway</h1>\u{1b}[31m\0");
    page.push_str("<pre>GET /api/v1/pods\nAuthorization: Bearer s3cr3t-t0ken\n</pre>");
    page.push_str(&"x".repeat(100_000));
    let e = api_error(
        StatusCode::BAD_GATEWAY,
        &HeaderMap::new(),
        page.as_bytes(),
        "list",
        "/api/v1/pods",
    );
    let text = e.to_string();
    assert!(text.contains("502 Bad Gateway"), "{text}");
    assert!(!text.contains("s3cr3t"), "{text}");
    assert!(!text.contains('\u{1b}') && !text.contains('\0'), "{text:?}");
    assert!(!text.contains("<h1>"), "{text}");
    assert!(text.len() < 700, "{} bytes: {text}", text.len());
}

#[test]
fn a_status_message_is_trimmed_escaped_and_withholds_credentials() {
    let message = format!(
        "denied \u{1b}[31m\0 request with Authorization: Bearer s3cr3t {}",
        "x".repeat(10_000)
    );
    let body = serde_json::to_vec(&serde_json::json!({"kind": "Status", "apiVersion": "v1",
        "metadata": {}, "status": "Failure", "message": message, "reason": "InternalError",
        "code": 500}))
    .unwrap();
    let e = api_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &HeaderMap::new(),
        &body,
        "list",
        "/api/v1/pods",
    );
    let text = e.to_string();
    assert!(
        text.contains("denied") && text.contains("withheld"),
        "{text}"
    );
    assert!(!text.contains("s3cr3t"), "{text}");
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(text.len() < 1024, "{} bytes", text.len());
}

#[test]
fn a_decode_error_quoting_the_body_is_trimmed_and_withholds_credentials() {
    let body = format!(
        r#"{{"kind":"List","items":"Bearer s3cr3t \u001b {}"}}"#,
        "y".repeat(1 << 20)
    );
    let err = serde_json::from_str::<std::collections::BTreeMap<String, u32>>(&body).unwrap_err();
    let e = decode_error(err);
    let text = e.to_string();
    assert!(!text.contains("s3cr3t"), "{}", &text[..200.min(text.len())]);
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(text.len() < 700, "{} bytes", text.len());
    assert!(std::error::Error::source(&e).is_none_or(|s| !s.to_string().contains("s3cr3t")));
}

#[test]
fn status_body_is_kept_and_retry_after_header_is_read() {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::RETRY_AFTER, "3".parse().unwrap());
    let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"slow down","reason":"TooManyRequests","code":429}"#;
    let e = api_error(
        StatusCode::TOO_MANY_REQUESTS,
        &headers,
        body,
        "list",
        "/api/v1/pods",
    );
    assert!(e.is_too_many_requests());
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!(e.status().unwrap().message, "slow down");
}

#[test]
fn plain_text_404_becomes_a_not_found_status_naming_the_resource() {
    let e = api_error(
        StatusCode::NOT_FOUND,
        &HeaderMap::new(),
        b"404 page not found\n",
        "list",
        "/apis/nope.example.com/v1/widgets",
    );
    let status = e.status().unwrap();
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert!(
        status.message.contains("widgets.nope.example.com"),
        "{}",
        status.message
    );
}

#[test]
fn terse_401_and_403_get_actionable_messages() {
    let body401 = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
    let e = api_error(
        StatusCode::UNAUTHORIZED,
        &HeaderMap::new(),
        body401,
        "list",
        "/api/v1/pods",
    );
    assert!(e.to_string().contains("credentials"), "{e}");
    let e = api_error(
        StatusCode::FORBIDDEN,
        &HeaderMap::new(),
        b"",
        "watch",
        "/api/v1/namespaces/a/secrets",
    );
    let msg = e.to_string();
    assert!(msg.contains("watch secrets in namespace a"), "{msg}");
}
