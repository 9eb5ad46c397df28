//! Handlers added and removed while the informer runs, slow and coalescing handlers, transforms,
//! watch errors, health.

use super::*;

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
