//! What handlers see: the initial list, indexes before handlers, updates, deletions, tombstones and
//! resyncs.

use super::*;

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
