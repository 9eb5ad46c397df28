//! Resync, paginated lists and expired resourceVersions (`reflector_test.go`'s resync, page-size
//! and
//! full-list tests).

use super::*;

/// A store whose second resync fails (client-go's `FakeCustomStore` with a `ResyncFunc`).
struct FailingResyncStore {
    inner: RecordingStore<Pod>,
    iteration: AtomicUsize,
}

impl ReflectorStore<Pod> for FailingResyncStore {
    fn add(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.add(obj)
    }
    fn update(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.update(obj)
    }
    fn delete(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.delete(obj)
    }
    fn replace(&self, list: Vec<Arc<Pod>>, resource_version: String) -> Result<(), StoreError> {
        self.inner.replace(list, resource_version)
    }
    fn resync(&self) -> Result<(), StoreError> {
        if self.iteration.fetch_add(1, Ordering::SeqCst) + 1 == 2 {
            return Err(StoreError::Key(KeyError::Custom(
                "expected resync reached".into(),
            )));
        }
        Ok(())
    }
}

/// TestReflectorResync: resyncing every 1 ms, the second resync fails and ends the round
/// after exactly 2 resyncs. The round's end in kcache: the watch is stopped, and the
/// reflector lists again; no resync runs in between.
#[tokio::test(start_paused = true)]
async fn reflector_resync() {
    let cancel = CancellationToken::new();
    let store = Arc::new(FailingResyncStore {
        inner: RecordingStore::new(),
        iteration: AtomicUsize::new(0),
    });
    let at_watch_end: Arc<Mutex<Option<usize>>> = Arc::default();
    let at_relist: Arc<Mutex<Option<usize>>> = Arc::default();
    let (s1, s2) = (store.clone(), store.clone());
    let (end, relist) = (at_watch_end.clone(), at_relist.clone());
    let mut lists = 0;
    let mut watches = 0;
    let lw = Lw::new(
        move |_| {
            lists += 1;
            if lists == 2 {
                *relist.lock() = Some(s1.iteration.load(Ordering::SeqCst));
            }
            Ok(pod_list("0", vec![]))
        },
        move |_| {
            watches += 1;
            if watches > 1 {
                return Ok(pending());
            }
            let (s, end) = (s2.clone(), end.clone());
            Ok(probe_with_drop(pending(), move || {
                *end.lock() = Some(s.iteration.load(Ordering::SeqCst));
            }))
        },
    );
    let config = list_mode().resync_period(Duration::from_millis(1));
    let run = start(lw.clone(), store.clone(), config, &cancel, never);
    let errors = run.errors.clone();
    eventually("the round to end and a relist to come", || {
        lw.lists().len() >= 2
    })
    .await;
    run.stop().await;
    assert_eq!(
        *at_watch_end.lock(),
        Some(2),
        "exactly 2 resyncs when the round ended"
    );
    assert_eq!(
        *at_relist.lock(),
        Some(2),
        "no resync between the end of the round and the relist"
    );
    assert!(
        errors
            .lock()
            .iter()
            .any(|e| e.text.contains("expected resync reached")),
        "{:?}",
        errors.lock()
    );
}

/// Ten pods, `pod-0` … `pod-9`, at resourceVersions 0 … 9.
fn ten_pods() -> Vec<Pod> {
    (0..10)
        .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
        .collect()
}

/// A list answer in three pages, continued by `C1` and `C2`, at RV 10.
fn three_pages(opts: &Opts) -> Result<ObjectList<Pod>, LwError> {
    let pods = ten_pods();
    match opts.continue_token.as_str() {
        "" => Ok(page("10", "C1", pods[0..4].to_vec())),
        "C1" => Ok(page("10", "C2", pods[4..8].to_vec())),
        "C2" => Ok(page("10", "", pods[8..10].to_vec())),
        other => Err(plain_error(&format!("unrecognized continue: {other}"))),
    }
}

fn rv_continue_limit(lists: &[Opts]) -> Vec<(String, String, u32)> {
    lists
        .iter()
        .map(|o| {
            (
                o.resource_version.clone(),
                o.continue_token.clone(),
                o.limit,
            )
        })
        .collect()
}

fn rcl(rv: &str, cont: &str, limit: u32) -> (String, String, u32) {
    (rv.into(), cont.into(), limit)
}

fn replaces(store: &RecordingStore<Pod>) -> Vec<StoreOp> {
    store
        .ops()
        .into_iter()
        .filter(|o| matches!(o, StoreOp::Replace(..)))
        .collect()
}

/// TestReflectorWatchListPageSize: with a page size of 4, a list at a specific RV (10) is
/// paginated by 4 too. client-go sets the last synced RV to 10 before its one round; kcache
/// cannot, so a first list (at RV 0, also by 4) brings it to 10 and the relist is the one
/// under test.
#[tokio::test(start_paused = true)]
async fn reflector_watch_list_page_size() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let v = violations.clone();
    let lw = Lw::new(
        move |opts| {
            if opts.limit != 4 {
                v.lock()
                    .push(format!("expected list limit of 4 but got {}", opts.limit));
            }
            three_pages(opts)
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let config = list_mode().page_size(4);
    let run = start(lw.clone(), store.clone(), config, &cancel, never);
    run.finished().await;
    assert!(violations.lock().is_empty(), "{:?}", violations.lock());
    assert_eq!(
        rv_continue_limit(&lw.lists()),
        [
            rcl("0", "", 4),
            rcl("", "C1", 4),
            rcl("", "C2", 4),
            rcl("10", "", 4),
            rcl("", "C1", 4),
            rcl("", "C2", 4),
        ]
    );
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(10, "10".into()),
            StoreOp::Replace(10, "10".into())
        ]
    );
}

/// TestReflectorNotPaginatingNotConsistentReads: without a page size, a list at a specific
/// RV (10) is not paginated (so that the watch cache serves it). As above, a first list at
/// RV 0 brings the reflector to RV 10.
#[tokio::test(start_paused = true)]
async fn reflector_not_paginating_not_consistent_reads() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let lw = Lw::new(
        |_| Ok(pod_list("10", ten_pods())),
        watch_closing_then_cancel(1, &cancel),
    );
    let run = start(lw.clone(), store.clone(), list_mode(), &cancel, never);
    run.finished().await;
    let lists = rv_continue_limit(&lw.lists());
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert_eq!(lists[1], rcl("10", "", 0), "the list at RV 10 has no limit");
    assert_eq!(
        replaces(&store).last(),
        Some(&StoreOp::Replace(10, "10".into()))
    );
}

/// TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled: the first list (RV 0) came
/// back paginated, so the server pages (no watch cache): later lists page by 500 too.
#[tokio::test(start_paused = true)]
async fn reflector_paginating_non_consistent_reads_if_watch_cache_disabled() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let v = violations.clone();
    let lw = Lw::new(
        move |opts| {
            if opts.limit != 500 {
                v.lock()
                    .push(format!("expected list limit of 500 but got {}", opts.limit));
            }
            three_pages(opts)
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let run = start(lw.clone(), store.clone(), list_mode(), &cancel, never);
    run.finished().await;
    assert!(violations.lock().is_empty(), "{:?}", violations.lock());
    assert_eq!(
        rv_continue_limit(&lw.lists()),
        [
            rcl("0", "", 500),
            rcl("", "C1", 500),
            rcl("", "C2", 500),
            rcl("10", "", 500),
            rcl("", "C1", 500),
            rcl("", "C2", 500),
        ]
    );
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(10, "10".into()),
            StoreOp::Replace(10, "10".into())
        ]
    );
}

/// Eight pods, `pod-0` … `pod-7`.
fn eight_pods() -> Vec<Pod> {
    ten_pods().into_iter().take(8).collect()
}

fn list_rvs(lw: &Lw) -> Vec<String> {
    lw.lists().into_iter().map(|o| o.resource_version).collect()
}

/// TestReflectorResyncWithResourceVersion: the relist asks for the last synced RV, so that
/// a lagging server cannot take the reflector back in time.
#[tokio::test(start_paused = true)]
async fn reflector_resync_with_resource_version() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let lw = Lw::new(
        |opts| match opts.resource_version.as_str() {
            "0" => Ok(pod_list("10", eight_pods()[0..4].to_vec())),
            "10" => Ok(pod_list("11", eight_pods())),
            other => Err(plain_error(&format!(
                "unrecognized resourceVersion: {other}"
            ))),
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let run = start(lw.clone(), store.clone(), list_mode(), &cancel, never);
    run.finished().await;
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(4, "10".into()),
            StoreOp::Replace(8, "11".into())
        ]
    );
    assert_eq!(list_rvs(&lw), ["0", "10"]);
}

/// TestReflectorExpiredExactResourceVersion: a relist at an expired RV is retried at once at
/// RV "" (a consistent read).
#[tokio::test(start_paused = true)]
async fn reflector_expired_exact_resource_version() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let lw = Lw::new(
        |opts| match opts.resource_version.as_str() {
            "0" => Ok(pod_list("10", eight_pods()[0..4].to_vec())),
            "10" => Err(api_error(expired(
                "The resourceVersion for the provided watch is too old.",
            ))),
            "" => Ok(pod_list("11", eight_pods())),
            other => Err(plain_error(&format!(
                "unrecognized resourceVersion: {other}"
            ))),
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let run = start(lw.clone(), store.clone(), list_mode(), &cancel, never);
    run.finished().await;
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(4, "10".into()),
            StoreOp::Replace(8, "11".into())
        ]
    );
    assert_eq!(list_rvs(&lw), ["0", "10", ""]);
}

/// TestReflectorFullListIfExpired: with a page size of 4, the second page of the relist
/// expires; the pager falls back to one unpaginated list at the same RV.
#[tokio::test(start_paused = true)]
async fn reflector_full_list_if_expired() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let unexpected: Arc<Mutex<Vec<Opts>>> = Arc::default();
    let u = unexpected.clone();
    let lw = Lw::new(
        move |opts| {
            let pods = eight_pods();
            match (
                opts.resource_version.as_str(),
                opts.continue_token.as_str(),
                opts.limit,
            ) {
                // The initial, limited list.
                ("0", "", 4) => Ok(pod_list("10", pods[0..4].to_vec())),
                // The first page of the list at RV 10.
                ("10", "", 4) => Ok(page("11", "C1", pods[0..4].to_vec())),
                // Its second page.
                ("", "C1", 4) => Err(api_error(expired(
                    "The resourceVersion for the provided watch is too old.",
                ))),
                // The unlimited list at RV 10.
                ("10", "", 0) => Ok(pod_list("11", pods)),
                _ => {
                    u.lock().push(opts.clone());
                    Err(plain_error(&format!("unexpected list options: {opts:?}")))
                }
            }
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let config = list_mode().page_size(4);
    let run = start(lw.clone(), store.clone(), config, &cancel, never);
    run.finished().await;
    assert!(unexpected.lock().is_empty(), "{:?}", unexpected.lock());
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(4, "10".into()),
            StoreOp::Replace(8, "11".into())
        ]
    );
    assert_eq!(list_rvs(&lw), ["0", "10", "", "10"]);
}

/// TestReflectorFullListIfTooLarge: a relist at an RV the server has not reached yet, in
/// each of the three ways servers have said so, is retried at once at RV "".
#[tokio::test(start_paused = true)]
async fn reflector_full_list_if_too_large() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let mut version = 30;
    let lw = Lw::new(
        move |opts| {
            let resource_version = version.to_string();
            match opts.resource_version.as_str() {
                // The initial list.
                "0" => Ok(pod_list("20", vec![])),
                // A relist after it, the cause in `details.causes[].reason`.
                "20" => Err(api_error(timeout_status(
                    "too large resource version",
                    serde_json::json!([{"reason": "ResourceVersionTooLarge"}]),
                ))),
                // Servers 1.17.0 – 1.18.5: in a cause's message.
                "30" => Err(api_error(timeout_status(
                    "too large resource version",
                    serde_json::json!([{"message": "Too large resource version"}]),
                ))),
                // Servers before 1.17.0: in the status message.
                "40" => Err(api_error(timeout_status(
                    "Too large resource version",
                    serde_json::Value::Null,
                ))),
                // The list from etcd after the error.
                "" => {
                    version += 10;
                    Ok(pod_list(&resource_version, vec![]))
                }
                other => Err(plain_error(&format!("unexpected List call: {other}"))),
            }
        },
        watch_closing_then_cancel(3, &cancel),
    );
    let run = start(lw.clone(), store, list_mode(), &cancel, never);
    run.finished().await;
    assert_eq!(list_rvs(&lw), ["0", "20", "", "30", "", "40", ""]);
}
