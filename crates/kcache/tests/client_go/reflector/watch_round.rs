//! The watch round: how it starts, stops and hands events to the store (`reflector_test.go`'s watch
//! and handleWatch tests).

use super::*;

/// TestCloseWatchChannelOnError: an ERROR event ends the watch, which the reflector stops.
#[tokio::test(start_paused = true)]
async fn close_watch_channel_on_error() {
    let cancel = CancellationToken::new();
    let (fw, stream) = fake_watch();
    let mut first = Some(stream);
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| Ok(first.take().unwrap_or_else(pending)),
    );
    let run = start(lw, Arc::new(RecordingStore::new()), base(), &cancel, never);
    // client-go puts a Pod in the ERROR event; a kcache ERROR event carries a Status, so the
    // unexpected object is a Status without code or reason.
    fw.send(WatchEvent::Error(Box::new(status(
        0,
        "",
        "unexpected object: a Pod named bar",
    ))))
    .await;
    fw.stopped().await;
    run.stop().await;
}

/// TestRunUntil: cancelling a running reflector stops its watch and makes `run` return.
#[tokio::test(start_paused = true)]
async fn run_until() {
    let cancel = CancellationToken::new();
    let (fw, stream) = fake_watch();
    let mut first = Some(stream);
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| Ok(first.take().unwrap_or_else(pending)),
    );
    let run = start(lw, Arc::new(RecordingStore::new()), base(), &cancel, never);
    // Delivered synchronously: the reflector is inside its watch handler.
    fw.send(added(pod("bar", ""))).await;
    cancel.cancel();
    run.finished().await;
    assert!(
        fw.is_stopped(),
        "the watch was left open after cancellation"
    );
}

/// TestReflectorResyncChan: with a resync period of 1 ms, a resync comes.
#[tokio::test(start_paused = true)]
async fn reflector_resync_chan() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let lw = Lw::new(|_| Ok(pod_list("1", vec![])), |_| Ok(pending()));
    let config = list_mode().resync_period(Duration::from_millis(1));
    let run = start(lw, store.clone(), config, &cancel, never);
    tokio::time::timeout(
        PATIENCE,
        store.wait_for(|ops| ops.contains(&StoreOp::Resync)),
    )
    .await
    .expect("the resync never came");
    run.stop().await;
}

/// TestReflectorWatchStoppedBefore: cancelled before it starts, the reflector neither lists
/// nor watches.
#[tokio::test(start_paused = true)]
async fn reflector_watch_stopped_before() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let lw = Lw::new(
        |_| Err(plain_error("ListFunc called unexpectedly")),
        |_| Err(plain_error("WatchFunc called unexpectedly")),
    );
    let run = start(
        lw.clone(),
        Arc::new(RecordingStore::new()),
        base(),
        &cancel,
        never,
    );
    let errors = run.errors.clone();
    run.finished().await;
    assert!(lw.calls().is_empty(), "{:?}", lw.calls());
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
}

/// TestReflectorWatchStoppedAfter: cancelled 10 ms after its watch started, the reflector
/// stops that watch and returns without error. client-go calls `watch` directly; kcache's
/// first request in streaming mode is that watch, and no list comes before it.
#[tokio::test(start_paused = true)]
async fn reflector_watch_stopped_after() {
    let cancel = CancellationToken::new();
    let watchers: Arc<Mutex<Vec<FakeWatch>>> = Arc::default();
    let (w, c) = (watchers.clone(), cancel.clone());
    let lw = Lw::new(
        |_| Err(plain_error("ListFunc called unexpectedly")),
        move |_| {
            let c = c.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                c.cancel();
            });
            // A fake watch that never sends anything.
            let (fw, stream) = fake_watch();
            w.lock().push(fw);
            Ok(stream)
        },
    );
    let run = start(
        lw.clone(),
        Arc::new(RecordingStore::new()),
        base(),
        &cancel,
        never,
    );
    let errors = run.errors.clone();
    run.finished().await;
    assert!(lw.lists().is_empty(), "{:?}", lw.calls());
    let watchers = watchers.lock();
    assert_eq!(watchers.len(), 1);
    assert!(watchers[0].is_stopped());
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
}

/// TestReflectorHandleWatchStoppedBefore: the context is cancelled before the watch handler
/// starts; the handler returns "stop requested" (no error) and stops the watch once.
///
/// client-go's `ResultChan()` is a getter that the handler calls before anything else; its
/// Rust analogue is a first read of the stream, which kcache skips once it is cancelled: the
/// log is `["Stop"]` or `["ResultChan", "Stop"]`, with one `Stop` either way.
#[tokio::test(start_paused = true)]
async fn reflector_handle_watch_stopped_before() {
    let cancel = CancellationToken::new();
    let logs: Arc<Mutex<Vec<ProbeLog>>> = Arc::default();
    let (l, c) = (logs.clone(), cancel.clone());
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| {
            c.cancel();
            let (log, stream) = probe(pending());
            l.lock().push(log);
            Ok(stream)
        },
    );
    let run = start(
        lw,
        Arc::new(RecordingStore::new()),
        list_mode(),
        &cancel,
        never,
    );
    let errors = run.errors.clone();
    run.finished().await;
    let logs = logs.lock();
    assert_eq!(logs.len(), 1);
    let log = logs[0].lock().clone();
    assert!(
        matches!(log.as_slice(), ["Stop"] | ["ResultChan", "Stop"]),
        "stopped exactly once, nothing read after the cancellation: {log:?}"
    );
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
}

/// TestReflectorHandleWatchStoppedAfter: cancelled 10 ms into the watch handler, it returns
/// "stop requested" and stops the watch after having read from it.
#[tokio::test(start_paused = true)]
async fn reflector_handle_watch_stopped_after() {
    let cancel = CancellationToken::new();
    let logs: Arc<Mutex<Vec<ProbeLog>>> = Arc::default();
    let (l, c) = (logs.clone(), cancel.clone());
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| {
            let c = c.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                c.cancel();
            });
            let (log, stream) = probe(pending());
            l.lock().push(log);
            Ok(stream)
        },
    );
    let run = start(
        lw,
        Arc::new(RecordingStore::new()),
        list_mode(),
        &cancel,
        never,
    );
    let errors = run.errors.clone();
    run.finished().await;
    let logs = logs.lock();
    assert_eq!(logs.len(), 1);
    assert_eq!(*logs[0].lock(), ["ResultChan", "Stop"]);
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
}

/// TestReflectorHandleWatchResultChanClosedBefore: a watch already closed when the handler
/// starts is a very short watch.
#[tokio::test(start_paused = true)]
async fn reflector_handle_watch_result_chan_closed_before() {
    let cancel = CancellationToken::new();
    let logs: Arc<Mutex<Vec<ProbeLog>>> = Arc::default();
    let l = logs.clone();
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| {
            let (log, stream) = probe(closed());
            l.lock().push(log);
            Ok(stream)
        },
    );
    // client-go's handler returns the error; here it reaches the error handler, which ends
    // the run there.
    let run = start(
        lw,
        Arc::new(RecordingStore::new()),
        list_mode(),
        &cancel,
        |e| e.kind == "very short watch",
    );
    let errors = run.errors.clone();
    run.finished().await;
    let errors = errors.lock();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind, "very short watch", "{errors:?}");
    let logs = logs.lock();
    assert_eq!(logs.len(), 1);
    assert_eq!(*logs[0].lock(), ["ResultChan", "Stop"]);
}

/// TestReflectorHandleWatchResultChanClosedAfter: a watch closed by the server 10 ms after it
/// started, without events, is a very short watch.
#[tokio::test(start_paused = true)]
async fn reflector_handle_watch_result_chan_closed_after() {
    let cancel = CancellationToken::new();
    let logs: Arc<Mutex<Vec<ProbeLog>>> = Arc::default();
    let l = logs.clone();
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| {
            let (fw, stream) = fake_watch();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(fw);
            });
            let (log, stream) = probe(stream);
            l.lock().push(log);
            Ok(stream)
        },
    );
    let run = start(
        lw,
        Arc::new(RecordingStore::new()),
        list_mode(),
        &cancel,
        |e| e.kind == "very short watch",
    );
    let errors = run.errors.clone();
    run.finished().await;
    let errors = errors.lock();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind, "very short watch", "{errors:?}");
    let logs = logs.lock();
    assert_eq!(logs.len(), 1);
    assert_eq!(*logs[0].lock(), ["ResultChan", "Stop"]);
}

/// TestReflectorWatchHandler: watch events reach the store and the last one's
/// resourceVersion becomes the last synced one.
///
/// client-go first sends an ADDED event carrying a Service, which its handler drops for not
/// being a Pod; a kcache watch stream is typed (`WatchStream<Pod>`) and cannot carry it, so
/// that event is left out (and "rejected" is checked absent all the same). The store starts
/// with foo and bar, as client-go's does, through the list that precedes the watch.
#[tokio::test(start_paused = true)]
async fn reflector_watch_handler() {
    let cancel = CancellationToken::new();
    let (fw, stream) = fake_watch();
    let mut first = Some(stream);
    let store = Arc::new(RecordingStore::new());
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![pod("foo", ""), pod("bar", "")])),
        move |_| Ok(first.take().unwrap_or_else(pending)),
    );
    let run = start(lw, store.clone(), list_mode(), &cancel, never);
    let handle = run.handle.clone();
    fw.send(deleted(pod("foo", ""))).await;
    fw.send(modified(pod("bar", "55"))).await;
    fw.send(added(pod("baz", "32"))).await;
    run.stop().await;

    let snapshot = store.snapshot();
    let table = [
        ("foo", None),
        ("rejected", None),
        ("bar", Some("55")),
        ("baz", Some("32")),
    ];
    for (name, want) in table {
        assert_eq!(
            snapshot.get(&key(name)).map(String::as_str),
            want,
            "{name}: {snapshot:?}"
        );
    }
    assert_eq!(handle.last_sync_resource_version(), "32");
}

/// TestReflectorStopWatch: a watch handler whose context is already cancelled returns "stop
/// requested", which is no error.
#[tokio::test(start_paused = true)]
async fn reflector_stop_watch() {
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let watchers: Arc<Mutex<Vec<FakeWatch>>> = Arc::default();
    let w = watchers.clone();
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| {
            c.cancel();
            let (fw, stream) = fake_watch();
            w.lock().push(fw);
            Ok(stream)
        },
    );
    let run = start(
        lw,
        Arc::new(RecordingStore::new()),
        list_mode(),
        &cancel,
        never,
    );
    let errors = run.errors.clone();
    run.finished().await;
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
    assert!(watchers.lock().iter().all(FakeWatch::is_stopped));
}
