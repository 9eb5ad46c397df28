//! `shared_informer_test.go`: indexes, resync periods and the initialization race.

use super::*;

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
