//! Error wording: resource names from API paths, credentials withheld from server text,
//! `Status` bodies and `Retry-After` kept.

use std::time::Duration;

use http::{HeaderMap, StatusCode};

use super::errors::{api_error, describe_path};
use crate::error::body::decode_error;
use crate::redact::{MAX_STATUS_MESSAGE, display_safe, display_safe_lines};

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

#[test]
fn a_binary_error_body_is_described_never_printed() {
    let body: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    let e = api_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &HeaderMap::new(),
        &body,
        "list",
        "/api/v1/pods",
    );
    let text = e.to_string();
    assert!(text.contains("binary body, 4096 bytes"), "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() || c == '\u{fffd}'),
        "{text:?}"
    );
    // Text with a few stray bytes stays text: the bytes are escaped, not replaced.
    let e = api_error(
        StatusCode::BAD_GATEWAY,
        &HeaderMap::new(),
        b"upstream \xff\xfe said no\x07 twice",
        "list",
        "/api/v1/pods",
    );
    let text = e.to_string();
    assert!(text.contains("upstream"), "{text}");
    assert!(text.contains("said no"), "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() || c == '\u{fffd}'),
        "{text:?}"
    );
    // A long text body is trimmed.
    let long = "error ".repeat(50_000);
    let text = api_error(
        StatusCode::BAD_GATEWAY,
        &HeaderMap::new(),
        long.as_bytes(),
        "list",
        "/api/v1/pods",
    )
    .to_string();
    assert!(text.len() < 700, "{} bytes", text.len());
}

#[test]
fn a_status_message_that_is_binary_is_described_never_printed() {
    let message: String =
        String::from_utf8_lossy(&(0..=255u8).cycle().take(600).collect::<Vec<u8>>()).into_owned();
    let body = serde_json::to_vec(&serde_json::json!({"kind": "Status", "apiVersion": "v1",
        "metadata": {}, "status": "Failure", "message": message, "reason": "InternalError",
        "code": 500}))
    .unwrap();
    let text = api_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &HeaderMap::new(),
        &body,
        "list",
        "/api/v1/pods",
    )
    .to_string();
    assert!(text.contains("binary"), "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() || c == '\u{fffd}'),
        "{text:?}"
    );
}

#[test]
fn a_redirect_names_its_location_without_query_or_user_info() {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::LOCATION,
        "https://admin:pw@login.example.com/sso?token=s3cr3t#x"
            .parse()
            .unwrap(),
    );
    let e = api_error(
        StatusCode::FOUND,
        &headers,
        b"<a href=\"https://login.example.com/sso?token=s3cr3t\">Found</a>",
        "list",
        "/api/v1/pods",
    );
    let text = e.to_string();
    assert!(
        text.contains("redirected list pods to https://login.example.com/sso?…"),
        "{text}"
    );
    assert!(!text.contains("s3cr3t") && !text.contains("pw@"), "{text}");
    assert_eq!(e.code(), Some(302));
    let e = api_error(
        StatusCode::MOVED_PERMANENTLY,
        &HeaderMap::new(),
        b"",
        "list",
        "/api/v1/pods",
    );
    assert!(e.to_string().contains("without a Location"), "{e}");
}

#[test]
fn retry_after_beyond_the_reflector_backoff_cap_is_malformed() {
    let cap = kcache::reflector::BackoffConfig::default().max;
    assert_eq!(
        cap,
        Duration::from_secs(30),
        "the rule below assumes client-go's cap"
    );
    let after = |value: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, value.parse().unwrap());
        api_error(
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            b"",
            "list",
            "/api/v1/pods",
        )
        .retry_after()
    };
    for malformed in [
        "18446744073709551615",
        "1000000000",
        "31",
        "99999999999999999999999",
    ] {
        assert_eq!(after(malformed), None, "Retry-After: {malformed}");
    }
    for (sane, secs) in [("0", 0), ("3", 3), ("30", 30), (" 7 ", 7)] {
        assert_eq!(
            after(sane),
            Some(Duration::from_secs(secs)),
            "Retry-After: {sane}"
        );
    }
    let seconds = |n: u32| {
        let body = serde_json::to_vec(&serde_json::json!({"kind": "Status", "apiVersion": "v1",
            "metadata": {}, "status": "Failure", "message": "slow down",
            "reason": "TooManyRequests", "details": {"retryAfterSeconds": n}, "code": 429}))
        .unwrap();
        api_error(
            StatusCode::TOO_MANY_REQUESTS,
            &HeaderMap::new(),
            &body,
            "list",
            "/api/v1/pods",
        )
        .retry_after()
    };
    assert_eq!(seconds(u32::MAX), None);
    assert_eq!(seconds(1_000_000_000), None);
    assert_eq!(seconds(31), None);
    assert_eq!(seconds(30), Some(Duration::from_secs(30)));
    assert_eq!(seconds(1), Some(Duration::from_secs(1)));
}
