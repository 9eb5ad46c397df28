//! client-go v0.36.5's `controller_test.go`, ported one for one (see `README.md` in this folder).
//!
//! client-go's `controller.go` has two layers. The low-level `Controller` (`New(&Config{Queue,
//! ListerWatcher, Process})`) is a reflector feeding a FIFO and a loop popping it into a user
//! `Process` function: kcache has the same parts in public, [`Reflector`] into a [`RealFifo`]
//! drained with [`Fifo::pop_batch`], and `example` composes them. `NewInformer` and the tests
//! whose `Process` is client-go's own `processDeltas`/`processDeltasInBatch` (apply to the store,
//! then notify a handler) are kcache's [`SharedIndexInformer`] with one handler, whose indexer
//! is the store; `README.md` lists each test with how it maps.
//!
//! Conventions as in `shared_informer.rs`: [`FakeSource`] is `FakeControllerSource` (it sets
//! resourceVersions itself); tests without threads of their own run in paused time with
//! `inline` handlers; client-go's `fifo.Replace` / `ResetWatch` (a relist) is a disruption of
//! the source — its watches dropped and its history compacted, with the changes made in between
//! — after which the reflector must relist.
//!
//! Each test is named after the Go test it ports (snake case; a subtest is `<test>__<subtest>`).

#![allow(non_snake_case)] // `<test>__<subtest>` names

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcache::{
    SharedIndexInformer,
    fifo::{DeltaObject, DeltaType, Fifo, QueueKind, RealFifo},
    informer::{self, DeletedObject, Delivery, EventHandler, HandlerConfig, HandlerFns},
    reflector::{self, Reflector, ReflectorStore},
    store::{ObjectKey, Reader, ThreadSafeStore, meta_namespace_key},
    testing::{Call, FakeSource},
};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Every bounded wait of these tests: generous, and fails loudly.
const WAIT: Duration = Duration::from_secs(60);

fn pod(namespace: Option<&str>, name: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.namespace = namespace.map(str::to_owned);
    pod.metadata.name = Some(name.to_owned());
    pod
}

fn key_of(pod: &Pod) -> ObjectKey {
    meta_namespace_key(pod).expect("test pods have names")
}

fn rv_of(pod: &Pod) -> String {
    pod.metadata.resource_version.clone().unwrap_or_default()
}

/// An informer running on its own task until [`stop`](Self::stop).
struct Running {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start<K>(informer: &SharedIndexInformer<K>) -> Self
    where
        K: kube_core::Resource + Clone + Send + Sync + 'static,
    {
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

async fn wait_for_sync<K>(informer: &SharedIndexInformer<K>)
where
    K: kube_core::Resource + Clone + Send + Sync + 'static,
{
    tokio::time::timeout(WAIT, informer.wait_for_sync())
        .await
        .expect("timed out waiting for cache sync");
}

/// Polls `cond` every millisecond until it holds; panics with `what` after [`WAIT`].
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    tokio::time::timeout(WAIT, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}"));
}

/// Receives `n` keys from `rx`, each within [`WAIT`], as a sorted set.
async fn receive_keys(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    n: usize,
) -> Vec<String> {
    let mut out = BTreeSet::new();
    for _ in 0..n {
        let key = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("a deletion was never reported")
            .expect("the reporting side went away");
        out.insert(key);
    }
    out.into_iter().collect()
}

/// The low-level controller: a reflector fills a non-atomic [`RealFifo`] (known objects: the
/// downstream store), resyncing every 100 ms, and `process` deletes from the source every
/// object it sees and reports every deletion it sees.
#[tokio::test(start_paused = true)]
async fn example() {
    let source = FakeSource::<Pod>::new();
    let downstream = ThreadSafeStore::<Pod>::for_resource();
    let key_func = kcache::store::meta_namespace_key_func::<Pod>();
    let fifo = RealFifo::non_atomic(key_func, Arc::new(downstream.clone()));
    let (deletions, mut deleted) = tokio::sync::mpsc::unbounded_channel();

    let cancel = CancellationToken::new();
    let config = reflector::Config::default().resync_period(Duration::from_millis(100));
    let reflector = Reflector::new(
        source.clone(),
        Arc::new(fifo.clone()) as Arc<dyn ReflectorStore<Pod>>,
        config,
    )
    .with_known_objects(Arc::new(downstream.clone()));
    let reflector_task = tokio::spawn(reflector.run(cancel.clone()));
    let process_task = tokio::spawn({
        let (fifo, source, downstream) = (fifo.clone(), source.clone(), downstream.clone());
        async move {
            while let Ok(()) = fifo
                .pop_batch(|deltas, _is_in_initial_list| {
                    for delta in deltas {
                        match delta.object {
                            DeltaObject::Object { key, obj }
                                if delta.kind != DeltaType::Deleted =>
                            {
                                // Update the downstream store, then delete the object.
                                downstream.upsert_keyed(key.clone(), obj);
                                source.delete(&key);
                            }
                            DeltaObject::Object { key, .. }
                            | DeltaObject::DeletedFinalStateUnknown { key, .. } => {
                                downstream.delete_by_key(&key);
                                let _ = deletions.send(key.to_string());
                            }
                            _ => {}
                        }
                    }
                })
                .await
            {}
        }
    });

    let test_ids = ["a-hello", "b-controller", "c-framework"];
    for name in test_ids {
        source.upsert(pod(None, name));
    }
    assert_eq!(receive_keys(&mut deleted, test_ids.len()).await, test_ids);

    cancel.cancel();
    reflector_task.await.unwrap();
    fifo.close();
    process_task.await.unwrap();
}

/// `NewInformer`: a handler that deletes whatever is added and reports whatever is deleted.
///
/// client-go's `NewInformer` resyncs every 100 ms; a kcache handler's resync period is at least
/// [`informer::MINIMUM_RESYNC_PERIOD`] (1 s). Nothing here depends on the resyncs.
#[tokio::test(start_paused = true)]
async fn example_new_informer() {
    let source = FakeSource::<Pod>::new();
    let (deletions, mut deleted) = tokio::sync::mpsc::unbounded_channel();
    let informer = SharedIndexInformer::new(
        source.clone(),
        informer::Config::default().resync_period(Duration::from_millis(100)),
    );
    let src = source.clone();
    informer
        .add_event_handler_with_config(
            HandlerFns::new()
                .on_add(move |obj: &Arc<Pod>, _| {
                    src.delete(&key_of(obj));
                })
                .on_delete(move |obj: &DeletedObject<Pod>| {
                    let key = meta_namespace_key(&**obj.object())
                        .map(|k| k.to_string())
                        .unwrap_or_else(|_| "oops something went wrong with the key".into());
                    let _ = deletions.send(key);
                }),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);

    let test_ids = ["a-hello", "b-controller", "c-framework"];
    for name in test_ids {
        source.upsert(pod(None, name));
    }
    assert_eq!(receive_keys(&mut deleted, test_ids.len()).await, test_ids);
    run.stop().await;
}

/// Three threads add, update and delete random pods while the informer runs: nothing may
/// deadlock (Go also runs it under -race). Go's random fill of the pods is random labels here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_hammer_controller() {
    use rand::{Rng as _, distr::Alphanumeric};

    let source = FakeSource::<Pod>::new();
    let output: Arc<Mutex<BTreeMap<String, Vec<&'static str>>>> = Arc::default();
    let key_errors = Arc::new(AtomicUsize::new(0));
    let record = {
        let (output, key_errors) = (Arc::clone(&output), Arc::clone(&key_errors));
        move |event: &'static str, obj: &Pod| {
            let key = match meta_namespace_key(obj) {
                Ok(key) => key.to_string(),
                Err(_) => {
                    key_errors.fetch_add(1, Ordering::SeqCst);
                    "oops something went wrong with the key".to_owned()
                }
            };
            output.lock().entry(key).or_default().push(event);
        }
    };
    let informer = SharedIndexInformer::new(
        source.clone(),
        informer::Config::default().resync_period(Duration::from_millis(100)),
    );
    let (on_add, on_update, on_delete) = (record.clone(), record.clone(), record);
    informer
        .add_event_handler(
            HandlerFns::new()
                .on_add(move |obj: &Arc<Pod>, _| on_add("add", obj))
                .on_update(move |_: &Arc<Pod>, new: &Arc<Pod>| on_update("update", new))
                .on_delete(move |obj: &DeletedObject<Pod>| on_delete("delete", obj.object())),
        )
        .unwrap();
    assert!(
        !informer.has_synced(),
        "synced before the controller started"
    );

    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    assert!(informer.has_synced(), "not synced after the initial sync");

    let threads: Vec<_> = (0..3)
        .map(|_| {
            let source = source.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rng();
                let mut current: BTreeSet<String> = BTreeSet::new();
                for _ in 0..100 {
                    let new = current.is_empty() || rng.random_range(0..3) == 1;
                    let name = if new {
                        let len = rng.random_range(1..=12);
                        (&mut rng)
                            .sample_iter(Alphanumeric)
                            .take(len)
                            .map(|c| char::from(c).to_ascii_lowercase())
                            .collect::<String>()
                    } else {
                        let names: Vec<_> = current.iter().cloned().collect();
                        names[rng.random_range(0..names.len())].clone()
                    };
                    let mut p = pod(Some("default"), &name);
                    let labels = (0..rng.random_range(0..=2))
                        .map(|i| (format!("l{i}"), rng.random_range(0..1000).to_string()))
                        .collect();
                    p.metadata.labels = Some(labels);
                    if new {
                        current.insert(name);
                        source.upsert(p);
                        continue;
                    }
                    if rng.random_range(0..2) == 0 {
                        current.insert(name);
                        source.upsert(p);
                    } else {
                        current.remove(&name);
                        source.delete(&key_of(&p));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a writer thread panicked");
    }

    // Let the informer work through what was just written, then stop it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    run.stop().await;
    assert_eq!(
        key_errors.load(Ordering::SeqCst),
        0,
        "some keys could not be computed"
    );
    eprintln!("got: {:?}", output.lock());
}

/// Updates seen by the handler go from "from" to "to" (or repeat one of them, for resyncs); the
/// handler deletes the pod once it sees its final state, and every pod is deleted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_update() {
    const FROM: &str = "from";
    const TO: &str = "to";
    let allowed: BTreeSet<(&str, &str)> = [(FROM, TO), (TO, TO), (FROM, FROM)].into();
    let make = |name: &str, check: &str, fin: bool| {
        let mut p = pod(None, name);
        let mut labels = BTreeMap::from([("check".to_owned(), check.to_owned())]);
        if fin {
            labels.insert("final".to_owned(), "true".to_owned());
        }
        p.metadata.labels = Some(labels);
        p
    };
    let label = |p: &Pod, l: &str| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|ls| ls.get(l).cloned())
            .unwrap_or_default()
    };

    let source = FakeSource::<Pod>::new();
    const THREADS: usize = 3;
    let deletes = Arc::new(AtomicUsize::new(0));
    let deleted = Arc::new(Notify::new());
    let bad = Arc::new(Mutex::new(Vec::<String>::new()));
    // The list-watcher does not support watch-list semantics: plain LIST, then watch.
    let config = informer::Config::default()
        .reflector(reflector::Config::default().initial_list(kcache::reflector::InitialList::List));
    let informer = SharedIndexInformer::new(source.clone(), config);
    let (src, bad2) = (source.clone(), Arc::clone(&bad));
    let (deletes2, deleted2) = (Arc::clone(&deletes), Arc::clone(&deleted));
    informer
        .add_event_handler(
            HandlerFns::new()
                .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
                    let (from, to) = (label(old, "check"), label(new, "check"));
                    if !allowed.contains(&(from.as_str(), to.as_str())) {
                        bad2.lock().push(format!(
                            "observed transition {from:?} -> {to:?} for {:?}",
                            new.metadata.name
                        ));
                    }
                    if label(new, "final") == "true" {
                        src.delete(&key_of(new));
                    }
                })
                .on_delete(move |_: &DeletedObject<Pod>| {
                    deletes2.fetch_add(1, Ordering::SeqCst);
                    deleted2.notify_one();
                }),
        )
        .unwrap();
    let run = Running::start(&informer);
    // Go's watchCh: wait for the reflector's first watch.
    eventually("the reflector never watched", || {
        source
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Watch { .. }))
    })
    .await;

    let writers: Vec<_> = (0..THREADS)
        .map(|i| {
            let source = source.clone();
            std::thread::spawn(move || {
                let name = format!("a-{i}-0");
                source.upsert(make(&name, FROM, false));
                source.upsert(make(&name, TO, true));
            })
        })
        .collect();
    for w in writers {
        w.join().expect("a writer thread panicked");
    }

    tokio::time::timeout(WAIT, async {
        while deletes.load(Ordering::SeqCst) < THREADS {
            deleted.notified().await;
        }
    })
    .await
    .expect("not every pod was deleted");
    run.stop().await;
    assert_eq!(
        deletes.load(Ordering::SeqCst),
        THREADS,
        "a pod was deleted twice"
    );
    assert!(bad.lock().is_empty(), "{:?}", bad.lock());
}

/// client-go's handler panic propagates out of `controller.Run` (its `HandleCrash` re-panics).
/// kcache catches a handler's panic, logs it with its message and keeps the informer running
/// (documented on `EventHandler`): the port asserts that behaviour.
#[tokio::test(start_paused = true)]
async fn test_panic_propagated() {
    let (logs, _guard) = capture_logs();
    let source = FakeSource::<Pod>::new();
    let informer = SharedIndexInformer::new(
        source.clone(),
        informer::Config::default().resync_period(Duration::from_millis(100)),
    );
    informer
        .add_event_handler_with_config(
            HandlerFns::new().on_add(|_: &Arc<Pod>, _| panic!("Just panic.")),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    source.upsert(pod(None, "test"));
    eventually("the panic was not logged", || {
        logs.text()
            .lines()
            .any(|l| l.contains("event handler panicked") && l.contains("Just panic."))
    })
    .await;
    assert!(!run.task.is_finished(), "the panic ended the informer");
    assert!(!informer.is_stopped());
    run.stop().await;
}

/// A `MakeWriter` into a shared buffer.
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

#[derive(Debug, Clone, PartialEq)]
enum Event {
    Added(Box<Pod>),
    Modified(Box<Pod>, Box<Pod>),
    Deleted(Box<Pod>),
}

/// Forwards every notification, objects included, to a channel.
fn forwarding_handler(tx: tokio::sync::mpsc::UnboundedSender<Event>) -> HandlerFns<Pod> {
    let (add, update, delete) = (tx.clone(), tx.clone(), tx);
    HandlerFns::new()
        .on_add(move |obj: &Arc<Pod>, _| {
            let _ = add.send(Event::Added(Box::new((**obj).clone())));
        })
        .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
            let _ = update.send(Event::Modified(
                Box::new((**old).clone()),
                Box::new((**new).clone()),
            ));
        })
        .on_delete(move |obj: &DeletedObject<Pod>| {
            let _ = delete.send(Event::Deleted(Box::new((**obj.object()).clone())));
        })
}

/// The transform is applied to every object before it is stored and handed to the handler.
///
/// Go's transform also clears the resourceVersion, "to simplify comparisons". Here the expected
/// objects carry the resourceVersions the source handed out instead: with the resourceVersion
/// cleared, pod2's update would have the same (empty) one on both sides, which a shared
/// informer — kcache's, and client-go's too — takes for a resync and gives only to handlers
/// whose resync is due; client-go's low-level `NewTransformingInformer` has no such filter.
#[tokio::test(start_paused = true)]
async fn test_transforming_informer() {
    let source = FakeSource::<Pod>::new();
    let make_pod = |name: &str, generation: &str| {
        let mut p = pod(Some("namespace"), name);
        p.metadata.labels = Some([("generation".to_owned(), generation.to_owned())].into());
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            hostname: Some("hostname".into()),
            subdomain: Some("subdomain".into()),
            ..Default::default()
        });
        p
    };
    let expected_pod = |name: &str, generation: &str, rv: &str| {
        let mut p = make_pod(name, generation);
        let spec = p.spec.as_mut().unwrap();
        spec.hostname = Some("new-hostname".into());
        spec.subdomain = None;
        spec.node_name = Some("nodename".into());
        p.metadata.resource_version = Some(rv.to_owned());
        p
    };

    source.upsert(make_pod("pod1", "1"));
    let pod1_rv = source.upsert(make_pod("pod1", "2"));

    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let informer = SharedIndexInformer::builder(source.clone())
        .config(informer::Config::default())
        .transform(|mut pod: Pod| {
            let spec = pod.spec.get_or_insert_with(Default::default);
            spec.hostname = Some("new-hostname".into());
            spec.subdomain = None;
            spec.node_name = Some("nodename".into());
            pod
        })
        .build();
    informer
        .add_event_handler_with_config(
            forwarding_handler(tx),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);

    let mut verify_event = async |want: Event| {
        let got = tokio::time::timeout(WAIT, events.recv())
            .await
            .unwrap_or_else(|_| panic!("failed to get the event {want:?}"))
            .unwrap();
        assert_eq!(got, want);
    };
    let verify_store = |want: &[Pod]| {
        let mut items: Vec<Pod> = informer
            .indexer()
            .list()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        items.sort_by_key(key_of);
        assert_eq!(items, want);
    };

    verify_event(Event::Added(Box::new(expected_pod("pod1", "2", &pod1_rv)))).await;
    verify_store(&[expected_pod("pod1", "2", &pod1_rv)]);

    let pod2_rv = source.upsert(make_pod("pod2", "1"));
    verify_event(Event::Added(Box::new(expected_pod("pod2", "1", &pod2_rv)))).await;
    verify_store(&[
        expected_pod("pod1", "2", &pod1_rv),
        expected_pod("pod2", "1", &pod2_rv),
    ]);

    let pod3_rv = source.upsert(make_pod("pod3", "1"));
    verify_event(Event::Added(Box::new(expected_pod("pod3", "1", &pod3_rv)))).await;

    let pod2_rv2 = source.upsert(make_pod("pod2", "2"));
    verify_event(Event::Modified(
        Box::new(expected_pod("pod2", "1", &pod2_rv)),
        Box::new(expected_pod("pod2", "2", &pod2_rv2)),
    ))
    .await;

    let deleted_rv = source.delete(&key_of(&make_pod("pod1", "2"))).unwrap();
    verify_event(Event::Deleted(Box::new(expected_pod(
        "pod1",
        "2",
        &deleted_rv,
    ))))
    .await;
    verify_store(&[
        expected_pod("pod2", "2", &pod2_rv2),
        expected_pod("pod3", "1", &pod3_rv),
    ]);
    run.stop().await;
}

/// The transform runs once per received object, never again on a stored one (resyncs included),
/// while readers go through the cache. client-go's transform returns an error for an object it
/// already transformed; a kcache transform cannot fail, so it flags it.
///
/// client-go resyncs every 5 ms; kcache checks every 5 ms, but a handler's own period is at
/// least 1 s ([`informer::MINIMUM_RESYNC_PERIOD`]), so about one resync happens in the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_transforming_informer_race() {
    const LABEL: &str = "to-be-transformed";
    let make_pod = |name: &str| {
        let mut p = pod(Some("namespace"), name);
        p.metadata.labels = Some([(LABEL.to_owned(), "true".to_owned())].into());
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            hostname: Some("hostname".into()),
            ..Default::default()
        });
        p
    };
    let label = |p: &Pod| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL).cloned())
            .unwrap_or_default()
    };

    let source = FakeSource::<Pod>::new();
    let num_objs = 5;
    for i in 0..num_objs {
        source.upsert(make_pod(&format!("pod-{i}")));
    }
    let bad_transform = Arc::new(AtomicBool::new(false));
    let bad = Arc::clone(&bad_transform);
    let informer = SharedIndexInformer::builder(source.clone())
        .config(informer::Config::default().resync_period(Duration::from_millis(5)))
        .transform(move |mut pod: Pod| {
            if label(&pod) != "true" {
                bad.store(true, Ordering::SeqCst);
                return pod;
            }
            pod.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(LABEL.to_owned(), "false".to_owned());
            pod
        })
        .build();
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    informer.add_event_handler(forwarding_handler(tx)).unwrap();
    let run = Running::start(&informer);
    for _ in 0..num_objs {
        tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("an initial event never came");
    }

    // Readers go through the cache while resyncs happen.
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..num_objs)
        .map(|i| {
            let (indexer, stop) = (informer.indexer().clone(), Arc::clone(&stop));
            std::thread::spawn(move || -> Result<(), String> {
                let key = format!("namespace/pod-{i}");
                while !stop.load(Ordering::SeqCst) {
                    let Some(pod) = indexer.get_by_key(key.as_str()) else {
                        return Err(format!("couldn't get the object for {key}"));
                    };
                    if label(&pod) != "false" {
                        return Err(format!("unexpected object: {pod:?}"));
                    }
                    std::thread::yield_now();
                }
                Ok(())
            })
        })
        .collect();
    // Let resyncs happen for some time.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    run.stop().await;
    let errors: Vec<String> = readers
        .into_iter()
        .filter_map(|r| r.join().expect("a reader panicked").err())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        !bad_transform.load(Ordering::SeqCst),
        "an object was transformed twice"
    );
}

/// client-go's `DeletionHandlingObjectToName` names a tombstone after the object it carries. A
/// kcache tombstone is [`DeletedObject::FinalStateUnknown`]; its object's name is the key.
#[test]
fn test_deletion_handling_object_to_name() {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("testname".into());
    cm.metadata.namespace = Some("testnamespace".into());
    let string_key = meta_namespace_key(&cm).unwrap();
    let deleted = DeletedObject::FinalStateUnknown {
        key: string_key.clone(),
        obj: Arc::new(cm.clone()),
    };
    let expected = meta_namespace_key(&cm).unwrap();
    let actual = meta_namespace_key(&**deleted.object()).unwrap();
    assert_eq!(expected, actual);
    assert_eq!(
        (actual.namespace(), actual.name()),
        (Some("testnamespace"), "testname")
    );
}

/// `processDeltasInBatch` with one Added delta in the initial list: the store takes it and the
/// handler hears of it. In kcache that is the informer's batch path (a [`RealFifo`] pop applied
/// as one transaction, then notified).
#[tokio::test(start_paused = true)]
async fn test_process_deltas_in_batch__all_transaction_succeeding_should_works() {
    let mut cm1 = ConfigMap::default();
    cm1.metadata.name = Some("testname1".into());
    cm1.metadata.namespace = Some("testnamespace".into());
    let source = FakeSource::<ConfigMap>::new();
    cm1.metadata.resource_version = Some(source.upsert(cm1.clone()));
    let informer = SharedIndexInformer::new(source.clone(), informer::Config::default());
    let received = Arc::new(Mutex::new(Vec::<ConfigMap>::new()));
    let (r1, r2, r3) = (
        Arc::clone(&received),
        Arc::clone(&received),
        Arc::clone(&received),
    );
    let reg = informer
        .add_event_handler_with_config(
            HandlerFns::new()
                .on_add(move |obj: &Arc<ConfigMap>, _| r1.lock().push((**obj).clone()))
                .on_update(move |_: &Arc<ConfigMap>, new: &Arc<ConfigMap>| {
                    r2.lock().push((**new).clone())
                })
                .on_delete(move |obj: &DeletedObject<ConfigMap>| {
                    r3.lock().push((**obj.object()).clone())
                }),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    assert!(
        tokio::time::timeout(WAIT, reg.synced())
            .await
            .expect("never synced")
    );
    assert_eq!(
        informer.indexer().len(),
        1,
        "the transaction was not applied"
    );
    assert_eq!(*received.lock(), [cm1]);
    run.stop().await;
}

/// One notification as Go's `eventRecorder` writes it down: the store's state for the key is
/// read when the handler runs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EventRecord {
    action: &'static str,
    key: String,
    event_rv: String,
    store_rv: String,
    is_in_initial_list: bool,
}

fn record(action: &'static str, key: &str, event_rv: &str, store_rv: &str) -> EventRecord {
    EventRecord {
        action,
        key: key.to_owned(),
        event_rv: event_rv.to_owned(),
        store_rv: store_rv.to_owned(),
        is_in_initial_list: false,
    }
}

/// Go's `eventRecorder`.
struct EventRecorder {
    history: Mutex<Vec<EventRecord>>,
    store: Reader<Pod>,
    update: Notify,
}

impl EventRecorder {
    fn new(store: Reader<Pod>) -> Arc<Self> {
        Arc::new(Self {
            history: Mutex::new(Vec::new()),
            store,
            update: Notify::new(),
        })
    }

    fn record(&self, action: &'static str, obj: &Pod, is_in_initial_list: bool) {
        let key = key_of(obj);
        let store_rv = self
            .store
            .get_by_key(&key)
            .map(|o| rv_of(&o))
            .unwrap_or_default();
        self.history.lock().push(EventRecord {
            action,
            key: key.to_string(),
            event_rv: rv_of(obj),
            store_rv,
            is_in_initial_list,
        });
        self.update.notify_one();
    }

    fn clear_history(&self) {
        self.history.lock().clear();
    }

    fn history(&self) -> Vec<EventRecord> {
        self.history.lock().clone()
    }

    /// Waits until at least `count` events are recorded, for at most `timeout`.
    async fn wait_for_event_count(&self, count: usize, timeout: Duration) -> Result<(), String> {
        tokio::time::timeout(timeout, async {
            while self.history.lock().len() < count {
                self.update.notified().await;
            }
        })
        .await
        .map_err(|_| {
            format!(
                "timed out waiting for {count} events, currently have {:?}",
                self.history()
            )
        })
    }
}

impl EventHandler<Pod> for EventRecorder {
    fn on_add(&self, obj: &Arc<Pod>, is_in_initial_list: bool) {
        self.record("add", obj, is_in_initial_list);
    }
    fn on_update(&self, _: &Arc<Pod>, new: &Arc<Pod>) {
        self.record("update", new, false);
    }
    fn on_delete(&self, obj: &DeletedObject<Pod>) {
        self.record("delete", obj.object(), false);
    }
}

/// Go's `sortDeleteEventsByKey`: deletes of different keys sorted by key, all else in order.
fn sort_delete_events_by_key(mut events: Vec<EventRecord>) -> Vec<EventRecord> {
    // Go's comparison with `i < j` leaves everything but adjacent deletes in place; sorting each
    // run of consecutive deletes by key is the same.
    let mut i = 0;
    while i < events.len() {
        let mut j = i;
        while j < events.len() && events[j].action == "delete" {
            j += 1;
        }
        events[i..j].sort_by(|a, b| a.key.cmp(&b.key));
        i = j.max(i + 1);
    }
    events
}

/// An informer with an atomic or a non-atomic queue, without resync, and an event recorder.
///
/// Its reflector lists with a plain LIST, as client-go's does in these tests (its fake source
/// cannot stream, so it falls back): a relist then hands the objects over in the source's list
/// order, which is the order Go's tests give their `Replace` (a streaming list's order is the
/// order of its temporary store, in client-go as in kcache).
async fn informer_with_recorder(
    source: &FakeSource<Pod>,
    atomic: bool,
) -> (SharedIndexInformer<Pod>, Arc<EventRecorder>, Running) {
    let queue = if atomic {
        QueueKind::RealFifo
    } else {
        QueueKind::RealFifoNonAtomic
    };
    let config = informer::Config::default()
        .queue(queue)
        .reflector(reflector::Config::default().initial_list(kcache::reflector::InitialList::List));
    let informer = SharedIndexInformer::new(source.clone(), config);
    let recorder = EventRecorder::new(informer.indexer().clone());
    informer
        .add_event_handler_with_config(
            Arc::clone(&recorder),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    (informer, recorder, run)
}

/// client-go's relist: the source's watches are dropped and its history compacted, with
/// `change` made in between, so the reflector must list again to see it.
fn relist_after(source: &FakeSource<Pod>, change: impl FnOnce()) {
    source.drop_watches();
    change();
    source.compact();
}

fn default_pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    let mut p = pod(Some("default"), name);
    if !labels.is_empty() {
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
    }
    p
}

/// Go's `testReplaceEvents`, up to and including case `last` (0-based): the cases share one
/// informer and run in order, as in Go, so a later case is set up by the earlier ones.
///
/// A case's initial objects are written to the source (Go adds them to the FIFO); its replace is
/// a relist of a source whose content is then exactly the replaced items (Go's
/// `fifo.Replace`). The source numbers resourceVersions itself, so the expected ones are those
/// it handed out. Go gives the replace's events 5 s, for a FIFO it feeds itself; here they come
/// through the reflector, whose relists wait out its backoff (client-go's: 800 ms, doubling),
/// so the wait for them is [`WAIT`].
async fn replace_events(atomic: bool, last: usize) {
    let source = FakeSource::<Pod>::new();
    let (informer, m, run) = informer_with_recorder(&source, atomic).await;
    let wait = Duration::from_secs(5);

    for case in 0..=last {
        m.clear_history();
        // (name, labels) of the initial objects, written in order.
        let initial: &[(&str, &[(&str, &str)])] = match case {
            0 => &[],
            1 => &[("pod-1", &[]), ("pod-3", &[])],
            _ => &[("pod-1", &[]), ("pod-2", &[("ver", "1")]), ("pod-3", &[])],
        };
        let mut rvs = BTreeMap::new();
        for (name, labels) in initial {
            rvs.insert(*name, source.upsert(default_pod(name, labels)));
        }
        m.wait_for_event_count(initial.len(), wait)
            .await
            .unwrap_or_else(|e| panic!("case {case}: the initial events never came: {e}"));
        m.clear_history();

        // The replace, and what it must produce.
        let mut new = BTreeMap::new();
        let expected_history: Vec<EventRecord> = match case {
            0 => {
                relist_after(&source, || {
                    new.insert("pod-1", source.upsert(default_pod("pod-1", &[])));
                });
                vec![record("add", "default/pod-1", &new["pod-1"], &new["pod-1"])]
            }
            1 => {
                relist_after(&source, || {
                    for name in ["pod-1", "pod-3"] {
                        source.delete(&ObjectKey::new(Some("default"), name));
                    }
                });
                vec![
                    record("delete", "default/pod-1", &rvs["pod-1"], ""),
                    record("delete", "default/pod-3", &rvs["pod-3"], ""),
                ]
            }
            _ => {
                relist_after(&source, || {
                    new.insert("pod-1", source.upsert(default_pod("pod-1", &[])));
                    new.insert(
                        "pod-2",
                        source.upsert(default_pod("pod-2", &[("ver", "2")])),
                    );
                    new.insert("pod-4", source.upsert(default_pod("pod-4", &[])));
                    source.delete(&ObjectKey::new(Some("default"), "pod-3"));
                });
                vec![
                    record("delete", "default/pod-3", &rvs["pod-3"], ""),
                    record("update", "default/pod-1", &new["pod-1"], &new["pod-1"]),
                    record("update", "default/pod-2", &new["pod-2"], &new["pod-2"]),
                    record("add", "default/pod-4", &new["pod-4"], &new["pod-4"]),
                ]
            }
        };
        m.wait_for_event_count(expected_history.len(), WAIT)
            .await
            .unwrap_or_else(|e| panic!("case {case}: the replace's events never came: {e}"));

        let mut items: Vec<Pod> = informer
            .indexer()
            .list()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        items.sort_by_key(key_of);
        assert_eq!(
            items,
            source.objects(),
            "case {case}: the store after the replace"
        );
        let history = sort_delete_events_by_key(m.history());
        assert_eq!(history, expected_history, "case {case} (atomic: {atomic})");
    }
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__create_with_no_initial_objects_atomic_false() {
    replace_events(false, 0).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__delete_all_objects_atomic_false() {
    replace_events(false, 1).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__create_update_delete_atomic_false() {
    replace_events(false, 2).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__create_with_no_initial_objects_atomic_true() {
    replace_events(true, 0).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__delete_all_objects_atomic_true() {
    replace_events(true, 1).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__create_update_delete_atomic_true() {
    replace_events(true, 2).await;
}

/// Go's `testResetWatch`: a change to pod-1 and a new pod-2 that no watch saw arrive with the
/// relist, neither as part of the initial list.
async fn reset_watch(atomic: bool) {
    let source = FakeSource::<Pod>::new();
    source.upsert(default_pod("pod-1", &[]));
    let (_informer, recorder, run) = informer_with_recorder(&source, atomic).await;
    let wait = Duration::from_secs(5);

    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].action, "add");
    assert_eq!(history[0].key, "default/pod-1");
    assert!(history[0].is_in_initial_list);

    recorder.clear_history();
    relist_after(&source, || {
        source.upsert(default_pod("pod-1", &[]));
        source.upsert(default_pod("pod-2", &[]));
    });
    // Through the reflector's relist backoff (see `replace_events`).
    recorder.wait_for_event_count(2, WAIT).await.unwrap();
    let history = recorder.history();
    assert_eq!(history.len(), 2, "{history:?}");
    let update = history
        .iter()
        .find(|e| e.action == "update")
        .expect("no update");
    let add = history.iter().find(|e| e.action == "add").expect("no add");
    assert_eq!(update.key, "default/pod-1");
    assert!(!update.is_in_initial_list);
    assert_eq!(add.key, "default/pod-2");
    assert!(!add.is_in_initial_list);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_reset_watch__atomic_false() {
    reset_watch(false).await;
}

#[tokio::test(start_paused = true)]
async fn test_reset_watch__atomic_true() {
    reset_watch(true).await;
}

#[tokio::test(start_paused = true)]
async fn test_store_resource_version() {
    let source = FakeSource::<Pod>::new();
    source.upsert(default_pod("pod-1", &[]));
    let (informer, recorder, run) = informer_with_recorder(&source, true).await;
    let store = informer.indexer();
    let wait = Duration::from_secs(5);

    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].action, "add");
    assert_eq!(history[0].key, "default/pod-1");
    assert!(history[0].is_in_initial_list);

    recorder.clear_history();
    // A label change bumps the resourceVersion.
    source.upsert(default_pod("pod-1", &[("foo", "bar")]));
    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(
        history[0].event_rv,
        store.last_sync_resource_version(),
        "after the update"
    );

    recorder.clear_history();
    source.delete(&ObjectKey::new(Some("default"), "pod-1"));
    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(
        history[0].event_rv,
        store.last_sync_resource_version(),
        "after the delete"
    );
    run.stop().await;
}

/// Objects from which no resourceVersion can be read leave the store's where the last relist put
/// it; the next relist moves it.
///
/// client-go's transform turns the pods into strings, which have no metadata, and keys them
/// all `pod-1`. A kcache transform keeps the object's type and the informer keys objects by
/// `namespace/name`, so here the transform clears the resourceVersion, and the key is
/// `default/pod-1`. The relist's update of pod-1 then has the same (empty) resourceVersion on
/// both sides, which kcache treats as a resync: a handler without a resync period is not
/// given it (documented), where client-go's `processDeltas` calls it. The port asserts that,
/// and waits for the store to reach the relist's resourceVersion.
#[tokio::test(start_paused = true)]
async fn test_store_resource_version_with_non_meta_transform() {
    let source = FakeSource::<Pod>::new();
    source.upsert(default_pod("pod-1", &[]));
    let informer = SharedIndexInformer::builder(source.clone())
        .config(informer::Config::default().queue(QueueKind::RealFifo))
        .transform(|mut pod: Pod| {
            pod.metadata.resource_version = None;
            pod
        })
        .build();
    let recorder = EventRecorder::new(informer.indexer().clone());
    informer
        .add_event_handler_with_config(
            Arc::clone(&recorder),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    let store = informer.indexer();
    let wait = Duration::from_secs(5);

    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].action, "add");
    assert_eq!(history[0].key, "default/pod-1");
    assert!(history[0].is_in_initial_list);

    // The store stays at the initial list's resourceVersion: the update carries none. (Go waits
    // for the handler's update; to kcache it is a resync, not given to this handler, so the
    // port waits for the store to hold the update.)
    let replace_rv = store.last_sync_resource_version();
    recorder.clear_history();
    source.upsert(default_pod("pod-1", &[("foo", "bar")]));
    eventually("the update never reached the store", || {
        labels_of(store, "default/pod-1") == Some([("foo".to_owned(), "bar".to_owned())].into())
    })
    .await;
    assert_eq!(replace_rv, store.last_sync_resource_version());
    assert_eq!(
        recorder.history(),
        [],
        "kcache delivers no resync to this handler"
    );

    recorder.clear_history();
    let mut relist_rv = String::new();
    relist_after(&source, || {
        source.upsert(default_pod("pod-1", &[("foo", "bar2")]));
    });
    relist_rv.push_str(&source.resource_version());
    eventually(
        "the store never reached the relist's resourceVersion",
        || store.last_sync_resource_version() == relist_rv,
    )
    .await;
    // kcache: the relist's same-resourceVersion update is a resync, not delivered (see above).
    tokio::task::yield_now().await;
    assert_eq!(
        recorder.history(),
        [],
        "kcache delivers no resync to this handler"
    );
    assert_eq!(
        labels_of(store, "default/pod-1"),
        Some([("foo".to_owned(), "bar2".to_owned())].into()),
        "the relist's state is stored"
    );
    run.stop().await;
}

fn labels_of(store: &Reader<Pod>, key: &str) -> Option<BTreeMap<String, String>> {
    store
        .get_by_key(key)
        .and_then(|p| p.metadata.labels.clone())
}
