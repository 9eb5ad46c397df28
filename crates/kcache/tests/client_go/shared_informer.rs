//! client-go v0.36.5's `shared_informer_test.go, processor_listener_test.go`, ported one for one (see `README.md` in this folder).
//!
//! How the Go scaffolding maps (`README.md` has the table):
//!
//! - `FakeControllerSource` is [`FakeSource`]; it sets resourceVersions itself, so an expected
//!   object takes the resourceVersion its `upsert` returned.
//! - Go's `testListener` is [`TestListener`], with the same `ok()`: poll for the expected set of
//!   names for up to 2 s, then wait 1 s for stragglers and check again. The tests run in tokio's
//!   paused time, where those waits are exact and cost nothing, and register their handlers
//!   `inline` (on the listener's task) so that every delivery happens on the runtime, before
//!   paused time may move on (the blocking pool runs outside the runtime's clock).
//! - `eventHandlerCount` is `informer.handlers().len()`; `isRegistered(informer, reg)` is "one of
//!   `informer.handlers()` has `reg`'s name" (names are unique within an informer).
//! - goleak's check that every goroutine stopped is the runtime's count of live tasks.
//!
//! Each test is named after the Go test it ports (snake case; a subtest is `<test>__<subtest>`).

#![allow(non_snake_case)] // `<test>__<subtest>` names

use std::{
    collections::{BTreeSet, HashMap},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kcache::{
    SharedIndexInformer,
    informer::{
        self, Delivery, Error, EventHandler, HandlerConfig, HandlerFns, HandlerRegistration,
    },
    reflector,
    store::{IndexFunc, ObjectKey},
    testing::{FakeSource, status},
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Every bounded wait of these tests: generous, and fails loudly.
const WAIT: Duration = Duration::from_secs(60);

fn pod(name: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_owned());
    pod
}

fn pod_with_labels(name: &str, labels: &[(&str, &str)]) -> Pod {
    let mut pod = pod(name);
    pod.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    pod
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(None, name)
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn informer_with_resync(src: &FakeSource<Pod>, resync: Duration) -> SharedIndexInformer<Pod> {
    SharedIndexInformer::new(
        src.clone(),
        informer::Config::default().resync_period(resync),
    )
}

/// Go's `testListener`: records the names of the objects it is given on add and update.
struct TestListener {
    name: String,
    resync_period: Duration,
    expected: Mutex<BTreeSet<String>>,
    received: Mutex<Vec<String>>,
}

impl TestListener {
    fn new(name: &str, resync_period: Duration, expected: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            resync_period,
            expected: Mutex::new(expected.iter().map(|s| (*s).to_owned()).collect()),
            received: Mutex::new(Vec::new()),
        })
    }

    fn handle(&self, obj: &Pod) {
        self.received.lock().push(name_of(obj));
    }

    fn satisfied_expectations(&self) -> bool {
        let received: BTreeSet<String> = self.received.lock().iter().cloned().collect();
        received == *self.expected.lock()
    }

    /// Go's `ok()`: the expected names arrive within 2 s, and nothing else in the next second.
    async fn ok(&self) -> bool {
        let mut satisfied = false;
        for _ in 0..=20 {
            if self.satisfied_expectations() {
                satisfied = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !satisfied {
            return false;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.satisfied_expectations()
    }

    fn reset(&self) {
        self.received.lock().clear();
    }

    fn expect(&self, names: &[&str]) {
        *self.expected.lock() = names.iter().map(|s| (*s).to_owned()).collect();
    }

    fn report(&self) -> String {
        format!(
            "{}: expected {:?}, got {:?}",
            self.name,
            self.expected.lock(),
            self.received.lock()
        )
    }

    /// `AddEventHandlerWithResyncPeriod(l, l.resyncPeriod)`, delivered inline (see the header).
    fn register(
        self: &Arc<Self>,
        informer: &SharedIndexInformer<Pod>,
    ) -> Result<HandlerRegistration, Error> {
        informer.add_event_handler_with_config(
            Arc::clone(self),
            HandlerConfig::default()
                .resync_period(self.resync_period)
                .delivery(Delivery::Inline),
        )
    }
}

impl EventHandler<Pod> for TestListener {
    fn on_add(&self, obj: &Arc<Pod>, _: bool) {
        self.handle(obj);
    }
    fn on_update(&self, _: &Arc<Pod>, new: &Arc<Pod>) {
        self.handle(new);
    }
}

/// An informer running on its own task until [`stop`](Self::stop).
struct Running {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(informer: &SharedIndexInformer<Pod>) -> Self {
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (i, c) = (informer.clone(), cancel.clone());
            async move { i.run(c).await }
        });
        Self { cancel, task }
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the informer did not stop")
            .expect("the informer's task panicked");
    }
}

fn handler_count(informer: &SharedIndexInformer<Pod>) -> usize {
    informer.handlers().len()
}

fn is_registered(informer: &SharedIndexInformer<Pod>, reg: &HandlerRegistration) -> bool {
    informer.handlers().iter().any(|h| h.name() == reg.name())
}

async fn wait_for_sync(informer: &SharedIndexInformer<Pod>) {
    tokio::time::timeout(WAIT, informer.wait_for_sync())
        .await
        .expect("the informer never synced");
}

/// An index of a pod's label keys (Go's `"labels"` index func).
fn label_keys() -> IndexFunc<Pod> {
    Arc::new(|pod: &Pod| {
        pod.metadata
            .labels
            .iter()
            .flat_map(|labels| labels.keys().cloned())
            .collect()
    })
}

fn by_name(mut pods: Vec<Arc<Pod>>) -> Vec<Pod> {
    pods.sort_by_key(|p| name_of(p));
    pods.iter().map(|p| (**p).clone()).collect()
}

fn as_set(values: Vec<String>) -> BTreeSet<String> {
    values.into_iter().collect()
}

#[tokio::test(start_paused = true)]
async fn test_indexer() {
    let src = FakeSource::<Pod>::new();
    let mut pod1 = pod_with_labels("pod1", &[("a", "a-val"), ("b", "b-val1")]);
    let mut pod2 = pod_with_labels("pod2", &[("b", "b-val2")]);
    let mut pod3 = pod_with_labels("pod3", &[("a", "a-val2")]);
    pod1.metadata.resource_version = Some(src.upsert(pod1.clone()));
    pod2.metadata.resource_version = Some(src.upsert(pod2.clone()));

    let informer = informer_with_resync(&src, Duration::from_secs(1));
    informer
        .add_indexers(HashMap::from([("labels".to_owned(), label_keys())]))
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;

    // Look-ups by index.
    let res = informer.indexer().by_index("labels", "a").unwrap();
    assert_eq!(by_name(res), [pod1.clone()]);

    // An object added later is indexed too.
    pod3.metadata.resource_version = Some(src.upsert(pod3.clone()));
    let want = [pod1.clone(), pod3.clone()];
    tokio::time::timeout(Duration::from_secs(3), async {
        while by_name(informer.indexer().by_index("labels", "a").unwrap()) != want {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("pod3 never showed in the index");

    // So is an index added later, at once.
    informer
        .add_indexers(HashMap::from([("labels-again".to_owned(), label_keys())]))
        .unwrap();
    let res = informer.indexer().by_index("labels-again", "a").unwrap();
    assert_eq!(by_name(res), want);
    let ab = as_set(vec!["a".into(), "b".into()]);
    assert_eq!(
        as_set(informer.indexer().list_index_func_values("labels")),
        ab
    );
    assert_eq!(
        as_set(informer.indexer().list_index_func_values("labels-again")),
        ab
    );
    run.stop().await;
}

/// Go's `testListenerResyncPeriods` without a start-up delay.
#[tokio::test(start_paused = true)]
async fn test_listener_resync_periods() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    src.upsert(pod("pod2"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let start = tokio::time::Instant::now();

    let listener1 = TestListener::new("listener1", Duration::ZERO, &["pod1", "pod2"]);
    let listener2 = TestListener::new("listener2", Duration::from_secs(2), &["pod1", "pod2"]);
    let listener3 = TestListener::new("listener3", Duration::from_secs(3), &["pod1", "pod2"]);
    let listeners = [&listener1, &listener2, &listener3];
    for l in listeners {
        l.register(&informer).unwrap();
    }
    let run = Running::start(&informer);

    // synctest.Wait(): run everything that is ready without moving the clock.
    settle().await;
    for l in listeners {
        assert!(
            l.satisfied_expectations(),
            "{:?}: {}",
            start.elapsed(),
            l.report()
        );
    }
    for l in listeners {
        l.reset();
    }

    // At 2 s listener2 resyncs, and only it.
    sleep_until_and_settle(start + Duration::from_secs(2)).await;
    assert!(listener2.satisfied_expectations(), "{}", listener2.report());
    assert_eq!(listener1.received.lock().len(), 0, "listener1 resynced");
    assert_eq!(listener3.received.lock().len(), 0, "listener3 resynced");
    for l in listeners {
        l.reset();
    }

    // At 3 s listener3 resyncs, and only it.
    sleep_until_and_settle(start + Duration::from_secs(3)).await;
    assert!(listener3.satisfied_expectations(), "{}", listener3.report());
    assert_eq!(listener1.received.lock().len(), 0, "listener1 resynced");
    assert_eq!(listener2.received.lock().len(), 0, "listener2 resynced");
    run.stop().await;
}

/// synctest.Wait in paused time: paused time moves on only when no task can run, so a 1 ms
/// sleep returns once everything that could run has run (and no timer of these tests falls
/// within that millisecond).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// Moves the paused clock to `deadline` (running every timer due by then) and settles.
async fn sleep_until_and_settle(deadline: tokio::time::Instant) {
    tokio::time::sleep_until(deadline).await;
    settle().await;
}

#[tokio::test(start_paused = true)]
async fn test_resync_check_period() {
    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::from_secs(12 * 3600));
    let period = |reg: &HandlerRegistration| reg.resync_period();

    let listener1 = TestListener::new("listener1", Duration::ZERO, &[]);
    let handler1 = listener1.register(&informer).unwrap();
    assert_eq!(
        informer.resync_check_period(),
        Duration::from_secs(12 * 3600)
    );
    assert_eq!(period(&handler1), Duration::ZERO);

    let listener2 = TestListener::new("listener2", Duration::from_secs(60), &[]);
    let handler2 = listener2.register(&informer).unwrap();
    assert_eq!(informer.resync_check_period(), Duration::from_secs(60));
    assert_eq!(period(&handler1), Duration::ZERO);
    assert_eq!(period(&handler2), Duration::from_secs(60));

    let listener3 = TestListener::new("listener3", Duration::from_secs(55), &[]);
    let handler3 = listener3.register(&informer).unwrap();
    assert_eq!(informer.resync_check_period(), Duration::from_secs(55));
    assert_eq!(period(&handler1), Duration::ZERO);
    assert_eq!(period(&handler2), Duration::from_secs(60));
    assert_eq!(period(&handler3), Duration::from_secs(55));

    let listener4 = TestListener::new("listener4", Duration::from_secs(5), &[]);
    let handler4 = listener4.register(&informer).unwrap();
    assert_eq!(informer.resync_check_period(), Duration::from_secs(5));
    assert_eq!(period(&handler1), Duration::ZERO);
    assert_eq!(period(&handler2), Duration::from_secs(60));
    assert_eq!(period(&handler3), Duration::from_secs(55));
    assert_eq!(period(&handler4), Duration::from_secs(5));
}

/// kubernetes/kubernetes#59822: a handler added from another thread while the informer starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_shared_informer_initialization_race() {
    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let listener = TestListener::new("raceListener", Duration::ZERO, &[]);
    let adder = std::thread::spawn({
        let (informer, listener) = (informer.clone(), Arc::clone(&listener));
        move || {
            // Go ignores the result: the informer may already have stopped.
            let _ = informer.add_event_handler_with_config(
                listener,
                HandlerConfig::default().resync_period(Duration::ZERO),
            );
        }
    });
    let run = Running::start(&informer);
    run.stop().await;
    adder
        .join()
        .expect("the thread adding the handler panicked");
}

/// A watch closed while the store changed: after the relist, the handler without resync sees
/// the changed objects, the one with a due resync sees them all.
///
/// client-go's fake source can make a change without telling open watches (`AddDropWatch`),
/// then force a relist (`ResetWatch`). With [`FakeSource`] the same situation is built from a
/// disruption: the watch is dropped and the history compacted, so the reflector must relist,
/// and the relist is held (lists stall) until the test's `ResetWatch` point. The relist is a
/// plain LIST (the reflector's streaming list is turned off) so that the stall holds it.
#[tokio::test(start_paused = true)]
async fn test_shared_informer_watch_disruption() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    src.upsert(pod("pod2"));
    let config = informer::Config::default()
        .resync_period(Duration::from_secs(1))
        .reflector(reflector::Config::default().initial_list(kcache::reflector::InitialList::List));
    let informer = SharedIndexInformer::new(src.clone(), config);

    let no_resync = TestListener::new("listenerNoResync", Duration::ZERO, &["pod1", "pod2"]);
    no_resync.register(&informer).unwrap();
    let resync = TestListener::new("listenerResync", Duration::from_secs(1), &["pod1", "pod2"]);
    resync.register(&informer).unwrap();
    let listeners = [&no_resync, &resync];
    let run = Running::start(&informer);
    for l in listeners {
        assert!(l.ok().await, "{}", l.report());
    }

    // Add pod3 and bump pod2 where no watch sees them: only a relist will.
    src.stall_lists(true);
    src.drop_watches();
    src.upsert(pod("pod3"));
    src.upsert(pod("pod2"));
    src.compact();

    // Nobody saw any change.
    for l in listeners {
        assert!(l.ok().await, "{}", l.report());
    }
    for l in listeners {
        l.reset();
    }
    no_resync.expect(&["pod2", "pod3"]);
    resync.expect(&["pod1", "pod2", "pod3"]);

    // A resync check: listenerResync is due, listenerNoResync never is.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // ResetWatch: the relist goes through.
    src.stall_lists(false);
    for l in listeners {
        assert!(l.ok().await, "{}", l.report());
    }
    run.stop().await;
}

/// client-go's fake source cannot stream an initial list, so the reflector falls back to a LIST,
/// which fails with "Access Denied": the watch error handler is told.
///
/// kcache also tells the handler of the refused streaming list (documented: it is called with
/// every error the reflector recovers from), so the "Access Denied" error is the first one
/// after that.
#[tokio::test(start_paused = true)]
async fn test_shared_informer_error_handling() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    src.set_supports_watch_list(false);
    src.fail_lists(1000, status(403, "Forbidden", "Access Denied"));
    let (tx, mut errors) = tokio::sync::mpsc::unbounded_channel();
    let informer = SharedIndexInformer::builder(src.clone())
        .config(informer::Config::default().resync_period(Duration::from_secs(1)))
        .watch_error_handler(move |err| {
            let fallback = matches!(err, reflector::Error::WatchList { .. });
            let _ = tx.send((fallback, err.to_string()));
        })
        .build();
    let run = Running::start(&informer);
    let first = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            let (fallback, err) = errors
                .recv()
                .await
                .expect("the informer dropped its handler");
            if !fallback {
                return err;
            }
        }
    })
    .await
    .expect("timeout waiting for the error handler call");
    assert!(
        first.contains("Access Denied"),
        "expected an 'Access Denied' error, got: {first}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_shared_informer_transformer() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    src.upsert(pod("pod2"));
    let informer = SharedIndexInformer::builder(src.clone())
        .config(informer::Config::default().resync_period(Duration::from_secs(1)))
        .transform(|mut pod: Pod| {
            if let Some(name) = pod.metadata.name.as_mut() {
                *name = name.to_uppercase();
            }
            pod
        })
        .build();
    let listener = TestListener::new("listenerTransformer", Duration::ZERO, &["POD1", "POD2"]);
    // AddEventHandler: the informer's resync period.
    informer
        .add_event_handler_with_config(
            Arc::clone(&listener),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    assert!(listener.ok().await, "{}", listener.report());
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_shared_informer_remove_handler() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let handle1 = informer.add_event_handler(HandlerFns::new()).unwrap();
    let handle2 = informer.add_event_handler(HandlerFns::new()).unwrap();
    assert_eq!(handler_count(&informer), 2);

    assert!(handle2.remove(), "removing the second handler failed");
    assert_eq!(handler_count(&informer), 1);
    assert!(handle1.remove(), "removing the first handler failed");
    assert_eq!(
        handler_count(&informer),
        0,
        "handlers left after removing both"
    );
}

/// client-go lets any informer be asked to remove any registration; a foreign one is left alone.
/// A kcache registration removes itself from the informer that issued it: there is no call that
/// hands it to another informer, so that step is the type system's. The rest is as in Go.
#[tokio::test(start_paused = true)]
async fn test_shared_informer_remove_foreign_handler() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let src2 = FakeSource::<Pod>::new();
    src2.upsert(pod("pod1"));
    let informer2 = informer_with_resync(&src2, Duration::from_secs(1));

    let handle1 = informer.add_event_handler(HandlerFns::new()).unwrap();
    let handle2 = informer.add_event_handler(HandlerFns::new()).unwrap();
    assert_eq!(handler_count(&informer), 2);
    assert_eq!(handler_count(&informer2), 0);
    assert!(
        !is_registered(&informer2, &handle1),
        "handle1 registered for informer2"
    );
    assert!(
        !is_registered(&informer2, &handle2),
        "handle2 registered for informer2"
    );

    assert_eq!(handler_count(&informer), 2);
    assert_eq!(handler_count(&informer2), 0);
    assert!(
        is_registered(&informer, &handle1),
        "handle1 no longer registered"
    );
    assert!(
        is_registered(&informer, &handle2),
        "handle2 no longer registered"
    );

    assert!(handle2.remove());
    assert_eq!(handler_count(&informer), 1);
    assert!(handle1.remove());
    assert_eq!(handler_count(&informer), 0);
}

#[tokio::test(start_paused = true)]
async fn test_shared_informer_multiple_registration() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    // One handler, registered twice.
    let handler1 = Arc::new(HandlerFns::<Pod>::new());
    let reg1 = informer.add_event_handler(Arc::clone(&handler1)).unwrap();
    assert!(
        is_registered(&informer, &reg1),
        "reg1 not active after registration"
    );
    let reg2 = informer.add_event_handler(Arc::clone(&handler1)).unwrap();
    assert!(
        is_registered(&informer, &reg2),
        "reg2 not active after registration"
    );
    assert_eq!(handler_count(&informer), 2);

    assert!(reg1.remove(), "removing the duplicate registration failed");
    assert!(
        !is_registered(&informer, &reg1),
        "reg1 still active after removal"
    );
    assert!(
        is_registered(&informer, &reg2),
        "reg2 not active after removing reg1"
    );
    assert_eq!(handler_count(&informer), 1);

    assert!(reg2.remove(), "removing the second registration failed");
    assert!(
        !is_registered(&informer, &reg2),
        "reg2 still active after removal"
    );
    assert_eq!(handler_count(&informer), 0);
}

#[tokio::test(start_paused = true)]
async fn test_removing_removed_shared_informer() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let reg = informer.add_event_handler(HandlerFns::new()).unwrap();
    assert!(reg.remove(), "removing the registration failed");
    assert!(
        !is_registered(&informer, &reg),
        "still active after removal"
    );
    // Removing again is no error (kcache: it reports that it removed nothing).
    assert!(!reg.remove());
    assert!(
        !is_registered(&informer, &reg),
        "still active after the second removal"
    );
}

/// Many threads adding and removing handlers while the source churns; meant to find races (Go
/// runs it under -race). The workers stop when the stopped informer refuses a handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_shared_informer_handler_abuse() {
    use rand::Rng as _;

    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let run = Running::start(&informer);
    let done = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));

    let workers: Vec<_> = (0..100)
        .map(|_| {
            let (informer, done, errors) =
                (informer.clone(), Arc::clone(&done), Arc::clone(&errors));
            std::thread::spawn(move || {
                let mut rng = rand::rng();
                let mut handles: Vec<HandlerRegistration> = Vec::new();
                while !done.load(Ordering::SeqCst) {
                    if rng.random_range(0..2) == 0 {
                        let funcs = HandlerFns::<Pod>::new()
                            .on_add(|_, _| {})
                            .on_update(|_, _| {})
                            .on_delete(|_| {});
                        let options =
                            HandlerConfig::default().resync_period(Duration::from_secs(1));
                        match informer.add_event_handler_with_config(funcs, options) {
                            Ok(reg) => handles.push(reg),
                            // The test is over.
                            Err(Error::Stopped) => return,
                            Err(err) => {
                                errors.lock().push(format!("failed to add handler: {err}"));
                                return;
                            }
                        }
                    } else if !handles.is_empty() {
                        let idx = rng.random_range(0..handles.len());
                        handles.swap_remove(idx).remove();
                    }
                    std::thread::yield_now();
                }
            })
        })
        .collect();

    // While the workers run, churn the source.
    let mut rng = rand::rng();
    let mut objs: Vec<String> = Vec::new();
    for i in 0..10_000 {
        if objs.is_empty() {
            let name = format!("pod{i}");
            src.upsert(pod(&name));
            objs.push(name);
        }
        match rng.random_range(0..3) {
            0 => {
                let name = format!("pod{i}");
                src.upsert(pod(&name));
                objs.push(name);
            }
            1 => {
                let idx = rng.random_range(0..objs.len());
                src.upsert(pod(&objs[idx]));
            }
            _ => {
                let idx = rng.random_range(0..objs.len());
                src.delete(&key(&objs.remove(idx)));
            }
        }
        if i % 100 == 0 {
            tokio::task::yield_now().await;
        }
    }

    // Stop the informer first, to race the workers against it closing.
    run.stop().await;
    done.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().expect("a worker panicked");
    }
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
}

#[tokio::test(start_paused = true)]
async fn test_state_shared_informer() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let listener = TestListener::new("listener", Duration::ZERO, &["pod1"]);
    listener.register(&informer).unwrap();
    assert!(!informer.has_started(), "started after creation");
    assert!(!informer.is_stopped(), "stopped after creation");

    let run = Running::start(&informer);
    assert!(
        listener.ok().await,
        "the informer did not report the initial objects"
    );
    assert!(
        informer.has_started(),
        "not started although handling events"
    );
    assert!(!informer.is_stopped(), "stopped although not cancelled");

    run.cancel.cancel();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(informer.is_stopped(), "not stopped although cancelled");
    assert!(
        informer.has_started(),
        "not started after having started and stopped"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_add_on_stopped_shared_informer() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let listener = TestListener::new("listener", Duration::ZERO, &["pod1"]);
    let run = Running::start(&informer);
    run.cancel.cancel();
    // Go polls IsStopped every 100 ms for up to 2 s.
    let mut stopped = false;
    for _ in 0..=20 {
        if informer.is_stopped() {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stopped, "not stopped although cancelled");

    let err = listener
        .register(&informer)
        .expect_err("the stopped informer did not refuse the handler");
    assert!(matches!(err, Error::Stopped), "unexpected error: {err}");
    assert!(
        err.to_string().ends_with("stopped"),
        "unexpected error: {err}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_remove_on_stopped_shared_informer() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let listener = TestListener::new("listener", Duration::ZERO, &["pod1"]);
    let handle = listener.register(&informer).unwrap();
    let run = Running::start(&informer);
    run.cancel.cancel();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(informer.is_stopped(), "not stopped although cancelled");
    assert!(
        handle.remove(),
        "the stopped informer did not remove the handler"
    );
    assert!(!is_registered(&informer, &handle));
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_remove_while_active() {
    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::ZERO);
    let listener = TestListener::new("listener", Duration::ZERO, &["pod1"]);
    let handle = informer
        .add_event_handler_with_config(
            Arc::clone(&listener),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);

    src.upsert(pod("pod1"));
    assert!(
        listener.ok().await,
        "the event did not arrive: {}",
        listener.report()
    );

    handle.remove();
    assert!(
        !is_registered(&informer, &handle),
        "still active after removal"
    );

    src.upsert(pod("pod2"));
    assert!(
        listener.ok().await,
        "an unexpected event arrived: {}",
        listener.report()
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_add_while_active() {
    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::ZERO);
    let listener1 = TestListener::new("originalListener", Duration::ZERO, &["pod1"]);
    let listener2 = TestListener::new("listener2", Duration::ZERO, &["pod1", "pod2"]);
    let inline = || HandlerConfig::default().delivery(Delivery::Inline);
    let handle1 = informer
        .add_event_handler_with_config(Arc::clone(&listener1), inline())
        .unwrap();
    assert!(!handle1.has_synced(), "synced before run");

    let run = Running::start(&informer);
    src.upsert(pod("pod1"));
    assert!(listener1.ok().await, "events on listener1 did not arrive");
    match tokio::time::timeout(Duration::from_secs(10), handle1.synced()).await {
        Ok(true) => assert!(handle1.has_synced(), "not synced after synced() said so"),
        Ok(false) => panic!("the registration was removed"),
        Err(_) => panic!("not synced 10 s after run"),
    }

    // Hold listener2's lock so that it cannot have handled anything yet.
    let held = listener2.received.lock();
    let handle2 = informer
        .add_event_handler_with_config(Arc::clone(&listener2), inline())
        .unwrap();
    assert!(!handle2.has_synced(), "synced before handling anything");
    drop(held);

    src.upsert(pod("pod2"));
    assert!(
        listener2.ok().await,
        "events on listener2 did not arrive: {}",
        listener2.report()
    );
    assert!(handle2.has_synced(), "not synced even after handling");
    assert!(is_registered(&informer, &handle1), "handle1 is not active");
    assert!(is_registered(&informer, &handle2), "handle2 is not active");

    listener1.expect(&["pod1", "pod2"]);
    assert!(
        listener1.ok().await,
        "events on listener1 did not arrive: {}",
        listener1.report()
    );
    run.stop().await;
}

/// Every task the test spawned has ended (goleak's check in client-go).
fn assert_no_task_left() {
    let alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert_eq!(alive, 0, "{alive} tasks still alive");
}

#[tokio::test(start_paused = true)]
async fn test_shutdown__no_context() {
    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let handler = informer
        .add_event_handler(HandlerFns::new().on_add(|_: &Arc<Pod>, _| {}))
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    run.stop().await;
    // Go's deferred removal runs after the deferred stop.
    handler.remove();
    assert_no_task_left();
}

#[tokio::test(start_paused = true)]
async fn test_shutdown__no_context_later() {
    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    let handler = informer
        .add_event_handler(HandlerFns::new().on_add(|_: &Arc<Pod>, _| {}))
        .unwrap();
    handler.remove();
    run.stop().await;
    assert_no_task_left();
}

#[tokio::test(start_paused = true)]
async fn test_shutdown__no_run() {
    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    informer
        .add_event_handler(HandlerFns::new().on_add(|_: &Arc<Pod>, _| {}))
        .unwrap();
    // Neither the informer nor the handler has a task running.
    assert_no_task_left();
}

/// A `MakeWriter` into a shared buffer, for the log lines of handler panics.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Logs of this thread go to the returned buffer while the guard lives (the paused-time
/// runtime runs every task on the test's thread).
fn capture_logs() -> (Logs, tracing::subscriber::DefaultGuard) {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    (logs.clone(), tracing::subscriber::set_default(subscriber))
}

/// The handler of `TestEventPanics`: every add panics with "fake panic".
fn panicking_handler() -> HandlerFns<Pod> {
    HandlerFns::new().on_add(|_: &Arc<Pod>, _| panic!("fake panic"))
}

/// The line client-go logs for a handler panic: `"Observed a panic" panic="fake panic"`, with
/// the handler's logger name when it has one. kcache logs "event handler panicked" with the
/// handler's name and the object's key; the panic's value must be on the line too.
fn panic_lines(logs: &str, handler: Option<&str>) -> usize {
    logs.lines()
        .filter(|l| l.contains("event handler panicked") && l.contains("fake panic"))
        .filter(|l| handler.is_none_or(|h| l.contains(&format!("handler={h}"))))
        .count()
}

async fn eventually_logged(logs: &Logs, what: &str, cond: impl Fn(&str) -> bool) {
    tokio::time::timeout(WAIT, async {
        while !cond(&logs.text()) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}; the log:\n{}", logs.text()));
}

#[tokio::test(start_paused = true)]
async fn test_event_panics__simple() {
    let (logs, _guard) = capture_logs();
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let handle = informer
        .add_event_handler_with_config(
            panicking_handler(),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    eventually_logged(&logs, "the handler's panic was not logged", |text| {
        panic_lines(text, None) >= 1
    })
    .await;
    run.stop().await;
    assert!(informer.is_stopped());
    handle.remove();
}

/// Five pods, two named handlers that panic on every add: each panic is logged under its
/// handler's name. client-go also pauses a handler for a second after each panic (its
/// `processorListener.run` is restarted by `wait.Until`); kcache goes on with the next
/// notification at once, so that timing is not ported.
#[tokio::test(start_paused = true)]
async fn test_event_panics__many() {
    let (logs, _guard) = capture_logs();
    let src = FakeSource::<Pod>::new();
    let num_pods = 5;
    for i in 0..num_pods {
        src.upsert(pod(&format!("pod{}", i + 1)));
    }
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let name1 = "fake-event-handler-1";
    let name2 = "fake-event-handler-2";
    let handle1 = informer
        .add_event_handler_with_config(
            panicking_handler(),
            HandlerConfig::default()
                .name(name1)
                .delivery(Delivery::Inline),
        )
        .unwrap();
    let handle2 = informer
        .add_event_handler_with_config(
            panicking_handler(),
            HandlerConfig::default()
                .name(name2)
                .delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    eventually_logged(&logs, "not every panic was logged", |text| {
        panic_lines(text, Some(name1)) >= num_pods && panic_lines(text, Some(name2)) >= num_pods
    })
    .await;
    let text = logs.text();
    assert_eq!(panic_lines(&text, Some(name1)), num_pods, "{text}");
    assert_eq!(panic_lines(&text, Some(name2)), num_pods, "{text}");
    run.stop().await;
    assert!(informer.is_stopped());
    handle1.remove();
    handle2.remove();
}
