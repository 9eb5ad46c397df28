//! `controller_test.go`: the examples, the hammer test, updates and a panic that propagates.

use super::*;

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
