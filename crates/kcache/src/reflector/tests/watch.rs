//! The watch: where it starts, bookmarks, unknown events, errors, closes and the streaming initial
//! list.

use super::*;

#[tokio::test(start_paused = true)]
async fn watch_starts_at_list_rv_with_bookmarks_and_a_timeout_between_5_and_10_minutes() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let rv = src.resource_version();
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let calls = src.calls();
    match watches(&calls)[0] {
        Call::Watch {
            resource_version,
            timeout_seconds,
            bookmarks,
            send_initial_events,
        } => {
            assert_eq!(*resource_version, rv);
            assert!(*bookmarks);
            assert!(!*send_initial_events);
            let t = timeout_seconds.expect("a timeout is always sent");
            assert!((300..600).contains(&t), "timeout {t}");
        }
        Call::List { .. } => unreachable!(),
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn bookmark_only_advances_the_resource_version() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let before = h.store.snapshot();
    let rv = src.advance_resource_version();
    src.bookmark();
    h.store
        .wait_for(|ops| ops.iter().any(|o| matches!(o, StoreOp::Bookmark(_))))
        .await;
    assert_eq!(h.handle.last_sync_resource_version(), rv);
    assert_eq!(h.store.snapshot(), before, "a bookmark changes no object");
    assert!(!h.store.ops().iter().any(|o| matches!(
        o,
        StoreOp::Add(..) | StoreOp::Update(..) | StoreOp::Delete(..)
    )));
    h.stop().await;
}

// A list answered without a resourceVersion (which would start the watch at "" and replay
// synthetic ADDED events) is now refused as a protocol error: see
// `hardening_tests::a_list_without_a_resource_version_is_a_protocol_error_and_leaves_the_cache`.

#[tokio::test(start_paused = true)]
async fn unknown_event_types_are_skipped_without_advancing_the_rv() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let rv = h.handle.last_sync_resource_version();
    src.inject_watch_item(|| {
        Err(lister_watcher::Error::protocol(
            "unknown watch event type \"SURPRISE\"",
        ))
    });
    let new_rv = src.upsert(cm("b"));
    h.store
        .wait_for(|ops| {
            ops.iter()
                .any(|o| matches!(o, StoreOp::Add(k, _) if *k == key("b")))
        })
        .await;
    assert_ne!(rv, new_rv);
    assert_eq!(h.handle.last_sync_resource_version(), new_rv);
    assert!(
        h.errors.lock().iter().any(|e| e.contains("SURPRISE")),
        "{:?}",
        h.errors.lock()
    );
    assert_eq!(
        lists(&src.calls()).len(),
        1,
        "no relist for a skipped event"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn non_retriable_watch_open_error_relists() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.fail_watches(1, status(403, "Forbidden", "forbidden"));
    let h = Harness::start(&src, list_config());
    h.wait_calls(|c| lists(c).len() >= 2).await;
    assert!(
        h.errors
            .lock()
            .iter()
            .any(|e| e.contains("failed to watch"))
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn error_event_410_in_the_stream_relists_at_the_last_rv() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let rv = src.upsert(cm("b"));
    h.store.wait_for(|ops| ops.len() >= 2).await;
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    let calls = h.wait_calls(|c| lists(c).len() >= 2).await;
    assert!(matches!(lists(&calls)[1], Call::List { resource_version: Some(r), .. } if *r == rv));
    assert!(
        h.errors.lock().iter().any(|e| e.contains("410")),
        "{:?}",
        h.errors.lock()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_closing_in_under_a_second_without_events_relists() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    src.drop_watches();
    h.wait_calls(|c| lists(c).len() >= 2).await;
    assert!(
        h.errors
            .lock()
            .iter()
            .any(|e| e.contains("very short watch")),
        "{:?}",
        h.errors.lock()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn normal_watch_close_rewatches_from_the_last_rv_without_relisting() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let rv = src.upsert(cm("b"));
    h.store.wait_for(|ops| ops.len() >= 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    src.drop_watches();
    let calls = h.wait_calls(|c| watches(c).len() >= 2).await;
    assert!(
        matches!(watches(&calls)[1], Call::Watch { resource_version, .. } if *resource_version == rv)
    );
    assert_eq!(lists(&calls).len(), 1);
    assert!(h.errors.lock().is_empty(), "{:?}", h.errors.lock());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn broken_connection_rewatches_from_the_last_rv() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let rv = src.upsert(cm("b"));
    h.store.wait_for(|ops| ops.len() >= 2).await;
    src.break_watches();
    let calls = h.wait_calls(|c| watches(c).len() >= 2).await;
    assert!(
        matches!(watches(&calls)[1], Call::Watch { resource_version, .. } if *resource_version == rv)
    );
    assert_eq!(
        lists(&calls).len(),
        1,
        "a broken stream is re-watched, not relisted"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn retriable_watch_errors_back_off_and_rewatch_without_relisting() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.fail_watches(2, status(429, "TooManyRequests", "too many requests"));
    let start = Instant::now();
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let calls = src.calls();
    assert_eq!(watches(&calls).len(), 3);
    assert_eq!(lists(&calls).len(), 1);
    // Two backoffs: >= 800 ms then >= 1.6 s.
    assert!(
        start.elapsed() >= Duration::from_millis(2400),
        "{:?}",
        start.elapsed()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn streaming_initial_list_replaces_at_the_end_bookmark_and_keeps_the_stream() {
    let src = FakeSource::new();
    for n in ["a", "b", "c"] {
        src.upsert(cm(n));
    }
    let rv = src.resource_version();
    let h = Harness::start(&src, Config::default().initial_list(InitialList::Stream));
    h.store.wait_for(|ops| !ops.is_empty()).await;
    assert_eq!(h.store.ops()[0], StoreOp::Replace(3, rv.clone()));
    assert_eq!(h.handle.last_sync_resource_version(), rv);
    src.upsert(cm("d"));
    h.store
        .wait_for(|ops| {
            ops.iter()
                .any(|o| matches!(o, StoreOp::Add(k, _) if *k == key("d")))
        })
        .await;
    let calls = src.calls();
    assert_eq!(
        calls.len(),
        1,
        "one watch carried the list and the events: {calls:?}"
    );
    assert!(matches!(
        calls[0],
        Call::Watch {
            send_initial_events: true,
            bookmarks: true,
            ..
        }
    ));
    assert_eq!(h.handle.metrics().watch_lists, 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn streaming_list_refused_falls_back_to_list() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.set_supports_watch_list(false);
    let h = Harness::start(&src, Config::default().initial_list(InitialList::Stream));
    h.store.wait_for(|ops| !ops.is_empty()).await;
    let calls = src.calls();
    assert!(matches!(
        calls[0],
        Call::Watch {
            send_initial_events: true,
            ..
        }
    ));
    assert!(matches!(&calls[1], Call::List { resource_version: Some(rv), .. } if rv == "0"));
    assert!(matches!(h.store.ops()[0], StoreOp::Replace(1, _)));
    h.stop().await;
}
