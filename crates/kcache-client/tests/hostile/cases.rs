//! The table of misbehaviours: each case is a name, what the server does, to which requests,
//! for how long, and what the reflector must show for it.

use std::time::Duration;

use bytes::Bytes;
use serde_json::json;

use crate::server::{End, ErrBody, Misbehaviour as M, PATH, SECRET, Scope};

/// Most requests per second a storm-prone fault may draw, averaged over the fault window. The
/// reflector's backoff is 800 ms doubling (server faults) and 250 ms doubling to 1 s
/// (unreachable server, deadlines), so a fault should cost at most a couple of requests a
/// second; 5/s leaves room for the kick and the first retries, and a storm is hundreds.
pub(crate) const MAX_RATE: f64 = 5.0;

pub(crate) struct Case {
    pub name: String,
    pub what: M,
    pub scope: Scope,
    /// Misbehave on this many matching requests; `None`: until healed.
    pub lasts: Option<u32>,
    pub watch_list: bool,
    /// Whether the fault must be reported through the watch error handler (a legal but odd
    /// server behaviour need not be).
    pub expect_error: bool,
    /// A huge-body case: run alone, with its peak memory measured.
    pub huge: bool,
    pub page_size: Option<u32>,
    pub max_list_pages: Option<u32>,
    /// The reflector's backoff cap, when the case needs a short one.
    pub backoff_max: Option<Duration>,
    pub max_rate: f64,
    /// Most requests in the fault window, when the rate bound does not hold (a known problem).
    pub max_requests: Option<u64>,
    /// Words the first reported error must contain (what went wrong, said plainly).
    pub says: Option<&'static str>,
}

fn case(name: impl Into<String>, what: M, scope: Scope) -> Case {
    Case {
        name: name.into(),
        what,
        scope,
        lasts: None,
        watch_list: scope == Scope::Streaming,
        expect_error: true,
        huge: false,
        page_size: None,
        max_list_pages: None,
        backoff_max: None,
        max_rate: MAX_RATE,
        max_requests: None,
        says: None,
    }
}

impl Case {
    fn says(mut self, words: &'static str) -> Self {
        self.says = Some(words);
        self
    }
    fn times(mut self, n: u32) -> Self {
        self.lasts = Some(n);
        self
    }
    fn quiet(mut self) -> Self {
        self.expect_error = false;
        self
    }
    fn huge(mut self) -> Self {
        self.huge = true;
        self
    }
    fn paged(mut self, n: u32) -> Self {
        self.page_size = Some(n);
        self
    }
    /// A `Retry-After` (or `retryAfterSeconds`) beyond the reflector's 30 s backoff cap is
    /// malformed: kcache-client reads it as absent and the normal backoff applies. A 4 s cap
    /// keeps the case short even if it were honoured up to the cap.
    fn capped(mut self) -> Self {
        self.backoff_max = Some(Duration::from_secs(4));
        self
    }
}

fn body(content_type: &'static str, b: impl Into<Vec<u8>>) -> M {
    M::Body {
        content_type,
        body: Bytes::from(b.into()),
    }
}

fn status(code: u16, body: ErrBody) -> M {
    M::Status {
        code,
        body,
        retry_after: None,
    }
}

fn retry(code: u16, retry_after: &'static str) -> M {
    M::Status {
        code,
        body: ErrBody::Empty,
        retry_after: Some(retry_after),
    }
}

fn lines(ls: &[String], end: End) -> M {
    M::WatchLines {
        lines: ls.iter().map(|l| Bytes::from(format!("{l}\n"))).collect(),
        end,
    }
}

fn error_event(code: u16, message: &str) -> String {
    json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": "Whatever", "code": code}})
    .to_string()
}

fn deep(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

pub(crate) fn all() -> Vec<Case> {
    use Scope::{Any, Continue, List, Streaming, Watch};
    let secret_text = format!(
        "Authorization: Bearer {SECRET} \u{1b}[31m\u{0} {}",
        "y".repeat(1024 * 1024)
    );
    let mut cases = vec![
        // Broken 200 list bodies.
        case("list_truncated_json", M::TruncatedList, List),
        case(
            "list_invalid_json",
            body("application/json", r#"{"kind":"ConfigMapList","items":[nope"#),
            List,
        ),
        case(
            "list_failure_status_with_200",
            body(
                "application/json",
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcd is down","reason":"InternalError","code":500}"#,
            ),
            List,
        ),
        case("list_without_resource_version", M::ListWithoutRv, List),
        case("list_item_of_wrong_kind", M::ListWithWrongKind, List),
        case(
            "list_text_html_200",
            body("text/html", "<html><body>Login to the corporate proxy</body></html>"),
            List,
        ),
        case(
            "list_octet_stream_garbage",
            body(
                "application/octet-stream",
                (0..=255u8).cycle().take(3000).collect::<Vec<u8>>(),
            ),
            List,
        ),
        case(
            "list_protobuf_magic_on_json",
            body("application/json", b"k8s\0\x0a\x02v1\x12\x0eConfigMapList garbage".to_vec()),
            List,
        ),
        case(
            "list_protobuf_content_type_garbage",
            body(
                "application/vnd.kubernetes.protobuf",
                b"k8s\0\xff\xff\xff\xff\xff\xff\x01garbage".to_vec(),
            ),
            List,
        ),
        case("list_empty_body_200", body("application/json", ""), List),
        case("list_null_body", body("application/json", "null"), List),
        case("list_array_body", body("application/json", "[]"), List),
        case(
            "list_items_is_a_1mb_secret_string",
            body(
                "application/json",
                serde_json::to_vec(&json!({"kind": "ConfigMapList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": "1"}, "items": secret_text}))
                .unwrap(),
            ),
            List,
        ),
        case(
            "list_rv_is_a_secret_object",
            body(
                "application/json",
                serde_json::to_vec(&json!({"kind": "ConfigMapList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": {"Authorization": format!("Bearer {SECRET}")}},
                    "items": []}))
                .unwrap(),
            ),
            List,
        ),
        case("list_deep_nesting_100k", M::DeepList { depth: 100_000 }, List),
        case("list_huge_100mb_truncated", M::HugeList { mb: 100 }, List)
            .times(2)
            .huge(),
        case(
            "list_huge_single_object_100mb",
            M::HugeObjectList { mb: 100 },
            List,
        )
        .times(2)
        .huge(),
        case("list_500_with_100mb_body", status(500, ErrBody::Huge), List)
            .times(2)
            .huge(),
        // Stalls, trickles and broken connections.
        case("list_stall_no_answer", M::StallNoAnswer, List),
        case("list_stall_after_head", M::StallAfterHead, List),
        case("list_trickle_1b_per_100ms", M::Trickle, List),
        case("list_reset_mid_body", M::ResetMidList, List),
        case("list_closed_before_answer", M::CloseAtOnce, List),
        case("list_redirect_302", M::Redirect, List)
            .says("redirected list configmaps in namespace ns to http://192.0.2.1/elsewhere"),
        // Pagination.
        // Endless `continue` tokens that replay the same object: the pager's repeated-key check
        // makes it a protocol error on the second page, then the usual backoff.
        case("list_endless_continue", M::EndlessContinue, List).paged(2),
        // With a page limit that is reached within the window, it is a protocol error with a
        // backoff like any other; each attempt still costs up to that many back-to-back pages.
        Case {
            max_list_pages: Some(10),
            ..case("list_endless_continue_page_limit_10", M::EndlessContinue, List).paged(2)
        },
        case("list_repeating_continue", M::RepeatingContinue, List).paged(2),
        // Endless `continue` tokens, each short page with an object never seen before: only
        // pacing bounds it (short pages at most 4 a second), and the page limit ends it.
        case(
            "list_endless_continue_fresh_short_pages",
            M::EndlessFreshContinue,
            List,
        )
        .paged(10)
        .quiet(),
        case(
            "list_410_on_every_continue",
            status(410, ErrBody::Empty),
            Continue,
        )
        .paged(2)
        .quiet(),
        case("list_410_every_time", status(410, ErrBody::Empty), List),
        case("list_500_status_secret_1mb", status(500, ErrBody::StatusSecret), List),
        case(
            "list_500_status_secret_2kb",
            status(500, ErrBody::StatusSecretSmall),
            List,
        ),
        case(
            "list_500_protobuf_garbage_body",
            status(500, ErrBody::ProtobufGarbage),
            List,
        ),
        // Retry-After.
        case("list_429_retry_after_0", retry(429, "0"), List),
        case("list_429_retry_after_negative", retry(429, "-1"), List),
        case("list_429_retry_after_garbage", retry(429, "soon"), List),
        // A DEL in a header: hyper refuses the response, which is reported as a malformed
        // response, not as an unreachable server.
        case(
            "list_429_retry_after_invalid_header_byte",
            retry(429, "soon\u{7f}ish"),
            List,
        )
        .says("malformed HTTP response"),
        case(
            "list_429_retry_after_u64_max",
            retry(429, "18446744073709551615"),
            List,
        )
        .capped(),
        case("list_429_retry_after_1e9", retry(429, "1000000000"), List).capped(),
        case(
            "list_429_retry_after_http_date",
            retry(429, "Wed, 21 Oct 2015 07:28:00 GMT"),
            List,
        ),
        case(
            "list_503_retry_after_u64_max",
            retry(503, "18446744073709551615"),
            List,
        )
        .capped(),
        case(
            "list_429_status_retry_after_seconds_huge",
            status(429, ErrBody::StatusRetryHuge),
            List,
        )
        .capped(),
        // Watch streams.
        case(
            "watch_error_event_odd_object",
            lines(&[r#"{"type":"ERROR","object":"garbage"}"#.to_owned()], End::Close),
            Watch,
        ),
        case(
            "watch_error_event_configmap_object",
            lines(
                &[json!({"type": "ERROR", "object": {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "odd", "namespace": "ns", "resourceVersion": "1"}}})
                .to_string()],
                End::Close,
            ),
            Watch,
        )
        .says("ERROR watch event whose object is not a Status: kind ConfigMap"),
        case(
            "watch_error_event_null_object",
            lines(&[r#"{"type":"ERROR","object":null}"#.to_owned()], End::Close),
            Watch,
        ),
        case(
            "watch_error_event_secret_1mb",
            lines(&[error_event(500, &secret_text)], End::Close),
            Watch,
        ),
        case(
            "watch_unknown_event_type",
            lines(
                &[json!({"type": "FROBNICATED", "object": {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "frob", "namespace": "ns", "resourceVersion": "1"}}})
                .to_string()],
                End::Continue,
            ),
            Watch,
        ),
        case(
            "watch_unknown_event_type_secret_1mb",
            lines(
                &[json!({"type": secret_text, "object": {}}).to_string()],
                End::Continue,
            ),
            Watch,
        ),
        case(
            "watch_garbage_line",
            lines(&["this is not json \u{1b}[2J".to_owned()], End::Continue),
            Watch,
        ),
        case(
            "watch_bookmark_without_rv",
            lines(
                &[r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{}}}"#
                    .to_owned()],
                End::Continue,
            ),
            Watch,
        )
        .quiet(),
        case(
            "watch_deep_nesting_100k",
            lines(
                &[format!(
                    r#"{{"type":"ADDED","object":{{"metadata":{{"name":"deep","namespace":"ns","resourceVersion":"1"}},"data":{}}}}}"#,
                    deep(100_000)
                )],
                End::Continue,
            ),
            Watch,
        ),
        case("watch_line_split_across_chunks", M::SplitLines, Watch).quiet(),
        case("watch_bad_chunking", M::BadChunking, Watch),
        // Quiet when the watch outlived 1 s before its event: a normal close, re-watched at once.
        case("watch_closes_after_one_event", M::CloseAfterOneEvent, Watch).quiet(),
        case("watch_closes_at_once_without_events", M::CloseEmpty, Watch),
        case("watch_goes_silent", M::Silent, Watch),
        case("watch_open_stall_no_answer", M::StallNoAnswer, Watch),
        // A broken watch connection is a close (client-go too): logged at debug, not reported.
        case("watch_reset_mid_stream", M::ResetMidWatch, Watch).quiet(),
        case("watch_huge_event_100mb", M::HugeEvent { mb: 100 }, Watch)
            .times(2)
            .huge(),
        case("watch_open_410", status(410, ErrBody::Empty), Watch),
        case("watch_open_429_retry_after_0", retry(429, "0"), Watch),
        case("watch_open_500_html", status(500, ErrBody::Html), Watch),
        case("watch_open_403_secret", status(403, ErrBody::Secret), Watch),
        case("watch_open_redirect_302", M::Redirect, Watch),
        case(
            "watch_text_html_200",
            body("text/html", "<html><body>proxy says hi</body></html>\n"),
            Watch,
        ),
        case(
            "watch_protobuf_garbage_200",
            body(
                "application/vnd.kubernetes.protobuf;stream=watch",
                b"\x00\x00\x00\x10k8s\0garbage-garbage".to_vec(),
            ),
            Watch,
        ),
        // Streaming lists.
        case(
            "streaming_list_closes_before_end_bookmark",
            M::StreamingCloseEarly,
            Streaming,
        ),
        case(
            "streaming_list_410_on_every_open",
            status(410, ErrBody::Empty),
            Streaming,
        ),
        case(
            "streaming_list_400_not_supported",
            status(400, ErrBody::Empty),
            Streaming,
        ),
        case(
            "streaming_list_503_retry_after_u64_max",
            retry(503, "18446744073709551615"),
            Streaming,
        )
        .capped(),
        case(
            "streaming_list_garbage_line",
            lines(&["{{{{".to_owned()], End::Close),
            Streaming,
        ),
        case("streaming_list_stall_no_answer", M::StallNoAnswer, Streaming),
        // Any failure of a streaming list gives it up for the round: a plain LIST syncs.
        case(
            "streaming_list_never_sends_end_bookmark",
            M::StreamingNoEndBookmark,
            Streaming,
        ),
        case(
            "streaming_list_500_on_open",
            status(500, ErrBody::Html),
            Streaming,
        ),
        case(
            "streaming_list_error_event_500",
            lines(&[error_event(500, "etcd is sad")], End::Close),
            Streaming,
        ),
        case(
            "watch_open_504_too_large_resource_version",
            status(504, ErrBody::StatusTooLarge),
            Watch,
        ),
        case(
            "watch_error_event_500_storage_read_error",
            lines(
                &[json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                    "metadata": {}, "status": "Failure", "reason": "StorageReadError",
                    "message": "failed to prepare current and previous objects: corrupt object has been deleted",
                    "code": 500}})
                .to_string()],
                End::Close,
            ),
            Watch,
        ),
        // Everything at once.
        case("all_requests_500_html", status(500, ErrBody::Html), Any),
        case("all_requests_closed_at_once", M::CloseAtOnce, Any),
        case("all_requests_stall", M::StallNoAnswer, Any),
    ];
    for code in [400u16, 401, 403, 404, 410, 429, 500, 503, 504] {
        cases.push(case(
            format!("watch_error_event_{code}"),
            lines(
                &[error_event(code, &format!("event {code} from {PATH}"))],
                End::Close,
            ),
            Watch,
        ));
    }
    for code in [401u16, 403, 404, 429, 500, 503] {
        for (b, label) in [
            (ErrBody::Empty, "empty"),
            (ErrBody::Html, "html"),
            (ErrBody::Binary, "binary"),
            (ErrBody::Control, "nul_and_escapes"),
            (ErrBody::Mega, "1mb"),
            (ErrBody::Secret, "echoing_the_token"),
        ] {
            let c = case(format!("list_{code}_{label}"), status(code, b), List);
            // Bytes that are mostly not text are described, never printed; 401, 403 and 404
            // say what to do instead.
            let binary_is_described = matches!(b, ErrBody::Binary) && code >= 429;
            cases.push(if binary_is_described {
                c.says("binary body, 4096 bytes")
            } else {
                c
            });
        }
    }
    cases
}
