//! Watch timing and option semantics, with paused time.

mod common;

use std::time::Duration;

use common::{Watch, get, outline, post};
use kcache_apiserver::ApiServer;
use serde_json::{Value, json};
use tokio::time::Instant;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str) -> Value {
    json!({"metadata": {"name": name}})
}

fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(start_paused = true)]
async fn timeout_seconds_ends_the_stream_cleanly_at_the_deadline() {
    let s = ApiServer::builder().build().start().await.unwrap();
    let start = Instant::now();
    let mut w = Watch::open(
        s.addr(),
        &format!(
            "{CMS}?watch=1&resourceVersion={}&timeoutSeconds=7",
            s.handle().resource_version()
        ),
        &[],
    )
    .await
    .unwrap();
    assert!(w.collect().await.is_empty());
    assert!(!w.aborted);
    assert!(start.elapsed() >= Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn bookmarks_come_periodically_and_shortly_before_the_timeout() {
    let s = ApiServer::builder()
        .bookmark_interval(Duration::from_secs(10))
        .build()
        .start()
        .await
        .unwrap();
    let start = post(s.addr(), CMS, &cm("a")).await.json();
    let opened = Instant::now();
    let mut w = Watch::open(
        s.addr(),
        &format!(
            "{CMS}?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=25",
            rv(&start)
        ),
        &[],
    )
    .await
    .unwrap();
    let b = post(s.addr(), CMS, &cm("b")).await.json();
    let mut times = Vec::new();
    let mut events = Vec::new();
    while let Some(e) = w.next().await {
        times.push(opened.elapsed());
        events.push(e);
    }
    assert_eq!(
        outline(&events),
        ["ADDED b", "BOOKMARK", "BOOKMARK", "BOOKMARK"]
    );
    for e in &events[1..] {
        assert_eq!(
            e["object"],
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": rv(&b)}})
        );
    }
    // periodic at 10 s and 20 s, then the pre-timeout one at 23 s
    let secs: Vec<u64> = times[1..].iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [10, 20, 23]);
}

#[tokio::test(start_paused = true)]
async fn no_bookmark_when_nothing_changed_since_the_watch_started() {
    let s = ApiServer::builder()
        .bookmark_interval(Duration::from_secs(1))
        .build()
        .start()
        .await
        .unwrap();
    let mut w = Watch::open(
        s.addr(),
        &format!(
            "{CMS}?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=10",
            s.handle().resource_version()
        ),
        &[],
    )
    .await
    .unwrap();
    assert!(w.collect().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn bookmark_carries_changes_in_other_namespaces() {
    let s = ApiServer::builder().build().start().await.unwrap();
    post(
        s.addr(),
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "other"}}),
    )
    .await;
    let start_rv = s.handle().resource_version();
    let mut w = Watch::open(
        s.addr(),
        &format!(
            "{CMS}?watch=1&allowWatchBookmarks=true&resourceVersion={start_rv}&timeoutSeconds=4"
        ),
        &[],
    )
    .await
    .unwrap();
    let other = post(s.addr(), "/api/v1/namespaces/other/configmaps", &cm("x"))
        .await
        .json();
    let events = w.collect().await;
    assert_eq!(outline(&events), ["BOOKMARK"]);
    assert_eq!(
        events[0]["object"]["metadata"]["resourceVersion"],
        rv(&other)
    );
}

#[tokio::test(start_paused = true)]
async fn far_future_watch_waits_silently_until_the_timeout() {
    let s = ApiServer::builder().build().start().await.unwrap();
    let mut w = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&resourceVersion=99999999&timeoutSeconds=5"),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(w.status, 200);
    post(s.addr(), CMS, &cm("a")).await;
    assert!(w.collect().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn send_initial_events_without_bookmarks_has_no_end_marker() {
    let s = ApiServer::builder().build().start().await.unwrap();
    post(s.addr(), CMS, &cm("a")).await;
    let mut w = Watch::open(s.addr(), &format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=2"), &[]).await.unwrap();
    assert_eq!(outline(&w.collect().await), ["ADDED a"]);
}

#[tokio::test(start_paused = true)]
async fn streaming_list_then_live_events_on_the_same_stream() {
    let s = ApiServer::builder().build().start().await.unwrap();
    post(s.addr(), CMS, &cm("a")).await;
    let mut w = Watch::open(s.addr(), &format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=30"), &[]).await.unwrap();
    assert_eq!(w.next().await.unwrap()["type"], "ADDED");
    let end = w.next().await.unwrap();
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    post(s.addr(), CMS, &cm("b")).await;
    let live = w.next().await.unwrap();
    assert_eq!(outline(&[live]), ["ADDED b"]);
}

#[tokio::test]
async fn watch_option_validation_errors_are_422_list_options() {
    let s = ApiServer::builder().build().start().await.unwrap();
    for q in [
        "watch=1&sendInitialEvents=true",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
        "watch=1&resourceVersionMatch=NotOlderThan",
    ] {
        let r = get(s.addr(), &format!("{CMS}?{q}")).await;
        assert_eq!(r.status, 422, "{q}");
        assert_eq!(r.json()["details"]["kind"], "ListOptions");
    }
}

#[tokio::test(start_paused = true)]
async fn deprecated_watch_path_is_served() {
    let s = ApiServer::builder().build().start().await.unwrap();
    let a = post(s.addr(), CMS, &cm("a")).await.json();
    let mut w = Watch::open(
        s.addr(),
        "/api/v1/watch/namespaces/default/configmaps?timeoutSeconds=1",
        &[],
    )
    .await
    .unwrap();
    let events = w.collect().await;
    assert_eq!(outline(&events), ["ADDED a"]);
    let mut single = Watch::open(
        s.addr(),
        &format!(
            "/api/v1/watch/namespaces/default/configmaps/a?resourceVersion={}&timeoutSeconds=1",
            rv(&a)
        ),
        &[],
    )
    .await
    .unwrap();
    assert!(single.collect().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn table_watch_streams_one_row_tables() {
    let s = ApiServer::builder().build().start().await.unwrap();
    post(s.addr(), CMS, &cm("a")).await;
    let mut w = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&timeoutSeconds=1"),
        &[(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )],
    )
    .await
    .unwrap();
    let events = w.collect().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert_eq!(events[0]["object"]["rows"][0]["cells"][0], "a");
}

#[tokio::test(start_paused = true)]
async fn raw_wire_each_event_is_its_own_chunk_and_the_stream_ends_with_the_zero_chunk() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = ApiServer::builder().build().start().await.unwrap();
    post(s.addr(), CMS, &cm("a")).await;
    post(s.addr(), CMS, &cm("b")).await;
    let mut tcp = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    let req = format!(
        "GET {CMS}?watch=1&timeoutSeconds=1 HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
        s.addr()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    // Parse the chunks: every chunk is exactly one JSON event line.
    let mut rest = body;
    let mut events = Vec::new();
    loop {
        let (size, after) = rest.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size, 16).unwrap();
        if size == 0 {
            assert_eq!(after, "\r\n", "nothing after the terminating chunk");
            break;
        }
        let chunk = &after[..size];
        assert!(
            chunk.ends_with('\n') && chunk.matches('\n').count() == 1,
            "{chunk:?}"
        );
        events.push(serde_json::from_str::<Value>(chunk).unwrap());
        rest = after[size..].strip_prefix("\r\n").unwrap();
    }
    assert_eq!(outline(&events), ["ADDED a", "ADDED b"]);
}
