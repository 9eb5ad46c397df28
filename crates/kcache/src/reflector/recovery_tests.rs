//! Recovery cases fixed 2026-12-03, each a test that failed before its fix: a failed streaming list
//! falls back to LIST, a watch `ERROR` 500 relists, a failing resync does not spin, a too
//! large resourceVersion converges, endless short pages are paced, an absurd `Retry-After`
//! is ignored.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

use super::hardening_tests::{Run, for_inner_source, start};
use super::*;
use crate::{
    lister_watcher::{self, ListParams, ObjectList, WatchEvent, WatchParams},
    testing::{FakeSource, RecordingStore, StoreOp, Write, config_map as cm, status},
};

type WatchOverride = Box<
    dyn FnMut(&WatchParams) -> Option<Result<WatchStream<ConfigMap>, lister_watcher::Error>> + Send,
>;
type ListOverride = Box<
    dyn FnMut(
            &ListParams,
            ObjectList<ConfigMap>,
        ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error>
        + Send,
>;

/// A [`FakeSource`] whose watches and lists can be overridden per request.
#[derive(Clone)]
struct Faulty {
    inner: FakeSource<ConfigMap>,
    watch: Arc<Mutex<Option<WatchOverride>>>,
    list: Arc<Mutex<Option<ListOverride>>>,
    lists: Arc<Mutex<Vec<ListParams>>>,
    watches: Arc<Mutex<Vec<(bool, String)>>>,
}

impl Faulty {
    fn new(inner: &FakeSource<ConfigMap>) -> Self {
        Self {
            inner: inner.clone(),
            watch: Arc::default(),
            list: Arc::default(),
            lists: Arc::default(),
            watches: Arc::default(),
        }
    }

    /// Answers a watch with `f`'s stream or error when it returns one.
    fn on_watch(
        &self,
        f: impl FnMut(&WatchParams) -> Option<Result<WatchStream<ConfigMap>, lister_watcher::Error>>
        + Send
        + 'static,
    ) {
        *self.watch.lock() = Some(Box::new(f));
    }

    /// Rewrites every list answer.
    fn on_list(
        &self,
        f: impl FnMut(
            &ListParams,
            ObjectList<ConfigMap>,
        ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error>
        + Send
        + 'static,
    ) {
        *self.list.lock() = Some(Box::new(f));
    }

    fn lists(&self) -> Vec<ListParams> {
        self.lists.lock().clone()
    }

    /// `(send_initial_events, resource_version)` of every watch request.
    fn watches(&self) -> Vec<(bool, String)> {
        self.watches.lock().clone()
    }
}

impl ListerWatcher<ConfigMap> for Faulty {
    async fn list(
        &self,
        params: &ListParams,
    ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error> {
        self.lists.lock().push(params.clone());
        let list = self.inner.list(&for_inner_source(params)).await?;
        match self.list.lock().as_mut() {
            Some(f) => f(params, list),
            None => Ok(list),
        }
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<ConfigMap>, lister_watcher::Error> {
        self.watches
            .lock()
            .push((params.send_initial_events, resource_version.to_owned()));
        let answer = self.watch.lock().as_mut().and_then(|f| f(params));
        match answer {
            Some(answer) => answer,
            None => self.inner.watch(params, resource_version).await,
        }
    }

    fn describe(&self) -> String {
        "configmaps in namespace ns".into()
    }
}

/// A store that records like [`RecordingStore`] and fails its `fail_at`-th resync; the
/// resyncs asked for are counted in `resyncs`.
fn failing_resync(fail_at: usize, resyncs: Arc<AtomicUsize>) -> RecordingStore<ConfigMap> {
    RecordingStore::new().with_hook(move |write| {
        if write == Write::Resync && resyncs.fetch_add(1, Ordering::SeqCst) + 1 == fail_at {
            return Err(StoreError::Key(crate::store::KeyError::MissingName));
        }
        Ok(())
    })
}

/// How many times the store was replaced.
fn replaces(run: &Run) -> usize {
    run.store
        .ops()
        .iter()
        .filter(|o| matches!(o, StoreOp::Replace(..)))
        .count()
}

/// Lets virtual time run for `d`.
async fn run_for(d: Duration) {
    tokio::time::sleep(d).await;
}

/// Overrides only streaming-list watches (`sendInitialEvents=true`).
fn streaming_only(
    mut f: impl FnMut() -> Result<WatchStream<ConfigMap>, lister_watcher::Error> + Send + 'static,
) -> impl FnMut(&WatchParams) -> Option<Result<WatchStream<ConfigMap>, lister_watcher::Error>>
+ Send
+ 'static {
    move |p: &WatchParams| p.send_initial_events.then(&mut f)
}

fn api(code: u16, reason: &str, message: &str) -> lister_watcher::Error {
    lister_watcher::Error::api(status(code, reason, message), None)
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_refused_with_500_falls_back_to_a_list_and_streams_again_next_round() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let f = Faulty::new(&src);
    f.on_watch(streaming_only(|| {
        Err(api(500, "InternalError", "the stream broke"))
    }));
    let run = start(&f, Config::default().initial_list(InitialList::Stream));
    run_for(Duration::from_secs(2)).await;
    assert_eq!(run.names(), ["a"], "synced by the fallback LIST");
    assert!(run.handle.health().synced_once);
    assert_eq!(f.lists().len(), 1, "one fallback LIST: {:?}", f.lists());
    let streams = f.watches().iter().filter(|w| w.0).count();
    assert_eq!(streams, 1, "the stream is tried once in this round");
    // The next round (a relist) tries the stream again first.
    src.compact();
    src.drop_watches();
    run_for(Duration::from_secs(5)).await;
    let streams = f.watches().iter().filter(|w| w.0).count();
    assert!(
        streams >= 2,
        "streamed again on the next round: {:?}",
        f.watches()
    );
    run.stop().await;
}

/// A stream that keeps sending events but never the end bookmark: past the list deadline the
/// round falls back to a LIST (client-go waits for the bookmark until the watch times out,
/// then streams again: it never syncs).
#[tokio::test(start_paused = true)]
async fn a_busy_stream_that_never_ends_its_initial_list_falls_back_at_the_list_deadline() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let rv = src.resource_version();
    let f = Faulty::new(&src);
    f.on_watch(streaming_only(move || {
        let mut a = cm("a");
        a.metadata.resource_version = Some(rv.clone());
        let ticks = futures::stream::unfold(0u32, |i| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut b = cm("b");
            b.metadata.resource_version = Some(format!("{}", 100 + i));
            Some((Ok(WatchEvent::Added(b)), i + 1))
        });
        Ok(futures::stream::iter([Ok(WatchEvent::Added(a))])
            .chain(ticks)
            .boxed())
    }));
    let config = Config::default()
        .initial_list(InitialList::Stream)
        .list_timeout(Duration::from_secs(20));
    let run = start(&f, config);
    run_for(Duration::from_secs(25)).await;
    assert!(
        run.handle.health().synced_once,
        "synced by the fallback LIST"
    );
    assert_eq!(run.names(), ["a"]);
    assert!(
        run.errors
            .lock()
            .iter()
            .any(|e| e.contains("streaming list")),
        "{:?}",
        run.errors.lock()
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_without_the_end_bookmark_falls_back_to_a_list() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let rv = src.resource_version();
    let f = Faulty::new(&src);
    // A server that sends the initial ADDED events and then nothing: no bookmark, no close.
    f.on_watch(streaming_only(move || {
        let mut a = cm("a");
        a.metadata.resource_version = Some(rv.clone());
        Ok(futures::stream::iter([Ok(WatchEvent::Added(a))])
            .chain(futures::stream::pending())
            .boxed())
    }));
    let config = Config::default().watch_idle_timeout(Duration::from_secs(30));
    let run = start(&f, config);
    run_for(Duration::from_secs(40)).await;
    assert_eq!(run.names(), ["a"]);
    assert!(
        run.handle.health().synced_once,
        "synced by the fallback LIST"
    );
    assert_eq!(f.lists().len(), 1, "{:?}", f.lists());
    run.stop().await;
}

/// client-go's `TestReflectorReplacesStoreOnUnsafeDelete`, at the reflector's edge: an `ERROR`
/// event with a 500 `StorageReadError` ends the watch and relists, and the relist's replace
/// removes the object that was deleted without a watch event.
#[tokio::test(start_paused = true)]
async fn a_watch_error_event_500_relists_and_drops_what_the_server_no_longer_has() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.upsert(cm("corrupt"));
    let f = Faulty::new(&src);
    let run = start(&f, Config::default().initial_list(InitialList::List));
    run_for(Duration::from_secs(2)).await;
    assert_eq!(run.names(), ["a", "corrupt"]);
    assert_eq!(f.lists().len(), 1);
    // The corrupt object is unsafe-deleted: gone from storage without a DELETED event.
    let replaced = Arc::new(AtomicUsize::new(0));
    {
        let replaced = Arc::clone(&replaced);
        f.on_list(move |_, mut l| {
            replaced.fetch_add(1, Ordering::SeqCst);
            l.items
                .retain(|o| o.metadata.name.as_deref() != Some("corrupt"));
            Ok(l)
        });
    }
    src.inject_watch_error(status(
        500,
        "StorageReadError",
        "failed to prepare current and previous objects: corrupt object has been deleted",
    ));
    run_for(Duration::from_secs(5)).await;
    assert!(
        replaced.load(Ordering::SeqCst) >= 1,
        "relisted after the ERROR event"
    );
    assert_eq!(
        run.names(),
        ["a"],
        "the relist's replace dropped the deleted object"
    );
    assert_eq!(replaces(&run), 2);
    run.stop().await;
}

/// client-go's `TestReflectorResync`: the second resync fails; the watch phase ends there.
/// Before the fix the failing resync was retried every period during the relist backoff.
#[tokio::test(start_paused = true)]
async fn a_failing_resync_ends_the_watch_and_does_not_spin_during_the_backoff() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let f = Faulty::new(&src);
    let resyncs = Arc::new(AtomicUsize::new(0));
    let store = Arc::new(failing_resync(2, resyncs.clone()));
    let config = Config::default()
        .initial_list(InitialList::List)
        .resync_period(Duration::from_millis(1));
    let reflector = Reflector::new(f.clone(), store.clone(), config);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    // Until the relist that follows the failure: its backoff is at least 800 ms.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while f.lists().len() < 2 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    assert_eq!(f.lists().len(), 2, "relisted after the failed resync");
    assert_eq!(
        resyncs.load(Ordering::SeqCst),
        2,
        "exactly 2 resyncs: the failed one ended the watch phase, none ran while the relist waited"
    );
    cancel.cancel();
    task.await.unwrap();
}

/// A list that reports a resourceVersion the server has not reached (a lying or lagging
/// server): the watch at it answers "Too large resource version"; client-go ends the round,
/// lists at that RV, is told the same, forgets it and lists at RV "" (a consistent read).
/// Before the fix the watch was re-opened at the same RV forever.
#[tokio::test(start_paused = true)]
async fn a_watch_at_a_too_large_resource_version_relists_and_converges() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let f = Faulty::new(&src);
    let lied = Arc::new(AtomicUsize::new(0));
    {
        let lied = Arc::clone(&lied);
        f.on_list(move |_, mut l| {
            if lied.fetch_add(1, Ordering::SeqCst) == 0 {
                l.metadata.resource_version = Some("1000000".into());
            }
            Ok(l)
        });
    }
    let run = start(&f, Config::default().initial_list(InitialList::List));
    run_for(Duration::from_secs(10)).await;
    let rvs: Vec<String> = f
        .lists()
        .iter()
        .map(|p| p.resource_version.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        rvs,
        ["0", "1000000", ""],
        "the first list, the relist at the too-large RV, then RV \"\""
    );
    let last_watch = f.watches().last().cloned().unwrap();
    assert_eq!(
        last_watch.1,
        src.resource_version(),
        "watching from the real RV"
    );
    src.upsert(cm("b"));
    run_for(Duration::from_secs(1)).await;
    assert_eq!(run.names(), ["a", "b"], "converged: live events arrive");
    run.stop().await;
}

/// A server that pages forever with short pages of new objects: pages past the first are
/// paced to at most 4 requests a second. Before the fix: ~1,400 requests a second.
#[tokio::test(start_paused = true)]
async fn endless_short_pages_are_paced() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let f = Faulty::new(&src);
    let n = Arc::new(AtomicUsize::new(0));
    {
        let n = Arc::clone(&n);
        f.on_list(move |_, mut l| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            for item in &mut l.items {
                item.metadata.name = Some(format!("p{i}"));
            }
            l.metadata.continue_ = Some(format!("fake-t{i}"));
            Ok(l)
        });
    }
    let run = start(
        &f,
        Config::default()
            .initial_list(InitialList::List)
            .page_size(10),
    );
    run_for(Duration::from_secs(60)).await;
    let requests = f.lists().len();
    assert!(
        requests <= 4 * 60 + 1,
        "{requests} list requests in a minute (at most 4 a second)"
    );
    assert!(requests >= 100, "the list goes on, paced: {requests}");
    run.stop().await;
}

/// Full pages are never paced: a real server fills its pages.
#[tokio::test(start_paused = true)]
async fn full_pages_are_not_paced() {
    let src = FakeSource::new();
    for i in 0..50 {
        src.upsert(cm(&format!("cm-{i:02}")));
    }
    src.set_paginate_at_rv0(true);
    let f = Faulty::new(&src);
    let run = start(
        &f,
        Config::default()
            .initial_list(InitialList::List)
            .page_size(2),
    );
    let started = tokio::time::Instant::now();
    let deadline = started + Duration::from_secs(60);
    while !run.handle.health().synced_once && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(run.handle.health().synced_once);
    assert_eq!(f.lists().len(), 25, "25 full pages of 2");
    assert!(
        started.elapsed() < SHORT_PAGE_WAIT,
        "no page waited: {:?}",
        started.elapsed()
    );
    assert_eq!(run.names().len(), 50);
    run.stop().await;
}

const SHORT_PAGE_WAIT: Duration = Duration::from_millis(250);

/// A `Retry-After` of 10^9 s on a 429 is malformed: the reflector waits its own backoff
/// (800 ms, then 1.6 s…), not the 30 s cap.
#[tokio::test(start_paused = true)]
async fn an_absurd_retry_after_is_ignored_for_the_normal_backoff() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let f = Faulty::new(&src);
    let failed = Arc::new(AtomicUsize::new(0));
    {
        let failed = Arc::clone(&failed);
        f.on_list(move |_, l| {
            if failed.fetch_add(1, Ordering::SeqCst) == 0 {
                let s: kube_core::Status = serde_json::from_value(serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "slow down", "reason": "TooManyRequests", "code": 429,
                    "details": {"retryAfterSeconds": 1_000_000_000},
                }))
                .unwrap();
                return Err(lister_watcher::Error::api(s, None));
            }
            Ok(l)
        });
    }
    let run = start(&f, Config::default().initial_list(InitialList::List));
    run_for(Duration::from_secs(3)).await;
    assert_eq!(f.lists().len(), 2, "retried after the normal backoff");
    assert_eq!(run.names(), ["a"]);
    assert!(!run.errors.lock().is_empty(), "the 429 was reported");
    run.stop().await;
}

/// After a flapping phase (watches that close at once, each a step of the server backoff) the
/// server heals: a watch delivers events for a few seconds, then a 410 `ERROR` event ends it.
/// The relist waits the backoff's first step (800 ms), as client-go's does, not the step the
/// flapping reached. Before the fix: 12.8 s.
#[tokio::test(start_paused = true)]
async fn a_healthy_watch_resets_the_backoff_so_a_relist_after_flapping_is_quick() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let f = Faulty::new(&src);
    let flaps = Arc::new(AtomicUsize::new(0));
    {
        let flaps = Arc::clone(&flaps);
        // Four watches that close at once without an event: very short, each relists after
        // the server backoff (0.8, 1.6, 3.2, 6.4 s without jitter).
        f.on_watch(move |_| {
            (flaps.fetch_add(1, Ordering::SeqCst) < 4).then(|| Ok(futures::stream::empty().boxed()))
        });
    }
    let config = Config::default()
        .initial_list(InitialList::List)
        .backoff(BackoffConfig::default().jitter(0.0));
    let run = start(&f, config);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while f.watches().len() < 5 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        f.watches().len(),
        5,
        "four flapping watches, then a healthy one"
    );
    assert_eq!(f.lists().len(), 5, "each very short watch relisted");
    // Healed: the watch delivers events for 3 s.
    for name in ["b", "c", "d"] {
        run_for(Duration::from_secs(1)).await;
        src.upsert(cm(name));
    }
    run_for(Duration::from_millis(100)).await;
    assert_eq!(run.names(), ["a", "b", "c", "d"]);
    src.inject_watch_error(status(410, "Expired", "too old resource version"));
    let expired_at = tokio::time::Instant::now();
    while f.lists().len() < 6 && expired_at.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(f.lists().len(), 6, "relisted after the 410");
    let waited = expired_at.elapsed();
    assert!(
        waited <= Duration::from_millis(850),
        "the relist waited {waited:?}: the healthy watch did not reset the backoff"
    );
    run.stop().await;
}
