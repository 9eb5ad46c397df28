//! The reflector's observability counters, histograms and resourceVersion age, with exact
//! values under paused time.

use super::*;
use crate::histogram::{LIST_ITEMS_BUCKETS, REQUEST_DURATION_BUCKETS};

fn too_large() -> lister_watcher::Status {
    serde_json::from_value(serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Timeout: Too large resource version: 99, current: 2", "reason": "Timeout",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1},
        "code": 504
    }))
    .unwrap()
}

async fn wait_metrics(h: &Harness, pred: impl Fn(&Metrics) -> bool) -> Metrics {
    for _ in 0..100_000 {
        let m = h.handle.metrics();
        if pred(&m) {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("metrics never matched: {:?}", h.handle.metrics());
}

#[tokio::test(start_paused = true)]
async fn relists_are_counted_by_cause_and_add_up_to_the_relist_total() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;

    // 410 in the stream: expired.
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    let m = wait_metrics(&h, |m| m.relists == 1).await;
    assert_eq!(
        m.relists_by_cause,
        RelistCauses {
            expired: 1,
            ..RelistCauses::default()
        }
    );

    // A very short watch: a generic error.
    h.wait_watching().await;
    src.drop_watches();
    let m = wait_metrics(&h, |m| m.relists == 2).await;
    assert_eq!(m.relists_by_cause.error, 1, "{m:?}");

    // A very short watch, then the relist at the last RV finds a lagging server: the specific
    // cause wins over the generic one.
    h.wait_watching().await;
    src.fail_lists(1, too_large());
    src.drop_watches();
    let m = wait_metrics(&h, |m| m.relists == 3).await;
    assert_eq!(
        m.relists_by_cause,
        RelistCauses {
            expired: 1,
            too_large: 1,
            selection_changed: 0,
            error: 1,
        }
    );

    // The shard selection changed (a sharded lister-watcher says so in the stream).
    h.wait_watching().await;
    src.inject_watch_item(|| Err(lister_watcher::Error::selection_changed()));
    let m = wait_metrics(&h, |m| m.relists == 4).await;
    assert_eq!(m.relists_by_cause.selection_changed, 1, "{m:?}");
    let c = m.relists_by_cause;
    assert_eq!(
        c.expired + c.too_large + c.selection_changed + c.error,
        m.relists
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_first_failures_before_the_initial_sync_are_not_relists() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.fail_lists(2, status(500, "InternalError", "etcd is down"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let m = h.handle.metrics();
    assert_eq!((m.lists, m.relists), (1, 0));
    assert_eq!(m.relists_by_cause, RelistCauses::default());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_events_are_counted_by_type_and_add_up_to_the_event_total() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    src.upsert(cm("b")); // ADDED
    src.upsert(cm("b")); // MODIFIED
    src.upsert(cm("a")); // MODIFIED
    src.delete(&key("b")); // DELETED
    src.bookmark(); // BOOKMARK
    h.store
        .wait_for(|ops| ops.iter().any(|o| matches!(o, StoreOp::Bookmark(_))))
        .await;
    let m = h.handle.metrics();
    assert_eq!(
        m.watch_events_by_type,
        WatchEventCounts {
            added: 1,
            modified: 2,
            deleted: 1,
            bookmark: 1,
            error: 0,
        }
    );
    assert_eq!(m.watch_events, 5);

    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    let m = wait_metrics(&h, |m| m.relists == 1).await;
    assert_eq!(m.watch_events_by_type.error, 1);
    let t = m.watch_events_by_type;
    assert_eq!(
        m.watch_events,
        t.added + t.modified + t.deleted + t.bookmark + t.error
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_counts_its_added_events_and_end_bookmark() {
    let src = FakeSource::new();
    for n in ["a", "b", "c"] {
        src.upsert(cm(n));
    }
    let h = Harness::start(&src, Config::default().initial_list(InitialList::Stream));
    let m = wait_metrics(&h, |m| m.watch_lists == 1).await;
    assert_eq!(m.watch_events_by_type.added, 3, "{m:?}");
    assert_eq!(
        m.watch_events_by_type.bookmark, 1,
        "the initial-events-end bookmark"
    );
    assert_eq!(h.handle.list_items().count(), 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn every_completed_sync_is_observed_in_the_list_histograms() {
    let src = FakeSource::new();
    for i in 0..3 {
        src.upsert(cm(&format!("c{i}")));
    }
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    for i in 3..60 {
        src.upsert(cm(&format!("c{i}")));
    }
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    wait_metrics(&h, |m| m.relists == 1).await;

    let items = h.handle.list_items();
    assert_eq!(items.bounds, LIST_ITEMS_BUCKETS);
    assert_eq!(items.count(), 2);
    assert_eq!(items.sum, 63.0, "3 objects, then 60");
    let le = |bound: f64| {
        items
            .cumulative()
            .into_iter()
            .find(|(b, _)| *b == bound)
            .map(|(_, n)| n)
    };
    assert_eq!(le(1.0), Some(0));
    assert_eq!(le(10.0), Some(1), "the first list, 3 objects");
    assert_eq!(le(50.0), Some(1));
    assert_eq!(le(100.0), Some(2), "the relist, 60 objects");

    let duration = h.handle.list_duration();
    assert_eq!(duration.bounds, REQUEST_DURATION_BUCKETS);
    assert_eq!(duration.count(), 2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn resource_version_age_grows_until_an_event_bookmark_or_list_advances_it() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    assert_eq!(
        h.handle.since_last_resource_version(),
        None,
        "before the first sync"
    );
    h.wait_watching().await;
    let at_sync = h.handle.since_last_resource_version().expect("synced");
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        h.handle.since_last_resource_version(),
        Some(at_sync + Duration::from_secs(7)),
        "nothing advanced the RV for 7 s"
    );

    src.advance_resource_version();
    src.bookmark();
    h.store
        .wait_for(|ops| ops.iter().any(|o| matches!(o, StoreOp::Bookmark(_))))
        .await;
    assert_eq!(
        h.handle.since_last_resource_version(),
        Some(Duration::ZERO),
        "the bookmark advanced the RV just now"
    );

    tokio::time::sleep(Duration::from_secs(3)).await;
    src.upsert(cm("b"));
    h.store.wait_for(|ops| ops.len() >= 3).await;
    assert_eq!(
        h.handle.since_last_resource_version(),
        Some(Duration::ZERO),
        "the event advanced the RV just now"
    );
    h.stop().await;
}

/// The reflector's counters as they were when the store was first handed a list: whoever
/// sees the cache synced (an informer's `has_synced`, which the store's replace sets) must
/// see that list counted.
async fn counts_at_first_replace(config: Config) -> Metrics {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let handle = Arc::new(std::sync::OnceLock::<ReflectorHandle>::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (h, s) = (handle.clone(), seen.clone());
    let store = Arc::new(RecordingStore::new().with_hook(move |write| {
        if let (crate::testing::Write::Replace, Some(handle)) = (write, h.get()) {
            s.lock().push(handle.metrics());
        }
        Ok(())
    }));
    let reflector = Reflector::new(src.clone(), store.clone(), config);
    handle.set(reflector.handle()).expect("set once");
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    store.wait_for(|ops| !ops.is_empty()).await;
    cancel.cancel();
    task.await.expect("the reflector ends when cancelled");
    let seen = seen.lock();
    *seen.first().expect("one replace")
}

#[tokio::test(start_paused = true)]
async fn a_list_is_counted_before_the_store_is_synced_with_it() {
    let m = counts_at_first_replace(list_config()).await;
    assert_eq!((m.lists, m.watch_lists), (1, 0), "{m:?}");
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_is_counted_before_the_store_is_synced_with_it() {
    let m = counts_at_first_replace(Config::default().initial_list(InitialList::Stream)).await;
    assert_eq!((m.lists, m.watch_lists), (0, 1), "{m:?}");
}
