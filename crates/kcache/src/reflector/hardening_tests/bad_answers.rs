//! A server that answers nonsense: absurd Retry-After values, short watches, unknown events, lists
//! without a resourceVersion, endless continue tokens.

use super::*;

#[tokio::test(start_paused = true)]
async fn retry_after_of_u64_max_on_watch_open_is_capped_and_never_panics() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let run = start(&s, list_config());
    settle().await;
    s.script_watches(|| {
        Err(lister_watcher::Error::api(
            status(429, "TooManyRequests", "slow down"),
            Some(Duration::MAX),
        ))
    });
    src.drop_watches();
    let n = requests_in_a_minute(&s).await;
    assert!(
        n >= 2,
        "the reflector kept retrying within the 30 s cap ({n})"
    );
    assert!(n <= STORM_BOUND, "{n} requests in a minute");
    s.heal();
    src.upsert(cm("b"));
    settle().await;
    assert_eq!(run.names(), ["a", "b"]);
    assert!(!run.task.is_finished(), "the reflector task is alive");
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_of_a_billion_seconds_sleeps_at_most_the_backoff_cap() {
    let src = FakeSource::new();
    let s = Scripted::new(&src);
    let run = start(&s, list_config());
    settle().await;
    let mut status = status(429, "TooManyRequests", "slow down");
    status.details = Some(
        serde_json::from_value(serde_json::json!({"retryAfterSeconds": u32::MAX}))
            .expect("status details"),
    );
    s.script_watches(move || {
        Err(lister_watcher::Error::api(
            status.clone(),
            Some(Duration::from_secs(1_000_000_000)),
        ))
    });
    src.drop_watches();
    let n = requests_in_a_minute(&s).await;
    assert!(n >= 2, "retried within the cap, not after decades ({n})");
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_closes_after_one_event_backs_off() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let run = start(&s, list_config());
    settle().await;
    let rv = src.resource_version();
    s.script_watches(move || {
        let mut b = cm("a");
        b.metadata.resource_version = Some(rv.clone());
        Ok(vec![Ok(WatchEvent::Modified(b))])
    });
    src.drop_watches();
    let n = requests_in_a_minute(&s).await;
    assert!(n <= STORM_BOUND, "{n} requests in a minute");
    assert!(
        run.has_error("in under a second"),
        "{:?}",
        run.errors.lock()
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn endless_unknown_event_types_end_the_watch_and_back_off() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let run = start(&s, list_config());
    settle().await;
    s.script_watches(|| {
        Ok((0..1000)
            .map(|_| {
                Err(lister_watcher::Error::protocol(
                    "unknown watch event type \"SURPRISE\"",
                ))
            })
            .collect())
    });
    src.drop_watches();
    let errors_before = run.errors.lock().len();
    let n = requests_in_a_minute(&s).await;
    assert!(n <= STORM_BOUND, "{n} requests in a minute");
    let reported = run.errors.lock().len() - errors_before;
    assert!(
        reported <= 15 * n.max(1),
        "{reported} errors for {n} requests"
    );
    assert!(
        run.has_error("in a row could not be applied"),
        "{:?}",
        run.errors.lock()
    );
    s.heal();
    src.upsert(cm("b"));
    settle().await;
    assert_eq!(run.names(), ["a", "b"]);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_list_without_a_resource_version_is_a_protocol_error_and_leaves_the_cache() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    s.rewrite_lists(|mut l| {
        l.metadata.resource_version = None;
        l.items.clear();
        l
    });
    let run = start(&s, list_config());
    let n = requests_in_a_minute(&s).await;
    assert!(n <= STORM_BOUND, "{n} requests in a minute");
    assert!(
        run.has_error("no metadata.resourceVersion"),
        "{:?}",
        run.errors.lock()
    );
    assert!(
        !run.store
            .ops()
            .iter()
            .any(|o| matches!(o, StoreOp::Replace(..))),
        "the store was never replaced: {:?}",
        run.store.ops()
    );
    assert!(run.handle.health().consecutive_failures >= 2);
    assert!(!run.handle.health().is_healthy(1));
    s.heal();
    settle().await;
    assert_eq!(run.names(), ["a"]);
    assert_eq!(
        run.handle.health().consecutive_failures,
        0,
        "{:?}",
        run.errors.lock()
    );
    assert!(run.handle.health().is_healthy(1));
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_repeating_continue_token_is_a_protocol_error() {
    let src = FakeSource::new();
    for i in 0..3 {
        src.upsert(cm(&format!("c{i}")));
    }
    let s = Scripted::new(&src);
    s.rewrite_lists(|mut l| {
        l.metadata.continue_ = Some("fake-again".into());
        l
    });
    let run = start(&s, list_config().page_size(1));
    let n = requests_in_a_minute(&s).await;
    assert!(n <= 3 * STORM_BOUND, "{n} requests in a minute");
    assert!(
        run.has_error("repeated continue token"),
        "{:?}",
        run.errors.lock()
    );
    s.heal();
    settle().await;
    assert_eq!(run.names(), ["c0", "c1", "c2"]);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn endless_continue_tokens_stop_at_the_page_limit() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let counter = Arc::new(AtomicUsize::new(0));
    s.rewrite_lists(move |mut l| {
        // New objects on every page: only the page limit can tell that it never ends.
        let n = counter.fetch_add(1, Ordering::SeqCst);
        for item in &mut l.items {
            item.metadata.name = Some(format!("p{n}"));
        }
        l.metadata.continue_ = Some(format!("fake-t{n}"));
        l
    });
    let run = start(&s, list_config().max_list_pages(5));
    let n = requests_in_a_minute(&s).await;
    assert!(n <= 6 * STORM_BOUND, "{n} requests in a minute");
    assert!(
        run.has_error("did not end after 5 pages"),
        "{:?}",
        run.errors.lock()
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn gone_on_every_streaming_list_backs_off() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    s.script_watches(|| {
        Err(lister_watcher::Error::api(
            status(410, "Expired", "too old resource version: 1 (2)"),
            None,
        ))
    });
    let run = start(&s, Config::default());
    let n = requests_in_a_minute(&s).await;
    // Each backoff cycle costs up to four requests by client-go's rules: the stream at the
    // last RV, the stream again at RV "" (the RV is forgotten), the fallback LIST (410 at ""
    // gives the stream up) and the watch after it. STORM_BOUND counts single requests.
    assert!(n <= 2 * STORM_BOUND, "{n} requests in a minute");
    s.heal();
    settle().await;
    assert_eq!(run.names(), ["a"]);
    run.stop().await;
}
