//! `controller_test.go`: transforming informers, deletions handed over by name, and batches of
//! deltas.

use super::*;

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
