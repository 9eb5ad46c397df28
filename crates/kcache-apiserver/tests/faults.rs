//! Fault injection from Rust (`FaultHandle`) and over HTTP (`/debug/kcache/`).

mod common;

use std::time::Duration;

use common::{Watch, get, post};
use http::Method;
use kcache_apiserver::{ApiServer, InjectedFailure};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str) -> Value {
    json!({"metadata": {"name": name}, "data": {"k": "v"}})
}

fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn drop_watches_ends_open_watches_cleanly_and_new_ones_work() {
    let s = ApiServer::builder().build().start().await.unwrap();
    let start = post(s.addr(), CMS, &cm("a")).await.json();
    let mut w1 = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&start)),
        &[],
    )
    .await
    .unwrap();
    let mut w2 = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&start)),
        &[],
    )
    .await
    .unwrap();
    post(s.addr(), CMS, &cm("b")).await;
    assert_eq!(w1.next().await.unwrap()["type"], "ADDED");
    s.faults().drop_watches();
    assert!(w1.next().await.is_none());
    assert!(
        !w1.aborted,
        "a dropped watch ends with the terminating chunk"
    );
    assert_eq!(
        w2.collect().await.len(),
        1,
        "the event before the drop, then the end"
    );
    assert_eq!(s.faults().dropped_watches(), 2);
    let mut w3 = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&start)),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(w3.next().await.unwrap()["object"]["metadata"]["name"], "b");
}

#[tokio::test]
async fn compact_now_expires_lists_continue_tokens_and_watches_at_older_rvs() {
    let s = ApiServer::builder().build().start().await.unwrap();
    for n in ["a", "b", "c"] {
        post(s.addr(), CMS, &cm(n)).await;
    }
    let page = get(s.addr(), &format!("{CMS}?limit=1")).await.json();
    let token = page["metadata"]["continue"].as_str().unwrap().to_owned();
    let list_rv = page["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    post(s.addr(), CMS, &cm("d")).await;
    s.faults().compact();

    let exact = get(
        s.addr(),
        &format!("{CMS}?resourceVersion={list_rv}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(exact.status, 410);
    let cont = get(s.addr(), &format!("{CMS}?limit=1&continue={token}")).await;
    assert_eq!(cont.status, 410);
    let fresh = cont.json()["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_owned();
    let resumed = get(s.addr(), &format!("{CMS}?limit=10&continue={fresh}"))
        .await
        .json();
    let names: Vec<&str> = resumed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["b", "c", "d"],
        "the fresh token continues inconsistently at the latest state"
    );
    let mut w = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&resourceVersion={list_rv}"),
        &[],
    )
    .await
    .unwrap();
    let events = w.collect().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["object"]["code"], 410);
}

#[tokio::test]
async fn fail_next_requests_with_429_and_retry_after_then_recover() {
    let s = ApiServer::builder().build().start().await.unwrap();
    s.faults()
        .fail_next(2, InjectedFailure::TooManyRequests { retry_after: 7 });
    for _ in 0..2 {
        let r = get(s.addr(), CMS).await;
        assert_eq!(r.status, 429);
        assert_eq!(r.header("retry-after").as_deref(), Some("7"));
        assert_eq!(r.json()["reason"], "TooManyRequests");
    }
    assert_eq!(get(s.addr(), CMS).await.status, 200);
}

#[tokio::test]
async fn fail_next_with_500_is_an_internal_error_status() {
    let s = ApiServer::builder().build().start().await.unwrap();
    s.faults().fail_next(1, InjectedFailure::Internal);
    let r = post(s.addr(), CMS, &cm("a")).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["reason"], "InternalError");
    assert_eq!(
        get(s.addr(), &format!("{CMS}/a")).await.status,
        404,
        "the failed create stored nothing"
    );
}

#[tokio::test]
async fn fail_next_with_410_reaches_a_watch_as_an_error_event() {
    let s = ApiServer::builder().build().start().await.unwrap();
    s.faults().fail_next(1, InjectedFailure::Expired);
    let mut w = Watch::open(s.addr(), &format!("{CMS}?watch=1"), &[])
        .await
        .unwrap();
    assert_eq!(w.status, 200);
    let events = w.collect().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
}

#[tokio::test(start_paused = true)]
async fn latency_delays_every_request() {
    let s = ApiServer::builder().build().start().await.unwrap();
    s.faults().set_latency(Duration::from_secs(5));
    let before = tokio::time::Instant::now();
    assert_eq!(get(s.addr(), CMS).await.status, 200);
    assert!(before.elapsed() >= Duration::from_secs(5));
    s.faults().set_latency(Duration::ZERO);
    let before = tokio::time::Instant::now();
    get(s.addr(), CMS).await;
    assert!(before.elapsed() < Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn stalled_watches_hold_events_until_resumed() {
    let s = ApiServer::builder().build().start().await.unwrap();
    let start = post(s.addr(), CMS, &cm("a")).await.json();
    let mut w = Watch::open(
        s.addr(),
        &format!(
            "{CMS}?watch=1&resourceVersion={}&timeoutSeconds=600",
            rv(&start)
        ),
        &[],
    )
    .await
    .unwrap();
    s.faults().stall_watches(true);
    post(s.addr(), CMS, &cm("b")).await;
    let held = tokio::time::timeout(Duration::from_secs(30), w.next()).await;
    assert!(held.is_err(), "no event while stalled");
    s.faults().stall_watches(false);
    let e = w.next().await.unwrap();
    assert_eq!(e["object"]["metadata"]["name"], "b");
}

#[tokio::test]
async fn truncate_cuts_a_watch_event_mid_object_and_aborts_the_stream() {
    let s = ApiServer::builder().build().start().await.unwrap();
    let start = post(s.addr(), CMS, &cm("a")).await.json();
    let mut w = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&start)),
        &[],
    )
    .await
    .unwrap();
    s.faults().truncate_next_watch_events(1);
    post(s.addr(), CMS, &cm("b")).await;
    assert!(w.next().await.is_none());
    assert!(w.aborted, "no terminating chunk");
    assert!(!w.partial.is_empty(), "half an event arrived");
    assert!(
        serde_json::from_slice::<Value>(&w.partial).is_err(),
        "and it is not valid JSON"
    );
}

#[tokio::test]
async fn fault_endpoints_are_off_by_default() {
    let s = ApiServer::builder().build().start().await.unwrap();
    let r = common::request(s.addr(), Method::POST, "/debug/kcache/compact", &[], None)
        .await
        .unwrap();
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn fault_endpoints_over_http_fail_drop_and_compact() {
    let s = ApiServer::builder()
        .enable_faults_http(true)
        .build()
        .start()
        .await
        .unwrap();
    let start = post(s.addr(), CMS, &cm("a")).await.json();
    let fail = common::request(
        s.addr(),
        Method::POST,
        "/debug/kcache/fail?count=1&status=503",
        &[],
        None,
    )
    .await
    .unwrap();
    assert_eq!(fail.status, 200);
    assert_eq!(get(s.addr(), CMS).await.status, 503);
    assert_eq!(get(s.addr(), CMS).await.status, 200);

    let mut w = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&start)),
        &[],
    )
    .await
    .unwrap();
    let drop = common::request(
        s.addr(),
        Method::POST,
        "/debug/kcache/drop-watches",
        &[],
        None,
    )
    .await
    .unwrap();
    assert_eq!(drop.status, 200);
    assert!(w.next().await.is_none());

    post(s.addr(), CMS, &cm("b")).await;
    common::request(s.addr(), Method::POST, "/debug/kcache/compact", &[], None)
        .await
        .unwrap();
    let old = get(
        s.addr(),
        &format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&start)
        ),
    )
    .await;
    assert_eq!(old.status, 410);
    let bad = common::request(
        s.addr(),
        Method::POST,
        "/debug/kcache/fail?status=418",
        &[],
        None,
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400);
}
