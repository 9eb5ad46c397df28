//! Reflector semantics, each pinned by a test named after it (DESIGN.md §4 items 1–5), against
//! [`FakeSource`] with paused time.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::*;
use crate::testing::{Call, FakeSource, RecordingStore, StoreOp, status};
use crate::{
    lister_watcher::{self, WatchEvent},
    store::ObjectKey,
};

use crate::testing::config_map as cm;

mod metrics;

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("ns"), name)
}

struct Harness {
    src: FakeSource<ConfigMap>,
    store: Arc<RecordingStore<ConfigMap>>,
    handle: ReflectorHandle,
    errors: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Harness {
    fn start(src: &FakeSource<ConfigMap>, config: Config) -> Self {
        Self::start_with(src, config, |r| r)
    }

    fn start_with(
        src: &FakeSource<ConfigMap>,
        config: Config,
        customize: impl FnOnce(
            Reflector<ConfigMap, FakeSource<ConfigMap>>,
        ) -> Reflector<ConfigMap, FakeSource<ConfigMap>>,
    ) -> Self {
        let store = Arc::new(RecordingStore::new());
        let errors = Arc::new(Mutex::new(Vec::new()));
        let errs = Arc::clone(&errors);
        let reflector = Reflector::new(src.clone(), store.clone(), config)
            .with_error_handler(Arc::new(move |e: &Error| errs.lock().push(e.to_string())));
        let reflector = customize(reflector);
        let handle = reflector.handle();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(reflector.run(cancel.clone()));
        Self {
            src: src.clone(),
            store,
            handle,
            errors,
            cancel,
            task,
        }
    }

    async fn wait_calls(&self, pred: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        for _ in 0..100_000 {
            let calls = self.src.calls();
            if pred(&calls) {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("condition on calls never held: {:?}", self.src.calls());
    }

    async fn wait_watching(&self) {
        for _ in 0..100_000 {
            if self.src.watcher_count() > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the reflector never opened a watch: {:?}", self.src.calls());
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
    }
}

fn lists(calls: &[Call]) -> Vec<&Call> {
    calls
        .iter()
        .filter(|c| matches!(c, Call::List { .. }))
        .collect()
}

fn watches(calls: &[Call]) -> Vec<&Call> {
    calls
        .iter()
        .filter(|c| matches!(c, Call::Watch { .. }))
        .collect()
}

fn list_config() -> Config {
    Config::default().initial_list(InitialList::List)
}

#[tokio::test(start_paused = true)]
async fn first_list_is_at_rv_0_with_page_size_500() {
    let src = FakeSource::new();
    for i in 0..3 {
        src.upsert(cm(&format!("c{i}")));
    }
    let h = Harness::start(&src, list_config());
    h.store
        .wait_for(|ops| ops.iter().any(|o| matches!(o, StoreOp::Replace(3, _))))
        .await;
    let calls = src.calls();
    assert_eq!(
        calls[0],
        Call::List {
            resource_version: Some("0".into()),
            version_match: None,
            limit: Some(500),
            continue_token: None
        }
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn paginated_list_follows_continue_tokens_and_replaces_once() {
    let src = FakeSource::new();
    src.set_paginate_at_rv0(true);
    for i in 0..1200 {
        src.upsert(cm(&format!("c{i:04}")));
    }
    let rv = src.resource_version();
    let h = Harness::start(&src, list_config());
    h.store.wait_for(|ops| !ops.is_empty()).await;
    assert_eq!(h.store.ops()[0], StoreOp::Replace(1200, rv.clone()));
    let calls = lists(&src.calls()).into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(calls.len(), 3, "1200 objects in pages of 500: {calls:?}");
    for c in &calls[1..] {
        match c {
            Call::List {
                resource_version,
                continue_token,
                limit,
                ..
            } => {
                assert!(continue_token.is_some());
                assert_eq!(*limit, Some(500));
                assert_eq!(*resource_version, None, "continue requests carry no RV");
            }
            Call::Watch { .. } => unreachable!(),
        }
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn relist_at_a_specific_rv_is_not_paged() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let synced = h.handle.last_sync_resource_version();
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    let calls = h.wait_calls(|c| lists(c).len() >= 2).await;
    assert_eq!(
        *lists(&calls)[1],
        Call::List {
            resource_version: Some(synced),
            version_match: None,
            limit: None,
            continue_token: None
        }
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_list_retries_at_once_with_empty_rv() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.fail_lists(
        1,
        status(
            410,
            "Expired",
            "The resourceVersion for the provided list is too old.",
        ),
    );
    let h = Harness::start(&src, list_config());
    h.store.wait_for(|ops| !ops.is_empty()).await;
    let calls = src.calls();
    let l = lists(&calls);
    assert!(matches!(l[0], Call::List { resource_version: Some(rv), .. } if rv == "0"));
    assert!(matches!(l[1], Call::List { resource_version: Some(rv), .. } if rv.is_empty()));
    assert!(
        h.errors.lock().is_empty(),
        "the retry is silent: {:?}",
        h.errors.lock()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn too_large_resource_version_list_retries_with_empty_rv() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    h_too_large(&src).await;
}

async fn h_too_large(src: &FakeSource<ConfigMap>) {
    let too_large: lister_watcher::Status = serde_json::from_value(serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Timeout: Too large resource version: 99, current: 2", "reason": "Timeout",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1},
        "code": 504
    }))
    .unwrap();
    src.fail_lists(1, too_large);
    let h = Harness::start(src, list_config());
    h.store.wait_for(|ops| !ops.is_empty()).await;
    let calls = src.calls();
    assert!(
        matches!(lists(&calls)[1], Call::List { resource_version: Some(rv), .. } if rv.is_empty())
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_continue_token_falls_back_to_a_full_list() {
    let src = FakeSource::new();
    src.set_paginate_at_rv0(true);
    for i in 0..700 {
        src.upsert(cm(&format!("c{i:04}")));
    }
    src.compact_after_lists(1);
    let h = Harness::start(&src, list_config());
    h.store.wait_for(|ops| !ops.is_empty()).await;
    assert!(matches!(h.store.ops()[0], StoreOp::Replace(700, _)));
    let calls = src.calls();
    let l = lists(&calls);
    assert_eq!(l.len(), 3, "page 1, expired page 2, full list: {l:?}");
    assert!(matches!(
        l[2],
        Call::List {
            limit: None,
            continue_token: None,
            ..
        }
    ));
    h.stop().await;
}

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

#[tokio::test(start_paused = true)]
async fn transform_runs_once_per_received_object() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.upsert(cm("b"));
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let h = Harness::start_with(&src, Config::default(), |r| {
        r.with_transform(Arc::new(move |mut o: ConfigMap| {
            c.fetch_add(1, Ordering::SeqCst);
            o.metadata.managed_fields = None;
            o.metadata
                .labels
                .get_or_insert_default()
                .insert("transformed".into(), "yes".into());
            o
        }))
    });
    h.store.wait_for(|ops| !ops.is_empty()).await;
    src.upsert(cm("c"));
    h.store.wait_for(|ops| ops.len() >= 2).await;
    assert_eq!(count.load(Ordering::SeqCst), 3);
    assert!(
        h.store
            .objects()
            .iter()
            .all(|o| o.metadata.labels.as_ref().unwrap()["transformed"] == "yes")
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn periodic_resync_asks_should_resync_first() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let asked = Arc::new(AtomicUsize::new(0));
    let a = Arc::clone(&asked);
    let h = Harness::start_with(
        &src,
        list_config().resync_period(Duration::from_secs(30)),
        |r| r.with_should_resync(Arc::new(move || a.fetch_add(1, Ordering::SeqCst) % 2 == 1)),
    );
    h.wait_watching().await;
    tokio::time::sleep(Duration::from_secs(125)).await;
    let resyncs = h
        .store
        .ops()
        .iter()
        .filter(|o| **o == StoreOp::Resync)
        .count();
    let asked = asked.load(Ordering::SeqCst);
    assert_eq!(asked, 4, "asked once per 30 s period");
    assert_eq!(resyncs, 2, "resynced only when should_resync said so");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn object_without_a_name_is_reported_and_the_cache_keeps_its_state() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let before = h.store.snapshot();
    src.inject_watch_item(|| Ok(WatchEvent::Added(ConfigMap::default())));
    src.upsert(cm("b"));
    h.store
        .wait_for(|ops| {
            ops.iter()
                .any(|o| matches!(o, StoreOp::Add(k, _) if *k == key("b")))
        })
        .await;
    assert!(
        h.errors.lock().iter().any(|e| e.contains("no name")),
        "{:?}",
        h.errors.lock()
    );
    let after = h.store.snapshot();
    assert_eq!(after.len(), before.len() + 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn undecodable_event_relists() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    src.inject_watch_item(|| {
        Err(lister_watcher::Error::decode(
            "expected value at line 1 column 1",
        ))
    });
    h.wait_calls(|c| lists(c).len() >= 2).await;
    assert!(
        h.errors.lock().iter().any(|e| e.contains("decode")),
        "{:?}",
        h.errors.lock()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn relist_after_compaction_converges_to_the_source() {
    let src = FakeSource::new();
    for i in 0..10 {
        src.upsert(cm(&format!("c{i}")));
    }
    let h = Harness::start(&src, Config::default());
    h.wait_watching().await;
    // Changes the reflector will miss while it is disconnected, then an expired RV.
    src.drop_watches();
    src.delete(&key("c3"));
    src.upsert(cm("c42"));
    src.compact();
    let calls_before = src.calls().len();
    h.wait_calls(|c| c.len() >= calls_before + 2).await;
    for _ in 0..1000 {
        if h.store.snapshot().len() == src.objects().len()
            && h.store.snapshot().contains_key(&key("c42"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let want: Vec<ObjectKey> = src
        .objects()
        .iter()
        .map(|o| meta_namespace_key(o).unwrap())
        .collect();
    let got: Vec<ObjectKey> = h.store.snapshot().into_keys().collect();
    assert_eq!(got, want);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_the_reflector_promptly() {
    let src = FakeSource::new();
    src.stall_lists(true);
    let h = Harness::start(&src, list_config());
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.cancel.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn relist_reuses_cached_objects_whose_resource_version_did_not_change() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.upsert(cm("b"));
    let store = crate::store::ThreadSafeStore::<ConfigMap>::for_resource();
    let reflector = Reflector::new(src.clone(), Arc::new(store.clone()), list_config())
        .with_known_objects(Arc::new(store.clone()));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    for _ in 0..1000 {
        if store.len() == 2 && src.watcher_count() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let a_before = store.get_by_key("ns/a").unwrap();
    let b_before = store.get_by_key("ns/b").unwrap();
    // b changes while the watch is down, then the history is gone: a relist follows.
    src.drop_watches();
    src.upsert(cm("b"));
    src.compact();
    src.clear_calls();
    for _ in 0..1000 {
        if lists(&src.calls()).len() == 1
            && store.get_by_key("ns/b").map(|b| rv(&b))
                == Some(
                    src.resource_version()
                        .parse::<u64>()
                        .map(|r| (r - 1).to_string())
                        .unwrap(),
                )
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        lists(&src.calls()).len(),
        1,
        "a relist happened: {:?}",
        src.calls()
    );
    let a_after = store.get_by_key("ns/a").unwrap();
    let b_after = store.get_by_key("ns/b").unwrap();
    assert!(
        Arc::ptr_eq(&a_before, &a_after),
        "unchanged a: the cached Arc is reused"
    );
    assert!(
        !Arc::ptr_eq(&b_before, &b_after),
        "changed b: the new object is stored"
    );
    assert_ne!(rv(&b_before), rv(&b_after));
    cancel.cancel();
    task.await.unwrap();
}

fn rv(o: &ConfigMap) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}
