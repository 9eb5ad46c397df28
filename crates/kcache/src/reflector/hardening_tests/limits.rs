//! Limits and healing: reflector names, watch-timeout floors, page sizes, a partition that heals
//! and pages that replay the same objects.

use super::*;

#[tokio::test(start_paused = true)]
async fn reflectors_are_named_after_what_they_watch() {
    let src = FakeSource::new();
    let s = Scripted::new(&src);
    src.fail_lists(1, status(500, "InternalError", "boom"));
    let run = start(&s, list_config());
    settle().await;
    assert_eq!(run.handle.name(), "configmaps in namespace ns");
    assert!(
        run.has_error("failed to list configmaps in namespace ns"),
        "{:?}",
        run.errors.lock()
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn min_watch_timeout_under_5_minutes_is_raised_to_5_minutes() {
    let src = FakeSource::new();
    let s = Scripted::new(&src);
    let run = start(&s, list_config().min_watch_timeout(Duration::from_secs(10)));
    settle().await;
    let timeouts: Vec<u32> = src
        .calls()
        .iter()
        .filter_map(|c| match c {
            Call::Watch {
                timeout_seconds, ..
            } => *timeout_seconds,
            Call::List { .. } => None,
        })
        .collect();
    assert!(!timeouts.is_empty());
    assert!(
        timeouts.iter().all(|t| (300..600).contains(t)),
        "{timeouts:?}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_explicit_page_size_pages_a_relist_at_a_specific_rv() {
    let src = FakeSource::new();
    for i in 0..3 {
        src.upsert(cm(&format!("c{i}")));
    }
    let s = Scripted::new(&src);
    let run = start(&s, list_config().page_size(2));
    settle().await;
    src.clear_calls();
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    settle().await;
    let relist = src
        .calls()
        .into_iter()
        .find(|c| matches!(c, Call::List { .. }))
        .expect("a relist");
    assert!(
        matches!(&relist, Call::List { limit: Some(2), resource_version: Some(rv), .. } if rv != "0" && !rv.is_empty()),
        "{relist:?}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_page_size_a_relist_at_a_specific_rv_is_not_paged() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let run = start(&s, list_config());
    settle().await;
    src.clear_calls();
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    settle().await;
    let relist = src
        .calls()
        .into_iter()
        .find(|c| matches!(c, Call::List { .. }))
        .expect("a relist");
    assert!(
        matches!(&relist, Call::List { limit: None, .. }),
        "{relist:?}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_partition_heals_and_the_reflector_reconnects_within_about_a_second() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let run = start(&s, list_config());
    settle().await;
    s.script_watches(|| Err(lister_watcher::Error::transport("connection refused")));
    src.drop_watches();
    // A long partition: the server backoff would be at its 30 s cap by now.
    tokio::time::sleep(Duration::from_secs(300)).await;
    let healed = tokio::time::Instant::now();
    s.heal();
    let rv = src.upsert(cm("b"));
    let mut waited = Duration::ZERO;
    while run.handle.last_sync_resource_version() != rv {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited = healed.elapsed();
        assert!(
            waited < Duration::from_secs(5),
            "not reconnected after {waited:?}"
        );
    }
    assert!(
        waited <= Duration::from_millis(1600),
        "reconnected {waited:?} after the heal"
    );
    assert_eq!(run.names(), ["a", "b"]);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn endless_continue_tokens_replaying_the_same_objects_are_caught_at_once() {
    let src = FakeSource::new();
    for i in 0..3 {
        src.upsert(cm(&format!("c{i}")));
    }
    let s = Scripted::new(&src);
    let counter = Arc::new(AtomicUsize::new(0));
    s.rewrite_lists(move |mut l| {
        l.metadata.continue_ = Some(format!("fake-t{}", counter.fetch_add(1, Ordering::SeqCst)));
        l
    });
    // Default page limit (100,000): the repeat check, not the limit, stops the loop.
    let run = start(&s, list_config().page_size(2));
    let n = requests_in_a_minute(&s).await;
    assert!(n <= 3 * STORM_BOUND, "{n} requests in a minute");
    assert!(run.has_error("twice"), "{:?}", run.errors.lock());
    s.heal();
    settle().await;
    assert_eq!(run.names(), ["c0", "c1", "c2"]);
    run.stop().await;
}
