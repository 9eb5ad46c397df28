//! `shared_informer_test.go`: the informer's state, handlers added or removed while it runs or
//! after it stopped, and shutdown.

use super::*;

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
