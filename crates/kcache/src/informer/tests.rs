//! Informer semantics (DESIGN.md §4 items 10–14), each pinned by a named test against
//! [`FakeSource`] with paused time.

use crate::test_support::eventually;
use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::{
    fifo::QueueKind,
    reflector,
    store::{ObjectKey, meta_namespace_key},
    testing::FakeSource,
};

use crate::testing::config_map as cm;

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("ns"), name)
}

fn rv(o: &ConfigMap) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}

/// Records every notification as a line, and rebuilds the state from them.
#[derive(Default)]
struct Recorder {
    log: Mutex<Vec<String>>,
    state: Mutex<BTreeMap<ObjectKey, String>>,
}

impl EventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: &Arc<ConfigMap>, initial: bool) {
        let k = meta_namespace_key(&**obj).unwrap();
        self.log
            .lock()
            .push(format!("add {k} {} {initial}", rv(obj)));
        self.state.lock().insert(k, rv(obj));
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let k = meta_namespace_key(&**new).unwrap();
        self.log
            .lock()
            .push(format!("update {k} {}->{}", rv(old), rv(new)));
        self.state.lock().insert(k, rv(new));
    }
    fn on_delete(&self, obj: &DeletedObject<ConfigMap>) {
        let k = meta_namespace_key(&**obj.object()).unwrap();
        let tomb = if obj.is_final_state_unknown() {
            " tombstone"
        } else {
            ""
        };
        self.log.lock().push(format!("delete {k}{tomb}"));
        self.state.lock().remove(&k);
    }
}

fn source_state(src: &FakeSource<ConfigMap>) -> BTreeMap<ObjectKey, String> {
    src.objects()
        .iter()
        .map(|o| (meta_namespace_key(o).unwrap(), rv(o)))
        .collect()
}

fn cache_state(i: &SharedIndexInformer<ConfigMap>) -> BTreeMap<ObjectKey, String> {
    i.indexer()
        .list()
        .iter()
        .map(|o| (meta_namespace_key(&**o).unwrap(), rv(o)))
        .collect()
}

struct Running {
    informer: SharedIndexInformer<ConfigMap>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(informer: &SharedIndexInformer<ConfigMap>) -> Self {
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let i = informer.clone();
            let c = cancel.clone();
            async move { i.run(c).await }
        });
        Self {
            informer: informer.clone(),
            cancel,
            task,
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
        assert!(self.informer.is_stopped());
    }
}

fn config() -> Config {
    Config::default()
}

#[tokio::test(start_paused = true)]
async fn initial_list_is_delivered_as_adds_in_initial_list_and_registration_syncs() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.upsert(cm("b"));
    let informer = SharedIndexInformer::new(src.clone(), config());
    let rec = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(Arc::clone(&rec)).unwrap();
    assert!(!reg.has_synced());
    let run = Running::start(&informer);
    assert!(reg.synced().await);
    assert!(informer.has_synced());
    let log = rec.log.lock().clone();
    assert_eq!(log.len(), 2);
    assert!(
        log.iter()
            .all(|l| l.starts_with("add ") && l.ends_with(" true")),
        "{log:?}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn indexer_is_updated_before_handlers_are_notified() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let seen_in_cache = Arc::new(AtomicUsize::new(0));
    let (s, i) = (Arc::clone(&seen_in_cache), informer.clone());
    informer
        .add_event_handler(HandlerFns::new().on_add(move |o: &Arc<ConfigMap>, _| {
            let cached = i
                .indexer()
                .get_by_key(meta_namespace_key(&**o).unwrap().as_str());
            if cached.is_some() {
                s.fetch_add(1, Ordering::SeqCst);
            }
        }))
        .unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    for n in ["a", "b", "c"] {
        src.upsert(cm(n));
    }
    eventually(|| seen_in_cache.load(Ordering::SeqCst) == 3).await;
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn update_of_a_cached_key_is_on_update_and_delete_carries_the_final_state() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let rec = Arc::new(Recorder::default());
    informer.add_event_handler(Arc::clone(&rec)).unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let r1 = src.upsert(cm("a"));
    let r2 = src.upsert(cm("a"));
    src.delete(&key("a"));
    eventually(|| rec.log.lock().len() == 3).await;
    assert_eq!(
        *rec.log.lock(),
        [
            format!("add ns/a {r1} false"),
            format!("update ns/a {r1}->{r2}"),
            "delete ns/a".to_owned()
        ]
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn object_missed_during_a_relist_is_deleted_with_a_tombstone() {
    for queue in [
        QueueKind::RealFifo,
        QueueKind::RealFifoNonAtomic,
        QueueKind::DeltaFifo,
    ] {
        let src = FakeSource::new();
        src.upsert(cm("a"));
        src.upsert(cm("b"));
        let informer = SharedIndexInformer::new(src.clone(), config().queue(queue));
        let rec = Arc::new(Recorder::default());
        informer.add_event_handler(Arc::clone(&rec)).unwrap();
        let run = Running::start(&informer);
        informer.wait_for_sync().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        // The watch misses the deletion, and the history is gone: a relist finds b missing.
        src.drop_watches();
        src.delete(&key("b"));
        src.compact();
        eventually(|| cache_state(&informer) == source_state(&src)).await;
        eventually(|| rec.log.lock().iter().any(|l| l.starts_with("delete"))).await;
        assert!(
            rec.log.lock().contains(&"delete ns/b tombstone".to_owned()),
            "{queue:?}: {:?}",
            rec.log.lock()
        );
        assert_eq!(*rec.state.lock(), source_state(&src), "{queue:?}");
        run.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn unchanged_resource_version_is_a_resync_delivered_only_to_due_handlers() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let informer =
        SharedIndexInformer::new(src.clone(), config().resync_period(Duration::from_secs(10)));
    let resyncing = Arc::new(Recorder::default());
    let quiet = Arc::new(Recorder::default());
    let r1 = informer.add_event_handler(Arc::clone(&resyncing)).unwrap();
    let r2 = informer
        .add_event_handler_with_config(
            Arc::clone(&quiet),
            HandlerConfig::default().resync_period(Duration::from_secs(3600)),
        )
        .unwrap();
    assert_eq!(r1.resync_period(), Duration::from_secs(10));
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    tokio::time::sleep(Duration::from_secs(25)).await;
    eventually(|| {
        resyncing
            .log
            .lock()
            .iter()
            .filter(|l| l.starts_with("update"))
            .count()
            >= 2
    })
    .await;
    let resync_line = resyncing
        .log
        .lock()
        .iter()
        .find(|l| l.starts_with("update"))
        .cloned()
        .unwrap();
    let v = rv(&src.objects()[0]);
    assert_eq!(
        resync_line,
        format!("update ns/a {v}->{v}"),
        "a resync is an update with the same RV"
    );
    assert!(
        quiet.log.lock().iter().all(|l| l.starts_with("add")),
        "{:?}",
        quiet.log.lock()
    );
    drop(r2);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn per_handler_resync_periods_follow_client_go_rules() {
    let s = Duration::from_secs;
    // An informer without resync gives every handler 0.
    let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), config());
    let r = informer
        .add_event_handler_with_config(
            HandlerFns::new(),
            HandlerConfig::default().resync_period(s(5)),
        )
        .unwrap();
    assert_eq!(r.resync_period(), s(0));

    // Below 1 s → 1 s; before start, a shorter period lowers the check period for everyone.
    let informer = SharedIndexInformer::new(
        FakeSource::<ConfigMap>::new(),
        config().resync_period(s(30)),
    );
    let slow = informer.add_event_handler(HandlerFns::new()).unwrap();
    assert_eq!(slow.resync_period(), s(30));
    let fast = informer
        .add_event_handler_with_config(
            HandlerFns::new(),
            HandlerConfig::default().resync_period(Duration::from_millis(200)),
        )
        .unwrap();
    assert_eq!(fast.resync_period(), s(1));
    assert_eq!(slow.resync_period(), s(30));

    // After start, a shorter period is raised to the check period.
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let late = informer
        .add_event_handler_with_config(
            HandlerFns::new(),
            HandlerConfig::default().resync_period(Duration::from_millis(500)),
        )
        .unwrap();
    assert_eq!(late.resync_period(), s(1));
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn handler_added_after_start_gets_synthetic_initial_adds_then_live_events() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.upsert(cm("b"));
    let informer = SharedIndexInformer::new(src.clone(), config());
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let rec = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(Arc::clone(&rec)).unwrap();
    assert!(reg.synced().await);
    let r = src.upsert(cm("c"));
    eventually(|| rec.log.lock().len() == 3).await;
    let log = rec.log.lock().clone();
    assert!(log[..2].iter().all(|l| l.ends_with(" true")), "{log:?}");
    assert_eq!(log[2], format!("add ns/c {r} false"));
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn removing_a_handler_is_idempotent_and_affects_no_other_handler() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let kept = Arc::new(Recorder::default());
    let gone = Arc::new(Recorder::default());
    informer.add_event_handler(Arc::clone(&kept)).unwrap();
    let reg = informer.add_event_handler(Arc::clone(&gone)).unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    src.upsert(cm("a"));
    eventually(|| gone.log.lock().len() == 1 && kept.log.lock().len() == 1).await;
    assert!(reg.remove());
    assert!(!reg.remove(), "second remove is a no-op");
    assert!(reg.is_removed());
    src.upsert(cm("b"));
    eventually(|| kept.log.lock().len() == 2).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(gone.log.lock().len(), 1);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn slow_handler_blocks_neither_the_fifo_nor_other_handlers_and_loses_nothing() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let slow_seen = Arc::new(Mutex::new(Vec::new()));
    let (g, seen) = (Arc::clone(&gate), Arc::clone(&slow_seen));
    let slow = informer
        .add_event_handler(HandlerFns::new().on_add(move |o: &Arc<ConfigMap>, _| {
            let (lock, cv) = &*g;
            let mut open = lock.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            seen.lock().push(o.metadata.name.clone().unwrap());
        }))
        .unwrap();
    let fast = Arc::new(Recorder::default());
    informer.add_event_handler(Arc::clone(&fast)).unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    for i in 0..200 {
        src.upsert(cm(&format!("c{i:03}")));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while fast.log.lock().len() < 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fast handler was held up"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(informer.indexer().len(), 200, "the FIFO kept flowing");
    assert!(slow.pending() > 0, "the slow handler's backlog is visible");
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    while slow_seen.lock().len() < 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slow handler lost events"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let want: Vec<String> = (0..200).map(|i| format!("c{i:03}")).collect();
    assert_eq!(*slow_seen.lock(), want, "in order, nothing lost");
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn coalescing_handler_sees_the_latest_state_of_each_key() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let rec = Arc::new(Recorder::default());
    let reg = informer
        .add_event_handler_with_config(
            Arc::clone(&rec),
            HandlerConfig::default().buffer(BufferMode::Coalescing),
        )
        .unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    for _ in 0..50 {
        src.upsert(cm("a"));
        src.upsert(cm("b"));
    }
    eventually(|| *rec.state.lock() == source_state(&src) && reg.pending() == 0).await;
    assert!(rec.log.lock().len() <= 100);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn transform_runs_before_the_object_is_stored() {
    let src = FakeSource::new();
    let mut obj = cm("a");
    obj.metadata.managed_fields = Some(vec![Default::default()]);
    src.upsert(obj);
    let informer = SharedIndexInformer::builder(src.clone())
        .config(config())
        .transform(|mut o: ConfigMap| {
            o.metadata.managed_fields = None;
            o
        })
        .build();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    assert!(
        informer
            .indexer()
            .list()
            .iter()
            .all(|o| o.metadata.managed_fields.is_none())
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_errors_reach_the_watch_error_handler() {
    let src = FakeSource::new();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e = Arc::clone(&errors);
    let informer = SharedIndexInformer::builder(src.clone())
        .config(config())
        .watch_error_handler(move |err: &reflector::Error| e.lock().push(err.to_string()))
        .build();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    src.inject_watch_error(crate::testing::status(
        410,
        "Expired",
        "too old resource version: 1 (2)",
    ));
    eventually(|| !errors.lock().is_empty()).await;
    assert!(errors.lock()[0].contains("410"));
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn run_twice_is_a_no_op_and_stopped_informer_refuses_handlers() {
    let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), config());
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    informer.run(CancellationToken::new()).await; // returns at once
    run.stop().await;
    assert!(matches!(
        informer.add_event_handler(HandlerFns::new()),
        Err(Error::Stopped)
    ));
}

#[tokio::test(start_paused = true)]
async fn empty_initial_list_syncs_for_every_queue_kind() {
    for kind in [
        QueueKind::RealFifo,
        QueueKind::RealFifoNonAtomic,
        QueueKind::DeltaFifo,
    ] {
        let src = FakeSource::<ConfigMap>::new();
        let mut cfg = config();
        cfg.queue = kind;
        let informer = SharedIndexInformer::new(src.clone(), cfg);
        let reg = informer
            .add_event_handler(Arc::new(Recorder::default()))
            .unwrap();
        let run = Running::start(&informer);
        tokio::time::timeout(Duration::from_secs(60), informer.wait_for_sync())
            .await
            .unwrap_or_else(|_| panic!("{kind:?}: an empty initial list never synced"));
        assert!(informer.has_synced(), "{kind:?}");
        assert!(
            tokio::time::timeout(Duration::from_secs(60), reg.synced())
                .await
                .unwrap_or(false),
            "{kind:?}: the registration never synced"
        );
        run.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn store_resource_version_follows_added_updated_and_deleted_objects() {
    for kind in [
        QueueKind::RealFifo,
        QueueKind::RealFifoNonAtomic,
        QueueKind::DeltaFifo,
    ] {
        let src = FakeSource::<ConfigMap>::new();
        src.upsert(cm("a"));
        let mut cfg = config();
        cfg.queue = kind;
        let informer = SharedIndexInformer::new(src.clone(), cfg);
        let run = Running::start(&informer);
        informer.wait_for_sync().await;
        let added = src.upsert(cm("b"));
        eventually(|| informer.indexer().last_sync_resource_version() == added).await;
        let updated = src.upsert(cm("a"));
        eventually(|| informer.indexer().last_sync_resource_version() == updated).await;
        let deleted = src.delete(&key("b")).unwrap();
        eventually(|| informer.indexer().last_sync_resource_version() == deleted).await;
        run.stop().await;
    }
}

#[test]
fn add_event_handler_from_a_thread_outside_the_runtime_after_start() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let src = FakeSource::<ConfigMap>::new();
    src.upsert(cm("a"));
    let informer = SharedIndexInformer::new(src.clone(), config());
    let cancel = CancellationToken::new();
    let task = rt.spawn({
        let i = informer.clone();
        let c = cancel.clone();
        async move { i.run(c).await }
    });
    rt.block_on(informer.wait_for_sync());
    // A plain thread with no runtime context, as a GUI or a sync library would have.
    let recorder = Arc::new(Recorder::default());
    let reg = std::thread::spawn({
        let informer = informer.clone();
        let recorder = Arc::clone(&recorder);
        move || informer.add_event_handler(recorder).unwrap()
    })
    .join()
    .expect("add_event_handler does not panic outside the runtime");
    assert!(rt.block_on(reg.synced()));
    assert_eq!(
        recorder.log.lock().first().map(String::as_str),
        Some(&*format!("add ns/a {} true", rv(&src.objects()[0])))
    );
    cancel.cancel();
    rt.block_on(task).unwrap();
}

#[tokio::test(start_paused = true)]
async fn health_reports_consecutive_failures_and_recovers() {
    let src = FakeSource::<ConfigMap>::new();
    src.upsert(cm("a"));
    src.fail_lists(
        4,
        crate::testing::status(500, "InternalError", "etcd is down"),
    );
    let mut cfg = config();
    cfg.reflector = cfg
        .reflector
        .initial_list(crate::reflector::InitialList::List);
    let informer = SharedIndexInformer::new(src.clone(), cfg);
    let run = Running::start(&informer);
    eventually(|| {
        informer
            .health()
            .is_some_and(|h| h.consecutive_failures >= 3)
    })
    .await;
    let h = informer.health().unwrap();
    assert!(!h.is_healthy(3));
    assert!(
        h.last_error.as_deref().unwrap().contains("etcd is down"),
        "{h:?}"
    );
    informer.wait_for_sync().await;
    let h = informer.health().unwrap();
    assert_eq!(h.consecutive_failures, 0, "{h:?}");
    assert!(h.is_healthy(3));
    assert_eq!(informer.reflector().unwrap().name(), "objects");
    run.stop().await;
}

/// A handler whose `on_add` tells the test it has been entered, then blocks until the test
/// lets it go; it counts its calls and whether one is in progress.
struct Gate {
    calls: AtomicUsize,
    in_call: std::sync::atomic::AtomicBool,
    entered: tokio::sync::mpsc::UnboundedSender<String>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Gate {
    fn new() -> (
        Arc<Self>,
        tokio::sync::mpsc::UnboundedReceiver<String>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (entered, entered_rx) = tokio::sync::mpsc::unbounded_channel();
        let (release_tx, release) = std::sync::mpsc::channel();
        let gate = Arc::new(Self {
            calls: AtomicUsize::new(0),
            in_call: std::sync::atomic::AtomicBool::new(false),
            entered,
            release: std::sync::Mutex::new(release),
        });
        (gate, entered_rx, release_tx)
    }
}

impl EventHandler<ConfigMap> for Gate {
    fn on_add(&self, obj: &Arc<ConfigMap>, _: bool) {
        self.in_call.store(true, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        let _ = self
            .entered
            .send(obj.metadata.name.clone().unwrap_or_default());
        // Blocks until released (or until the test has gone: the sender is dropped).
        let _ = self.release.lock().unwrap().recv();
        self.in_call.store(false, Ordering::SeqCst);
    }
}

const WAIT: Duration = Duration::from_secs(60);

/// client-go 1.37's `ShutDownEventHandler`: the blocking removal returns only once the handler
/// has returned from the call it was in and will be called no more — the two adds still
/// buffered for it are never delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_and_wait_returns_only_once_the_handler_has_returned_and_is_called_no_more() {
    for delivery in [Delivery::BlockingPool, Delivery::Adaptive] {
        let src = FakeSource::new();
        for name in ["a", "b", "c"] {
            src.upsert(cm(name));
        }
        let informer = SharedIndexInformer::new(src.clone(), config());
        let (gate, mut entered, release) = Gate::new();
        let reg = informer
            .add_event_handler_with_config(
                Arc::clone(&gate),
                HandlerConfig::default().delivery(delivery),
            )
            .unwrap();
        let other = Arc::new(Recorder::default());
        informer.add_event_handler(Arc::clone(&other)).unwrap();
        let run = Running::start(&informer);
        let first = tokio::time::timeout(WAIT, entered.recv())
            .await
            .expect("the handler was never called")
            .unwrap();

        let removal = reg.remove_and_wait();
        tokio::pin!(removal);
        for _ in 0..50 {
            assert!(
                futures::poll!(removal.as_mut()).is_pending(),
                "{delivery:?}: the removal returned while the handler was still in its call \
                 on {first}"
            );
            tokio::task::yield_now().await;
        }
        assert!(gate.in_call.load(Ordering::SeqCst));
        release.send(()).unwrap();
        let removed = tokio::time::timeout(WAIT, removal)
            .await
            .expect("the removal never returned");
        assert!(removed, "{delivery:?}: this call removed the handler");
        assert!(!gate.in_call.load(Ordering::SeqCst), "{delivery:?}");
        assert_eq!(gate.calls.load(Ordering::SeqCst), 1, "{delivery:?}");

        // Later changes reach the other handler, never the removed one.
        src.upsert(cm("d"));
        tokio::time::timeout(WAIT, async {
            while !other.state.lock().contains_key(&key("d")) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the other handler never saw d");
        assert_eq!(gate.calls.load(Ordering::SeqCst), 1, "{delivery:?}");
        assert!(
            !reg.remove_and_wait().await,
            "{delivery:?}: a second removal is a no-op"
        );
        drop(release);
        run.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn remove_and_wait_before_start_and_after_stop_returns_at_once() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let informer = SharedIndexInformer::new(src.clone(), config());
    let never = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(Arc::clone(&never)).unwrap();
    let kept = Arc::new(Recorder::default());
    let kept_reg = informer.add_event_handler(Arc::clone(&kept)).unwrap();
    assert!(reg.remove_and_wait().await);
    assert!(reg.is_removed());
    let run = Running::start(&informer);
    assert!(kept_reg.synced().await);
    run.stop().await;
    assert!(never.log.lock().is_empty(), "{:?}", never.log.lock());
    assert!(
        kept_reg.remove_and_wait().await,
        "the registration was still listed"
    );
}

mod delivery;
