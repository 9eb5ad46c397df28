//! The reflector against a source that misbehaves: every storm-prone fault backs off, every
//! server-controlled delay is capped, protocol errors leave the cache untouched, panics are
//! caught. A [`Scripted`] source wraps [`FakeSource`] and overrides its next answers.

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

use super::*;
use crate::{
    lister_watcher::{self, ListParams, ObjectList, WatchEvent, WatchParams},
    testing::{Call, FakeSource, RecordingStore, StoreOp, status},
};

use crate::testing::config_map as cm;

type ListRewrite = Box<dyn FnMut(ObjectList<ConfigMap>) -> ObjectList<ConfigMap> + Send>;
type WatchAnswer = Box<
    dyn FnMut() -> Result<
            Vec<Result<WatchEvent<ConfigMap>, lister_watcher::Error>>,
            lister_watcher::Error,
        > + Send,
>;

/// A [`FakeSource`] whose answers can be overridden: every list answer rewritten while a
/// rewrite is set, every watch answered by a script while one is set.
#[derive(Clone)]
struct Scripted {
    inner: FakeSource<ConfigMap>,
    list_rewrite: Arc<Mutex<Option<ListRewrite>>>,
    watch_script: Arc<Mutex<Option<WatchAnswer>>>,
    list_calls: Arc<AtomicUsize>,
    watch_calls: Arc<AtomicUsize>,
    panic_lists: Arc<AtomicUsize>,
}

impl Scripted {
    fn new(inner: &FakeSource<ConfigMap>) -> Self {
        Self {
            inner: inner.clone(),
            list_rewrite: Arc::default(),
            watch_script: Arc::default(),
            list_calls: Arc::default(),
            watch_calls: Arc::default(),
            panic_lists: Arc::default(),
        }
    }

    fn rewrite_lists(
        &self,
        f: impl FnMut(ObjectList<ConfigMap>) -> ObjectList<ConfigMap> + Send + 'static,
    ) {
        *self.list_rewrite.lock() = Some(Box::new(f));
    }

    fn script_watches(
        &self,
        f: impl FnMut() -> Result<
            Vec<Result<WatchEvent<ConfigMap>, lister_watcher::Error>>,
            lister_watcher::Error,
        > + Send
        + 'static,
    ) {
        *self.watch_script.lock() = Some(Box::new(f));
    }

    /// The server behaves again.
    fn heal(&self) {
        *self.list_rewrite.lock() = None;
        *self.watch_script.lock() = None;
    }

    fn requests(&self) -> usize {
        self.list_calls.load(Ordering::SeqCst) + self.watch_calls.load(Ordering::SeqCst)
    }
}

impl ListerWatcher<ConfigMap> for Scripted {
    async fn list(
        &self,
        params: &ListParams,
    ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error> {
        self.list_calls.fetch_add(1, Ordering::SeqCst);
        if self
            .panic_lists
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            panic!("the lister-watcher blew up");
        }
        let list = self.inner.list(&for_inner_source(params)).await?;
        Ok(match self.list_rewrite.lock().as_mut() {
            Some(f) => f(list),
            None => list,
        })
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<lister_watcher::WatchStream<ConfigMap>, lister_watcher::Error> {
        self.watch_calls.fetch_add(1, Ordering::SeqCst);
        let scripted = self.watch_script.lock().as_mut().map(|f| f());
        match scripted {
            Some(Ok(items)) => Ok(futures::stream::iter(items).boxed()),
            Some(Err(e)) => Err(e),
            None => self.inner.watch(params, resource_version).await,
        }
    }

    fn describe(&self) -> String {
        "configmaps in namespace ns".into()
    }
}

/// `params` for the inner source of a rewriting test source: a continue token made up by a
/// rewrite (`fake-…`) means nothing to it, so it lists from the start (shared with
/// `recovery_tests` and `pager_tests`).
pub(super) fn for_inner_source(params: &ListParams) -> ListParams {
    let mut params = params.clone();
    if params
        .continue_token
        .as_deref()
        .is_some_and(|t| t.starts_with("fake-"))
    {
        params.continue_token = None;
        params.resource_version = Some(String::new());
    }
    params
}

/// A running reflector over a recording store, with the errors it reported (shared with
/// `recovery_tests`).
pub(super) struct Run {
    pub(super) store: Arc<RecordingStore<ConfigMap>>,
    pub(super) handle: ReflectorHandle,
    pub(super) errors: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

pub(super) fn start<L: ListerWatcher<ConfigMap> + Clone>(src: &L, config: Config) -> Run {
    start_with(src, config, |r| r)
}

fn start_with<L: ListerWatcher<ConfigMap> + Clone>(
    src: &L,
    config: Config,
    customize: impl FnOnce(Reflector<ConfigMap, L>) -> Reflector<ConfigMap, L>,
) -> Run {
    let store = Arc::new(RecordingStore::new());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let errs = Arc::clone(&errors);
    let reflector = customize(
        Reflector::new(src.clone(), store.clone(), config)
            .with_error_handler(Arc::new(move |e: &Error| errs.lock().push(e.to_string()))),
    );
    let handle = reflector.handle();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    Run {
        store,
        handle,
        errors,
        cancel,
        task,
    }
}

impl Run {
    pub(super) async fn stop(self) {
        self.cancel.cancel();
        self.task.await.expect("the reflector task ends cleanly");
    }

    pub(super) fn has_error(&self, needle: &str) -> bool {
        self.errors.lock().iter().any(|e| e.contains(needle))
    }

    /// The names the store holds after the last replace and the events since.
    pub(super) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .store
            .snapshot()
            .into_keys()
            .map(|k| k.name().to_owned())
            .collect();
        names.sort();
        names
    }
}

/// Requests made during one virtual minute of a fault: the storm bound.
async fn requests_in_a_minute(src: &Scripted) -> usize {
    let before = src.requests();
    tokio::time::sleep(Duration::from_secs(60)).await;
    src.requests() - before
}

/// At most this many requests in a virtual minute while a fault lasts: with the server
/// backoff (800 ms doubling to 30 s) a failing reflector makes about 7.
const STORM_BOUND: usize = 15;

fn list_config() -> Config {
    Config::default().initial_list(InitialList::List)
}

async fn settle() {
    tokio::time::sleep(Duration::from_secs(120)).await;
}

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

/// client-go gives a failed streaming list up for the round and lists: the cache syncs from
/// the LIST although no stream ever sends the initial-events-end bookmark.
#[tokio::test(start_paused = true)]
async fn a_streaming_list_that_ends_before_its_bookmark_falls_back_to_a_list() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let rv = src.resource_version();
    s.script_watches(move || {
        let mut a = cm("a");
        a.metadata.resource_version = Some(rv.clone());
        Ok(vec![Ok(WatchEvent::Added(a))])
    });
    let run = start(&s, Config::default().initial_list(InitialList::Stream));
    let n = requests_in_a_minute(&s).await;
    assert!(n <= STORM_BOUND, "{n} requests in a minute");
    assert!(
        run.has_error("before the initial-events-end bookmark"),
        "{:?}",
        run.errors.lock()
    );
    assert!(
        run.store
            .ops()
            .iter()
            .any(|o| matches!(o, StoreOp::Replace(..))),
        "the fallback LIST replaced the store"
    );
    assert!(
        run.handle.health().synced_once,
        "synced by the fallback LIST"
    );
    s.heal();
    settle().await;
    assert_eq!(run.names(), ["a"]);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_silent_watch_is_cut_after_the_idle_timeout_and_rewatched() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let run = start(
        &s,
        list_config().watch_idle_timeout(Duration::from_secs(90)),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let watches = s.watch_calls.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(89)).await;
    assert_eq!(
        s.watch_calls.load(Ordering::SeqCst),
        watches,
        "not cut before 90 s"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        s.watch_calls.load(Ordering::SeqCst),
        watches + 1,
        "cut and re-watched at 90 s"
    );
    assert!(run.has_error("idle for 90s"), "{:?}", run.errors.lock());
    assert_eq!(s.list_calls.load(Ordering::SeqCst), 1, "no relist");
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_list_hits_its_deadline_and_is_retried() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.stall_lists(true);
    let s = Scripted::new(&src);
    let run = start(&s, list_config().list_timeout(Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert!(
        s.list_calls.load(Ordering::SeqCst) >= 2,
        "retried after the deadline"
    );
    assert!(
        run.has_error("list of configmaps in namespace ns not answered within 10s"),
        "{:?}",
        run.errors.lock()
    );
    src.stall_lists(false);
    settle().await;
    assert_eq!(run.names(), ["a"]);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_panic_inside_the_reflector_is_caught_reported_and_recovered_from() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    s.panic_lists.store(2, Ordering::SeqCst);
    let run = start(&s, list_config());
    settle().await;
    assert!(
        run.has_error("panicked: the lister-watcher blew up"),
        "{:?}",
        run.errors.lock()
    );
    assert_eq!(run.handle.metrics().panics, 2);
    assert_eq!(run.names(), ["a"]);
    assert!(!run.task.is_finished());
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_panicking_transform_is_caught_and_the_reflector_restarts() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let fuse = Arc::new(AtomicUsize::new(1));
    let f = Arc::clone(&fuse);
    let run = start_with(&s, list_config(), move |r| {
        r.with_transform(Arc::new(move |o: ConfigMap| {
            if f.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                panic!("transform bug");
            }
            o
        }))
    });
    settle().await;
    assert!(run.has_error("transform bug"), "{:?}", run.errors.lock());
    assert_eq!(run.names(), ["a"]);
    run.stop().await;
}

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
