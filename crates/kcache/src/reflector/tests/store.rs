//! What reaches the store: transforms, resyncs, nameless and undecodable objects, compaction,
//! cancellation and reused objects.

use super::*;

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
