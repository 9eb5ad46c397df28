//! client-go v0.36.5's `reflector_test.go`, ported one for one (see `README.md`).
//!
//! client-go's tests drive one `ListAndWatch` round, or its internals (`watch`, `handleWatch`,
//! `list`), with a scripted `ListWatch` and `watch.NewFake()`. kcache exposes only
//! `Reflector::run`, which loops over rounds until cancelled, so each port runs the reflector
//! against a scripted lister-watcher (`support::Lw`) and a rendezvous fake watch
//! (`support::fake_watch`), and ends the run where the Go round ends: by cancelling it (as the
//! Go test cancels its context), or from the watch error handler when the Go round would return
//! an error. Where client-go's round ends and the next one starts (a relist), the port looks at
//! the requests the reflector made. Time is paused tokio time: backoffs pass instantly and are
//! measured exactly.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kcache::{
    fifo::{DeltaFifo, DeltaFifoConfig, DeltaObject, DeltaType, Fifo, RealFifo},
    lister_watcher::{ObjectList, WatchEvent},
    reflector::{BackoffConfig, Config, ReflectorStore, StoreError},
    store::{KeyError, ObjectKey, ThreadSafeStore, meta_namespace_key_func},
    testing::{RecordingStore, StoreOp},
};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use support::*;

/// client-go 1.36's reflector defaults: the streaming list on (its `WatchListClient` gate;
/// kcache's default, `InitialList::Auto`, lists on a server of unknown version, see `Config::initial_list`) and no watch idle timeout (its HTTP/2
/// transport pings instead; the ports keep kcache's backstop out of the way so that paused time
/// can run freely while a watch is open).
fn base() -> Config {
    Config::default()
        .initial_list(kcache::reflector::InitialList::Stream)
        .watch_idle_timeout(Duration::ZERO)
}

/// A reflector that lists then watches: client-go's tests wrap their `ListWatch` with
/// `toListWatcherWithUnSupportedWatchListSemantics`, or build a `Reflector{}` literal.
fn list_mode() -> Config {
    base().initial_list(kcache::reflector::InitialList::List)
}

/// A backoff of exactly `d` every time (no growth, no jitter), so that gaps between requests
/// count the backoffs taken, as client-go's `fakeDelayFunc` counts its calls.
fn fixed(d: Duration) -> BackoffConfig {
    BackoffConfig::new(d, d).factor(1.0).jitter(0.0)
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(None, name)
}

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

/// TestReflectorListAndWatch.
mod reflector_list_and_watch {
    use super::*;

    struct Case {
        use_watch_list: bool,
        list_results: Vec<ObjectList<Pod>>,
        watch_events: Vec<WatchEvent<Pod>>,
        expected_list_options: Vec<Opts>,
        expected_watch_options: Vec<Opts>,
        expected_store: Vec<(&'static str, &'static str)>,
    }

    async fn run_case(case: Case) {
        let cancel = CancellationToken::new();
        let (fw, stream) = fake_watch();
        let mut watcher = Some(stream);
        let expected_watches = case.expected_watch_options.len();
        let mut list_results = case.list_results.clone().into_iter();
        let expected_lists = case.list_results.len();
        let lw = Lw::new(
            move |_| {
                list_results.next().ok_or_else(|| {
                    plain_error(&format!(
                        "expected ListerWatcher.List to only be called {expected_lists} times"
                    ))
                })
            },
            move |_| {
                watcher.take().ok_or_else(|| {
                    plain_error(&format!(
                        "expected ListerWatcher.Watch to only be called {expected_watches} times"
                    ))
                })
            },
        );
        // client-go's store here is a FIFO popped in the order keys were first queued, each
        // pop giving the latest object: kcache's DeltaFifo pops the same way.
        let fifo = Arc::new(DeltaFifo::new(
            meta_namespace_key_func::<Pod>(),
            DeltaFifoConfig::default(),
        ));
        let config = base().initial_list(if case.use_watch_list {
            kcache::reflector::InitialList::Stream
        } else {
            kcache::reflector::InitialList::List
        });
        let run = start(lw.clone(), fifo.clone(), config, &cancel, never);
        let errors = run.errors.clone();

        for event in case.watch_events {
            fw.send(event).await;
        }

        for (name, rv) in &case.expected_store {
            let latest = tokio::time::timeout(
                PATIENCE,
                fifo.pop_batch(|deltas, _| {
                    deltas
                        .last()
                        .and_then(|d| d.object().cloned())
                        .expect("a popped key has an object")
                }),
            )
            .await
            .expect("nothing to pop")
            .expect("the queue is closed");
            assert_eq!(latest.metadata.name.as_deref(), Some(*name));
            assert_eq!(latest.metadata.resource_version.as_deref(), Some(*rv));
        }

        let without_timeout = |opts: Vec<Opts>| -> Vec<Opts> {
            opts.into_iter().map(Opts::without_timeout).collect()
        };
        assert_eq!(
            without_timeout(lw.lists()),
            case.expected_list_options,
            "unexpected List calls"
        );
        assert_eq!(
            without_timeout(lw.watches()),
            case.expected_watch_options,
            "unexpected Watch calls"
        );
        run.stop().await;
        assert!(errors.lock().is_empty(), "{:?}", errors.lock());
    }

    fn expected_store() -> Vec<(&'static str, &'static str)> {
        // foo at RV 1 is superseded by RV 2 before it is popped.
        vec![
            ("foo", "2"),
            ("bar", "3"),
            ("baz", "4"),
            ("qux", "5"),
            ("zoo", "6"),
        ]
    }

    fn later_events() -> Vec<WatchEvent<Pod>> {
        vec![
            modified(pod("foo", "2")),
            added(pod("bar", "3")),
            added(pod("baz", "4")),
            added(pod("qux", "5")),
            added(pod("zoo", "6")),
        ]
    }

    #[tokio::test(start_paused = true)]
    async fn use_watch_list_enabled() {
        let mut watch_events = vec![added(pod("foo", "1")), bookmark("1", Some("true"))];
        watch_events.extend(later_events());
        run_case(Case {
            use_watch_list: true,
            list_results: vec![],
            watch_events,
            expected_list_options: vec![],
            expected_watch_options: vec![Opts {
                allow_watch_bookmarks: true,
                resource_version: String::new(),
                resource_version_match: "NotOlderThan".into(),
                send_initial_events: Some(true),
                ..Opts::default()
            }],
            expected_store: expected_store(),
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn use_watch_list_disabled() {
        run_case(Case {
            use_watch_list: false,
            list_results: vec![pod_list("1", vec![pod("foo", "1")])],
            watch_events: later_events(),
            expected_list_options: vec![Opts {
                resource_version: "0".into(),
                limit: 500,
                ..Opts::default()
            }],
            expected_watch_options: vec![Opts {
                allow_watch_bookmarks: true,
                resource_version: "1".into(),
                ..Opts::default()
            }],
            expected_store: expected_store(),
        })
        .await;
    }
}

/// TestReflectorListAndWatchWithErrors: six rounds, each by a new reflector over the same
/// store; each round's list finds the store as the previous rounds left it, and a failing
/// list or watch ends the round with that error.
#[tokio::test(start_paused = true)]
async fn reflector_list_and_watch_with_errors() {
    struct Row {
        list: Option<ObjectList<Pod>>,
        list_err: Option<&'static str>,
        events: Vec<WatchEvent<Pod>>,
        watch_err: Option<&'static str>,
    }
    let row = |list, list_err, events, watch_err| Row {
        list,
        list_err,
        events,
        watch_err,
    };
    let table = vec![
        row(
            Some(pod_list("1", vec![])),
            None,
            vec![added(pod("foo", "2")), added(pod("bar", "3"))],
            None,
        ),
        row(
            Some(pod_list("3", vec![pod("foo", "2"), pod("bar", "3")])),
            None,
            vec![deleted(pod("foo", "4")), added(pod("qux", "5"))],
            None,
        ),
        row(None, Some("a list error"), vec![], None),
        row(
            Some(pod_list("5", vec![pod("bar", "3"), pod("qux", "5")])),
            None,
            vec![],
            Some("a watch error"),
        ),
        row(
            Some(pod_list("5", vec![pod("bar", "3"), pod("qux", "5")])),
            None,
            vec![added(pod("baz", "6"))],
            None,
        ),
        row(
            Some(pod_list(
                "6",
                vec![pod("bar", "3"), pod("qux", "5"), pod("baz", "6")],
            )),
            None,
            vec![],
            None,
        ),
    ];

    let store = Arc::new(RecordingStore::<Pod>::new());
    for (line, item) in table.into_iter().enumerate() {
        if let Some(list) = &item.list {
            let current: BTreeMap<String, String> = store
                .snapshot()
                .into_iter()
                .map(|(k, rv)| (k.as_str().to_owned(), rv))
                .collect();
            let want: BTreeMap<String, String> =
                list.items.iter().map(|p| (name(p), rv(p))).collect();
            assert_eq!(current, want, "line {line}: the store before the list");
        }
        let cancel = CancellationToken::new();
        let senders: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (list, list_err) = (item.list.clone(), item.list_err);
        let mut watch_err = item.watch_err;
        let mut events = Some(item.events);
        let (c, s) = (cancel.clone(), senders.clone());
        let lw = Lw::new(
            move |_| match (&list, list_err) {
                (_, Some(e)) => Err(plain_error(e)),
                (Some(l), None) => Ok(l.clone()),
                (None, None) => Err(plain_error("no list in this row")),
            },
            move |_| {
                if let Some(e) = watch_err {
                    return Err(plain_error(e));
                }
                watch_err = Some("second watch");
                let events = events.take().unwrap_or_default();
                let (fw, stream) = fake_watch();
                let c = c.clone();
                s.lock().push(tokio::spawn(async move {
                    for e in events {
                        fw.send(e).await;
                    }
                    c.cancel();
                }));
                Ok(stream)
            },
        );
        let ends_with_error = item.list_err.is_some() || item.watch_err.is_some();
        let run = start(lw, store.clone(), list_mode(), &cancel, move |_| {
            ends_with_error
        });
        let errors = run.errors.clone();
        run.finished().await;
        let senders: Vec<_> = senders.lock().drain(..).collect();
        for sender in senders {
            tokio::time::timeout(PATIENCE, sender)
                .await
                .expect("the events were never all taken")
                .expect("the event sender panicked");
        }
        let errors = errors.lock();
        match (item.list_err, item.watch_err) {
            (Some(e), _) => {
                assert_eq!(errors.len(), 1, "line {line}: {errors:?}");
                assert_eq!(errors[0].kind, "list", "line {line}: {errors:?}");
                assert!(errors[0].text.contains(e), "line {line}: {errors:?}");
            }
            (None, Some(e)) => {
                assert_eq!(errors.len(), 1, "line {line}: {errors:?}");
                assert_eq!(errors[0].kind, "watch open", "line {line}: {errors:?}");
                assert!(errors[0].text.contains(e), "line {line}: {errors:?}");
            }
            (None, None) => assert!(errors.is_empty(), "line {line}: {errors:?}"),
        }
    }
}

/// TestReflectorListAndWatchInitConnBackoff: refused connections are retried by re-watching
/// after a backoff that doubles from 1 ms up to a 50 ms cap, jitter 1.0 (each wait in
/// `[base, 2·base]`), without a relist.
///
/// kcache waits on [`Config::reconnect_backoff`] here (recovery table, "watch open |
/// connection refused / reset"), so that is the backoff given client-go's parameters. client-go
/// bounds the total on a fake clock it steps by `2^(i+1)` ms (capped at 100 ms) per wait, which
/// gives 62 ms and 3526 ms; on paused tokio time each wait is measured exactly instead.
mod reflector_list_and_watch_init_conn_backoff {
    use super::*;

    async fn run_case(num_conn_fails: usize) {
        let max = Duration::from_millis(50);
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        let mut conn_fails = num_conn_fails;
        let lw = Lw::new(
            |_| Ok(pod_list("1", vec![])),
            move |_| {
                if conn_fails > 0 {
                    conn_fails -= 1;
                    return Err(refused());
                }
                c.cancel();
                Ok(pending())
            },
        );
        let config = list_mode().reconnect_backoff(
            // client-go resets after 100 ms without a wait; no wait is that far apart here.
            BackoffConfig::new(Duration::from_millis(1), max)
                .factor(2.0)
                .jitter(1.0)
                .reset_after(Duration::from_secs(120)),
        );
        let run = start(
            lw.clone(),
            Arc::new(RecordingStore::new()),
            config,
            &cancel,
            never,
        );
        let errors = run.errors.clone();
        run.finished().await;

        assert_eq!(lw.lists().len(), 1, "a refused watch is never a relist");
        let watches: Vec<Instant> = lw
            .calls()
            .iter()
            .filter(|c| c.watch)
            .map(|c| c.at)
            .collect();
        assert_eq!(watches.len(), num_conn_fails + 1);
        for (i, pair) in watches.windows(2).enumerate() {
            let base = Duration::from_millis(1u64 << i.min(20)).min(max);
            let waited = pair[1] - pair[0];
            assert!(
                waited >= base && waited <= 2 * base,
                "wait {i}: {waited:?} outside [{base:?}, {:?}]",
                2 * base
            );
        }
        let errors = errors.lock();
        assert_eq!(errors.len(), num_conn_fails, "{errors:?}");
        assert!(
            errors.iter().all(|e| e.kind == "watch open" && e.transport),
            "{errors:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn connection_failures_5() {
        run_case(5).await;
    }

    #[tokio::test(start_paused = true)]
    async fn connection_failures_40() {
        run_case(40).await;
    }
}

/// TestNewReflectorWithCustomBackoff: the configured backoff paces the retries of refused
/// connections (here on the streaming list, client-go's first request by default).
///
/// client-go has one backoff for every retry; kcache waits on [`Config::reconnect_backoff`]
/// when the server cannot be reached (recovery table, "streaming list | connection refused /
/// reset | reconnect backoff, stream again"), so the custom backoff goes there.
mod new_reflector_with_custom_backoff {
    use super::*;

    async fn run_case(
        reconnect: Option<BackoffConfig>,
        num_conn_fails: usize,
        lower: Duration,
        upper: Duration,
    ) {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        let mut conn_fails = num_conn_fails;
        let lw = Lw::new(
            |_| Ok(pod_list("1", vec![])),
            move |_| {
                if conn_fails > 0 {
                    conn_fails -= 1;
                    return Err(refused());
                }
                c.cancel();
                Ok(pending())
            },
        );
        let mut config = base();
        if let Some(b) = reconnect {
            config = config.reconnect_backoff(b);
        }
        let started = Instant::now();
        let run = start(
            lw.clone(),
            Arc::new(RecordingStore::new()),
            config,
            &cancel,
            never,
        );
        run.finished().await;
        let last = lw.calls().last().expect("requests were made").at;
        let elapsed = last - started;
        assert_eq!(lw.watches().len(), num_conn_fails + 1);
        assert!(
            elapsed >= lower,
            "expected lower bound {lower:?}, got {elapsed:?}"
        );
        assert!(
            elapsed <= upper,
            "expected upper bound {upper:?}, got {elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn default_backoff() {
        run_case(None, 2, Duration::ZERO, Duration::from_secs(10)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn custom_backoff() {
        // 10 + 20 + 40 + 80 + 100 = 250 ms.
        let custom = BackoffConfig::new(Duration::from_millis(10), Duration::from_millis(100))
            .factor(2.0)
            .jitter(0.0)
            .reset_after(Duration::from_secs(120));
        run_case(
            Some(custom),
            5,
            Duration::from_millis(250),
            Duration::from_millis(300),
        )
        .await;
    }
}

/// TestBackoffOnTooManyRequests: a 429 on opening the watch and a 429 ERROR event each cost
/// one backoff and a re-watch; the closed watch after them ends the round. The backoff is a
/// fixed 3 s, so each gap between requests counts one backoff (client-go counts the calls to
/// its delay function: 2).
#[tokio::test(start_paused = true)]
async fn backoff_on_too_many_requests() {
    let cancel = CancellationToken::new();
    let mut calls = 0;
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| {
            calls += 1;
            match calls {
                1 => Err(api_error(too_many_requests())),
                2 => Ok(events_then_hold(vec![WatchEvent::Error(Box::new(
                    too_many_requests(),
                ))])),
                _ => Ok(closed()),
            }
        },
    );
    let config = list_mode().backoff(fixed(Duration::from_secs(3)));
    // The closed watch ends client-go's round (a very short watch): the run ends there.
    let run = start(
        lw.clone(),
        Arc::new(RecordingStore::new()),
        config,
        &cancel,
        |e| e.kind == "very short watch",
    );
    run.finished().await;
    let calls = lw.calls();
    let kinds: Vec<bool> = calls.iter().map(|c| c.watch).collect();
    assert_eq!(kinds, [false, true, true, true], "{calls:?}");
    let gaps: Vec<Duration> = calls.windows(2).map(|p| p[1].at - p[0].at).collect();
    assert_eq!(
        gaps,
        [
            Duration::ZERO,
            Duration::from_secs(3),
            Duration::from_secs(3)
        ],
        "two backoffs: one after the 429, one after the 429 ERROR event"
    );
}

/// TestNoRelistOnTooManyRequests: four 429s on opening the watch are retried by re-watching;
/// the round has one list and five watches.
#[tokio::test(start_paused = true)]
async fn no_relist_on_too_many_requests() {
    let cancel = CancellationToken::new();
    let mut watch_calls = 0;
    let lw = Lw::new(
        |_| Ok(pod_list("1", vec![])),
        move |_| {
            watch_calls += 1;
            if watch_calls < 5 {
                return Err(api_error(too_many_requests()));
            }
            Ok(closed())
        },
    );
    let run = start(
        lw.clone(),
        Arc::new(RecordingStore::new()),
        list_mode(),
        &cancel,
        |e| e.kind == "very short watch",
    );
    run.finished().await;
    assert_eq!(
        lw.lists().len(),
        1,
        "unexpected list calls: {:?}",
        lw.calls()
    );
    assert_eq!(
        lw.watches().len(),
        5,
        "unexpected watch calls: {:?}",
        lw.calls()
    );
}

/// TestRetryInternalError: every watch gets an ERROR event 500 InternalError.
mod retry_internal_error {
    use super::*;

    /// "retries off" (client-go's default, `MaxInternalErrorRetryDuration` 0): the first
    /// ERROR event ends the round, 0 retries: the request after the first watch is a list.
    #[tokio::test(start_paused = true)]
    async fn retries_off() {
        let cancel = CancellationToken::new();
        let lw = Lw::new(
            |_| Ok(pod_list("1", vec![])),
            |_| {
                Ok(events_then_hold(vec![WatchEvent::Error(Box::new(
                    internal_error("etcdserver: no leader"),
                ))]))
            },
        );
        let run = start(
            lw.clone(),
            Arc::new(RecordingStore::new()),
            list_mode(),
            &cancel,
            never,
        );
        eventually("three requests", || lw.calls().len() >= 3).await;
        run.stop().await;
        let calls = lw.calls();
        let kinds: Vec<bool> = calls.iter().take(3).map(|c| c.watch).collect();
        assert_eq!(
            kinds,
            [false, true, false],
            "0 retries: the 500 ERROR event ends the watch and the reflector relists: {calls:?}"
        );
    }
}

/// A store whose second resync fails (client-go's `FakeCustomStore` with a `ResyncFunc`).
struct FailingResyncStore {
    inner: RecordingStore<Pod>,
    iteration: AtomicUsize,
}

impl ReflectorStore<Pod> for FailingResyncStore {
    fn add(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.add(obj)
    }
    fn update(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.update(obj)
    }
    fn delete(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.delete(obj)
    }
    fn replace(&self, list: Vec<Arc<Pod>>, resource_version: String) -> Result<(), StoreError> {
        self.inner.replace(list, resource_version)
    }
    fn resync(&self) -> Result<(), StoreError> {
        if self.iteration.fetch_add(1, Ordering::SeqCst) + 1 == 2 {
            return Err(StoreError::Key(KeyError::Custom(
                "expected resync reached".into(),
            )));
        }
        Ok(())
    }
}

/// TestReflectorResync: resyncing every 1 ms, the second resync fails and ends the round
/// after exactly 2 resyncs. The round's end in kcache: the watch is stopped, and the
/// reflector lists again; no resync runs in between.
#[tokio::test(start_paused = true)]
async fn reflector_resync() {
    let cancel = CancellationToken::new();
    let store = Arc::new(FailingResyncStore {
        inner: RecordingStore::new(),
        iteration: AtomicUsize::new(0),
    });
    let at_watch_end: Arc<Mutex<Option<usize>>> = Arc::default();
    let at_relist: Arc<Mutex<Option<usize>>> = Arc::default();
    let (s1, s2) = (store.clone(), store.clone());
    let (end, relist) = (at_watch_end.clone(), at_relist.clone());
    let mut lists = 0;
    let mut watches = 0;
    let lw = Lw::new(
        move |_| {
            lists += 1;
            if lists == 2 {
                *relist.lock() = Some(s1.iteration.load(Ordering::SeqCst));
            }
            Ok(pod_list("0", vec![]))
        },
        move |_| {
            watches += 1;
            if watches > 1 {
                return Ok(pending());
            }
            let (s, end) = (s2.clone(), end.clone());
            Ok(probe_with_drop(pending(), move || {
                *end.lock() = Some(s.iteration.load(Ordering::SeqCst));
            }))
        },
    );
    let config = list_mode().resync_period(Duration::from_millis(1));
    let run = start(lw.clone(), store.clone(), config, &cancel, never);
    let errors = run.errors.clone();
    eventually("the round to end and a relist to come", || {
        lw.lists().len() >= 2
    })
    .await;
    run.stop().await;
    assert_eq!(
        *at_watch_end.lock(),
        Some(2),
        "exactly 2 resyncs when the round ended"
    );
    assert_eq!(
        *at_relist.lock(),
        Some(2),
        "no resync between the end of the round and the relist"
    );
    assert!(
        errors
            .lock()
            .iter()
            .any(|e| e.text.contains("expected resync reached")),
        "{:?}",
        errors.lock()
    );
}

/// Ten pods, `pod-0` … `pod-9`, at resourceVersions 0 … 9.
fn ten_pods() -> Vec<Pod> {
    (0..10)
        .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
        .collect()
}

/// A watch script: the first `closing` watches close at once (a very short watch, which
/// ends client-go's round: kcache relists after a backoff, as client-go's `Run` does), the
/// next one cancels the run (client-go's test cancels its context on watch).
fn watch_closing_then_cancel(
    closing: usize,
    cancel: &CancellationToken,
) -> impl FnMut(&Opts) -> Result<kcache::lister_watcher::WatchStream<Pod>, LwError> + Send + 'static
{
    let c = cancel.clone();
    let mut n = 0;
    move |_| {
        n += 1;
        if n <= closing {
            Ok(closed())
        } else {
            c.cancel();
            Ok(pending())
        }
    }
}

/// A list answer in three pages, continued by `C1` and `C2`, at RV 10.
fn three_pages(opts: &Opts) -> Result<ObjectList<Pod>, LwError> {
    let pods = ten_pods();
    match opts.continue_token.as_str() {
        "" => Ok(page("10", "C1", pods[0..4].to_vec())),
        "C1" => Ok(page("10", "C2", pods[4..8].to_vec())),
        "C2" => Ok(page("10", "", pods[8..10].to_vec())),
        other => Err(plain_error(&format!("unrecognized continue: {other}"))),
    }
}

fn rv_continue_limit(lists: &[Opts]) -> Vec<(String, String, u32)> {
    lists
        .iter()
        .map(|o| {
            (
                o.resource_version.clone(),
                o.continue_token.clone(),
                o.limit,
            )
        })
        .collect()
}

fn rcl(rv: &str, cont: &str, limit: u32) -> (String, String, u32) {
    (rv.into(), cont.into(), limit)
}

fn replaces(store: &RecordingStore<Pod>) -> Vec<StoreOp> {
    store
        .ops()
        .into_iter()
        .filter(|o| matches!(o, StoreOp::Replace(..)))
        .collect()
}

/// TestReflectorWatchListPageSize: with a page size of 4, a list at a specific RV (10) is
/// paginated by 4 too. client-go sets the last synced RV to 10 before its one round; kcache
/// cannot, so a first list (at RV 0, also by 4) brings it to 10 and the relist is the one
/// under test.
#[tokio::test(start_paused = true)]
async fn reflector_watch_list_page_size() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let v = violations.clone();
    let lw = Lw::new(
        move |opts| {
            if opts.limit != 4 {
                v.lock()
                    .push(format!("expected list limit of 4 but got {}", opts.limit));
            }
            three_pages(opts)
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let config = list_mode().page_size(4);
    let run = start(lw.clone(), store.clone(), config, &cancel, never);
    run.finished().await;
    assert!(violations.lock().is_empty(), "{:?}", violations.lock());
    assert_eq!(
        rv_continue_limit(&lw.lists()),
        [
            rcl("0", "", 4),
            rcl("", "C1", 4),
            rcl("", "C2", 4),
            rcl("10", "", 4),
            rcl("", "C1", 4),
            rcl("", "C2", 4),
        ]
    );
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(10, "10".into()),
            StoreOp::Replace(10, "10".into())
        ]
    );
}

/// TestReflectorNotPaginatingNotConsistentReads: without a page size, a list at a specific
/// RV (10) is not paginated (so that the watch cache serves it). As above, a first list at
/// RV 0 brings the reflector to RV 10.
#[tokio::test(start_paused = true)]
async fn reflector_not_paginating_not_consistent_reads() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let lw = Lw::new(
        |_| Ok(pod_list("10", ten_pods())),
        watch_closing_then_cancel(1, &cancel),
    );
    let run = start(lw.clone(), store.clone(), list_mode(), &cancel, never);
    run.finished().await;
    let lists = rv_continue_limit(&lw.lists());
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert_eq!(lists[1], rcl("10", "", 0), "the list at RV 10 has no limit");
    assert_eq!(
        replaces(&store).last(),
        Some(&StoreOp::Replace(10, "10".into()))
    );
}

/// TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled: the first list (RV 0) came
/// back paginated, so the server pages (no watch cache): later lists page by 500 too.
#[tokio::test(start_paused = true)]
async fn reflector_paginating_non_consistent_reads_if_watch_cache_disabled() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let v = violations.clone();
    let lw = Lw::new(
        move |opts| {
            if opts.limit != 500 {
                v.lock()
                    .push(format!("expected list limit of 500 but got {}", opts.limit));
            }
            three_pages(opts)
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let run = start(lw.clone(), store.clone(), list_mode(), &cancel, never);
    run.finished().await;
    assert!(violations.lock().is_empty(), "{:?}", violations.lock());
    assert_eq!(
        rv_continue_limit(&lw.lists()),
        [
            rcl("0", "", 500),
            rcl("", "C1", 500),
            rcl("", "C2", 500),
            rcl("10", "", 500),
            rcl("", "C1", 500),
            rcl("", "C2", 500),
        ]
    );
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(10, "10".into()),
            StoreOp::Replace(10, "10".into())
        ]
    );
}

/// Eight pods, `pod-0` … `pod-7`.
fn eight_pods() -> Vec<Pod> {
    ten_pods().into_iter().take(8).collect()
}

fn list_rvs(lw: &Lw) -> Vec<String> {
    lw.lists().into_iter().map(|o| o.resource_version).collect()
}

/// TestReflectorResyncWithResourceVersion: the relist asks for the last synced RV, so that
/// a lagging server cannot take the reflector back in time.
#[tokio::test(start_paused = true)]
async fn reflector_resync_with_resource_version() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let lw = Lw::new(
        |opts| match opts.resource_version.as_str() {
            "0" => Ok(pod_list("10", eight_pods()[0..4].to_vec())),
            "10" => Ok(pod_list("11", eight_pods())),
            other => Err(plain_error(&format!(
                "unrecognized resourceVersion: {other}"
            ))),
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let run = start(lw.clone(), store.clone(), list_mode(), &cancel, never);
    run.finished().await;
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(4, "10".into()),
            StoreOp::Replace(8, "11".into())
        ]
    );
    assert_eq!(list_rvs(&lw), ["0", "10"]);
}

/// TestReflectorExpiredExactResourceVersion: a relist at an expired RV is retried at once at
/// RV "" (a consistent read).
#[tokio::test(start_paused = true)]
async fn reflector_expired_exact_resource_version() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let lw = Lw::new(
        |opts| match opts.resource_version.as_str() {
            "0" => Ok(pod_list("10", eight_pods()[0..4].to_vec())),
            "10" => Err(api_error(expired(
                "The resourceVersion for the provided watch is too old.",
            ))),
            "" => Ok(pod_list("11", eight_pods())),
            other => Err(plain_error(&format!(
                "unrecognized resourceVersion: {other}"
            ))),
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let run = start(lw.clone(), store.clone(), list_mode(), &cancel, never);
    run.finished().await;
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(4, "10".into()),
            StoreOp::Replace(8, "11".into())
        ]
    );
    assert_eq!(list_rvs(&lw), ["0", "10", ""]);
}

/// TestReflectorFullListIfExpired: with a page size of 4, the second page of the relist
/// expires; the pager falls back to one unpaginated list at the same RV.
#[tokio::test(start_paused = true)]
async fn reflector_full_list_if_expired() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let unexpected: Arc<Mutex<Vec<Opts>>> = Arc::default();
    let u = unexpected.clone();
    let lw = Lw::new(
        move |opts| {
            let pods = eight_pods();
            match (
                opts.resource_version.as_str(),
                opts.continue_token.as_str(),
                opts.limit,
            ) {
                // The initial, limited list.
                ("0", "", 4) => Ok(pod_list("10", pods[0..4].to_vec())),
                // The first page of the list at RV 10.
                ("10", "", 4) => Ok(page("11", "C1", pods[0..4].to_vec())),
                // Its second page.
                ("", "C1", 4) => Err(api_error(expired(
                    "The resourceVersion for the provided watch is too old.",
                ))),
                // The unlimited list at RV 10.
                ("10", "", 0) => Ok(pod_list("11", pods)),
                _ => {
                    u.lock().push(opts.clone());
                    Err(plain_error(&format!("unexpected list options: {opts:?}")))
                }
            }
        },
        watch_closing_then_cancel(1, &cancel),
    );
    let config = list_mode().page_size(4);
    let run = start(lw.clone(), store.clone(), config, &cancel, never);
    run.finished().await;
    assert!(unexpected.lock().is_empty(), "{:?}", unexpected.lock());
    assert_eq!(
        replaces(&store),
        [
            StoreOp::Replace(4, "10".into()),
            StoreOp::Replace(8, "11".into())
        ]
    );
    assert_eq!(list_rvs(&lw), ["0", "10", "", "10"]);
}

/// TestReflectorFullListIfTooLarge: a relist at an RV the server has not reached yet, in
/// each of the three ways servers have said so, is retried at once at RV "".
#[tokio::test(start_paused = true)]
async fn reflector_full_list_if_too_large() {
    let cancel = CancellationToken::new();
    let store = Arc::new(RecordingStore::new());
    let mut version = 30;
    let lw = Lw::new(
        move |opts| {
            let resource_version = version.to_string();
            match opts.resource_version.as_str() {
                // The initial list.
                "0" => Ok(pod_list("20", vec![])),
                // A relist after it, the cause in `details.causes[].reason`.
                "20" => Err(api_error(timeout_status(
                    "too large resource version",
                    serde_json::json!([{"reason": "ResourceVersionTooLarge"}]),
                ))),
                // Servers 1.17.0 – 1.18.5: in a cause's message.
                "30" => Err(api_error(timeout_status(
                    "too large resource version",
                    serde_json::json!([{"message": "Too large resource version"}]),
                ))),
                // Servers before 1.17.0: in the status message.
                "40" => Err(api_error(timeout_status(
                    "Too large resource version",
                    serde_json::Value::Null,
                ))),
                // The list from etcd after the error.
                "" => {
                    version += 10;
                    Ok(pod_list(&resource_version, vec![]))
                }
                other => Err(plain_error(&format!("unexpected List call: {other}"))),
            }
        },
        watch_closing_then_cancel(3, &cancel),
    );
    let run = start(lw.clone(), store, list_mode(), &cancel, never);
    run.finished().await;
    assert_eq!(list_rvs(&lw), ["0", "20", "", "30", "", "40", ""]);
}

/// TestWatchTimeout: watches ask for a random timeout in `[min, 2·min]`, with `min` at least
/// 5 minutes.
mod watch_timeout {
    use super::*;

    async fn run_case(min_watch_timeout: Duration, expected_min_timeout_seconds: u32) {
        let cancel = CancellationToken::new();
        let got: Arc<Mutex<Option<u32>>> = Arc::default();
        let (g, c) = (got.clone(), cancel.clone());
        let lw = Lw::new(
            |_| Ok(pod_list("10", vec![])),
            move |opts| {
                *g.lock() = opts.timeout_seconds;
                c.cancel();
                Ok(pending())
            },
        );
        let config = base().min_watch_timeout(min_watch_timeout);
        let run = start(lw, Arc::new(RecordingStore::new()), config, &cancel, never);
        run.finished().await;
        let got = got.lock().expect("the watch asks for a timeout");
        let (min, max) = (
            expected_min_timeout_seconds,
            2 * expected_min_timeout_seconds,
        );
        assert!(
            (min..=max).contains(&got),
            "unexpected timeoutSeconds {got}, expected in [{min}, {max}]"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout() {
        run_case(Duration::ZERO, 5 * 60).await;
    }

    #[tokio::test(start_paused = true)]
    async fn small_timeout_not_honored() {
        run_case(Duration::from_secs(1), 5 * 60).await;
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_30m() {
        run_case(Duration::from_secs(30 * 60), 30 * 60).await;
    }
}

/// A store that records every resourceVersion the watch hands it: each event's object's, and
/// each bookmark's (client-go's `storeWithRV`, a `ResourceVersionUpdater`). Objects are not
/// keyed, as client-go's key function accepts the test's nameless pods.
#[derive(Default)]
struct RvStore {
    resource_versions: Mutex<Vec<String>>,
}

impl RvStore {
    fn record(&self, obj: &Pod) -> Result<(), StoreError> {
        self.resource_versions.lock().push(rv(obj));
        Ok(())
    }
}

impl ReflectorStore<Pod> for RvStore {
    fn add(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.record(&obj)
    }
    fn update(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.record(&obj)
    }
    fn delete(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.record(&obj)
    }
    fn replace(&self, _: Vec<Arc<Pod>>, _: String) -> Result<(), StoreError> {
        Ok(())
    }
    fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        self.resource_versions
            .lock()
            .push(resource_version.to_owned());
        Ok(())
    }
}

/// TestReflectorResourceVersionUpdate: the store learns the resourceVersion of every watch
/// event, bookmarks included, in order. kcache has no `ResourceVersionUpdater`: the RVs reach
/// the store in the objects of add/update/delete and through `bookmark`.
#[tokio::test(start_paused = true)]
async fn reflector_resource_version_update() {
    let cancel = CancellationToken::new();
    let (fw, stream) = fake_watch();
    let mut first = Some(stream);
    let store = Arc::new(RvStore::default());
    let lw = Lw::new(
        |_| Ok(pod_list("10", vec![])),
        move |_| Ok(first.take().unwrap_or_else(pending)),
    );
    let run = start(lw, store.clone(), list_mode(), &cancel, never);
    let nameless = |rv: &str| pod("", rv);
    fw.send(added(nameless("10"))).await;
    fw.send(modified(nameless("20"))).await;
    fw.send(bookmark("30", None)).await;
    fw.send(deleted(nameless("40"))).await;
    run.stop().await;
    assert_eq!(*store.resource_versions.lock(), ["10", "20", "30", "40"]);
}

/// TestReflectorListExtract: after a paginated list, objects deleted from the store are
/// freed, even when another object of the same page is kept (client-go checks that the
/// store does not pin each page's backing array, with finalizers; here with `Weak`s).
///
/// client-go's fake lister answers every page with the continue token `"true"`; kcache's
/// pager refuses a repeated token as a protocol error (recovery table, "list | a `continue`
/// token repeated"), so the pages carry distinct tokens.
#[tokio::test(start_paused = true)]
async fn reflector_list_extract() {
    const ITEMS: usize = 100;
    const EXEMPT: usize = ITEMS / 4;
    const PAGES: usize = 5;
    let cancel = CancellationToken::new();
    let mut fetched = 0;
    let lw = Lw::new(
        move |_| {
            let start = fetched * ITEMS;
            let pods: Vec<Pod> = (start..start + ITEMS)
                .map(|i| {
                    let mut p = pod(&format!("pod-{i}"), "");
                    p.metadata.namespace = Some("default".into());
                    p
                })
                .collect();
            fetched += 1;
            let next = if fetched >= PAGES {
                String::new()
            } else {
                format!("true-{fetched}")
            };
            Ok(page("1", &next, pods))
        },
        watch_closing_then_cancel(0, &cancel),
    );
    let store = ThreadSafeStore::<Pod>::for_resource();
    let config = list_mode().page_size(ITEMS as u32);
    let run = start(lw, Arc::new(store.clone()), config, &cancel, never);
    run.finished().await;

    let page_key = |p: usize, i: usize| format!("default/pod-{}", p * ITEMS + i);
    for p in 0..PAGES {
        assert!(store.contains_key(page_key(p, EXEMPT).as_str()));
    }
    let firsts: Vec<std::sync::Weak<Pod>> = (0..PAGES)
        .map(|p| {
            let first = store
                .get_by_key(page_key(p, 0).as_str())
                .unwrap_or_else(|| panic!("{} should exist in the store", page_key(p, 0)));
            Arc::downgrade(&first)
        })
        .collect();
    for k in store.list_keys() {
        if (0..PAGES).any(|p| k.as_str() == page_key(p, EXEMPT)) {
            continue;
        }
        assert!(
            store.delete_by_key(k.as_str()).is_some(),
            "{k} should exist"
        );
    }
    for (p, first) in firsts.iter().enumerate() {
        assert!(
            first.upgrade().is_none(),
            "the first pod of page {p} is still alive"
        );
        assert!(store.contains_key(page_key(p, EXEMPT).as_str()));
    }
}

/// A store that checks, around the replace at `last_rv`, that the corrupt object is there
/// before and gone after, while a pre-existing one stays (client-go's `fakeStore` hooks).
struct UnsafeDeleteStore {
    inner: RecordingStore<Pod>,
    last_rv: &'static str,
    replace_invoked: AtomicUsize,
    violations: Mutex<Vec<String>>,
}

impl UnsafeDeleteStore {
    fn check(&self, name: &str, want: bool, when: &str) {
        let exists = self
            .inner
            .snapshot()
            .contains_key(&ObjectKey::new(Some("ns"), name));
        if exists != want {
            self.violations
                .lock()
                .push(format!("{when} the replace: {name} exists: {exists}"));
        }
    }
}

impl ReflectorStore<Pod> for UnsafeDeleteStore {
    fn add(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.add(obj)
    }
    fn update(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.update(obj)
    }
    fn delete(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.delete(obj)
    }
    fn replace(&self, list: Vec<Arc<Pod>>, resource_version: String) -> Result<(), StoreError> {
        let watched = resource_version == self.last_rv;
        if watched {
            self.replace_invoked.fetch_add(1, Ordering::SeqCst);
            self.check("foo", true, "before");
            self.check("foo-1", true, "before");
        }
        let result = self.inner.replace(list, resource_version);
        if watched {
            self.replace_invoked.fetch_add(1, Ordering::SeqCst);
            if let Err(e) = &result {
                self.violations
                    .lock()
                    .push(format!("the replace failed: {e}"));
            }
            self.check("foo", false, "after");
            self.check("foo-1", true, "after");
        }
        result
    }
    fn resync(&self) -> Result<(), StoreError> {
        self.inner.resync()
    }
}

/// TestReflectorReplacesStoreOnUnsafeDelete: a corrupt object is unsafe-deleted on the
/// server, whose watch then sends an ERROR event 500 `StorageReadError`; the reflector
/// relists, and the relist's replace removes the object from the store.
#[tokio::test(start_paused = true)]
async fn reflector_replaces_store_on_unsafe_delete() {
    let ns_pod = |name: &str, rv: &str| {
        let mut p = pod(name, rv);
        p.metadata.namespace = Some("ns".into());
        p
    };
    // These pods exist from the start and never change.
    let pods = vec![
        ns_pod("foo-1", "1"),
        ns_pod("foo-2", "2"),
        ns_pod("foo-3", "3"),
    ];
    let last_expected_rv = "5";
    let mut lists = vec![
        // The initial list.
        pod_list("3", pods.clone()),
        // The relist after the watch error.
        pod_list(last_expected_rv, pods.clone()),
    ]
    .into_iter();
    let corrupt = ns_pod("foo", "4");
    let mut once = Some(vec![
        WatchEvent::Added(corrupt),
        // The object became corrupt and was unsafe-deleted; the delete moved the storage's
        // RV to 5.
        WatchEvent::Error(Box::new(status(
            500,
            "StorageReadError",
            "failed to prepare current and previous objects: corrupt object has been deleted",
        ))),
    ]);
    let lw = Lw::new(
        move |_| {
            lists
                .next()
                .ok_or_else(|| plain_error("no list left in the script"))
        },
        move |_| Ok(once.take().map_or_else(pending, events_then_hold)),
    );
    let store = Arc::new(UnsafeDeleteStore {
        inner: RecordingStore::new(),
        last_rv: last_expected_rv,
        replace_invoked: AtomicUsize::new(0),
        violations: Mutex::default(),
    });
    let cancel = CancellationToken::new();
    let run = start(lw, store.clone(), list_mode(), &cancel, never);
    let handle = run.handle.clone();
    eventually("the reflector to catch up with RV 5", || {
        handle.last_sync_resource_version() == last_expected_rv
    })
    .await;
    assert_eq!(handle.last_sync_resource_version(), last_expected_rv);
    assert_eq!(
        store.replace_invoked.load(Ordering::SeqCst),
        2,
        "the replace hooks ran once each"
    );
    assert!(
        store.violations.lock().is_empty(),
        "{:?}",
        store.violations.lock()
    );
    assert_eq!(store.inner.snapshot().len(), pods.len());
    run.stop().await;
}

/// TestReflectorRespectStoreTransformer: objects of a streaming initial list and of the
/// watch after it reach the queue transformed.
///
/// client-go's transformer belongs to the queue (`RealFIFO` / `DeltaFIFO` options) and the
/// reflector applies it to its temporary store too: 2 objects twice (temporary store, then
/// `Replace`) and 1 once, 5 calls. kcache's transform belongs to the reflector
/// ([`kcache::reflector::TransformFunc`]: "applied exactly once per received object") and its
/// queues have none: 3 calls.
mod reflector_respect_store_transformer {
    use super::*;

    fn transformed(counter: &Arc<AtomicUsize>) -> kcache::reflector::TransformFunc<Pod> {
        let counter = counter.clone();
        Arc::new(move |mut p: Pod| {
            counter.fetch_add(1, Ordering::SeqCst);
            p.spec.get_or_insert_with(PodSpec::default).hostname = Some("transformed".into());
            p
        })
    }

    fn mk_pod(name: &str, rv: &str) -> Pod {
        let mut p = pod(name, rv);
        p.metadata.namespace = Some("ns".into());
        p.spec = Some(PodSpec {
            hostname: Some("test".into()),
            ..PodSpec::default()
        });
        p
    }

    /// Runs the scenario into `queue`; returns how often the transform ran.
    async fn run_case(queue: Arc<dyn ReflectorStore<Pod>>) -> usize {
        let last_expected_rv = "3";
        let events = vec![
            added(mk_pod("foo-1", "1")),
            added(mk_pod("foo-2", "2")),
            bookmark(last_expected_rv, Some("true")),
            added(mk_pod("foo-3", "3")),
        ];
        let (fw, stream) = fake_watch();
        let mut first = Some(stream);
        let lw = Lw::new(
            // Never used in streaming mode.
            |_| Err(plain_error("list call not expected in WatchList mode")),
            move |_| Ok(first.take().unwrap_or_else(pending)),
        );
        let invoked = Arc::new(AtomicUsize::new(0));
        let cancel = CancellationToken::new();
        let transform = transformed(&invoked);
        let run = start_with(lw, queue, base(), &cancel, never, |r| {
            r.with_transform(transform)
        });
        let handle = run.handle.clone();
        for e in events {
            fw.send(e).await;
        }
        eventually("the reflector to catch up with RV 3", || {
            handle.last_sync_resource_version() == last_expected_rv
        })
        .await;
        run.stop().await;
        invoked.load(Ordering::SeqCst)
    }

    fn assert_all_transformed(items: &BTreeMap<ObjectKey, Arc<Pod>>) {
        assert_eq!(items.len(), 3, "{:?}", items.keys().collect::<Vec<_>>());
        for (k, p) in items {
            assert_eq!(
                p.spec.as_ref().and_then(|s| s.hostname.as_deref()),
                Some("transformed"),
                "{k} was not transformed before it was queued"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn real_fifo() {
        let fifo = Arc::new(RealFifo::atomic(meta_namespace_key_func::<Pod>()));
        let invoked = run_case(fifo.clone()).await;
        // The queue's content: replay its deltas.
        fifo.close();
        let mut items = BTreeMap::new();
        while let Ok(deltas) = tokio::time::timeout(PATIENCE, fifo.pop_batch(|d, _| d))
            .await
            .expect("the closed queue did not drain")
        {
            for d in deltas {
                let kind = d.kind;
                match d.object {
                    DeltaObject::ReplacedAll { objects, .. } => {
                        items = objects.into_iter().collect();
                    }
                    DeltaObject::Object { key, obj } if kind != DeltaType::Deleted => {
                        items.insert(key, obj);
                    }
                    DeltaObject::Object { key, .. }
                    | DeltaObject::DeletedFinalStateUnknown { key, .. } => {
                        items.remove(&key);
                    }
                    DeltaObject::SyncAll | DeltaObject::Bookmark { .. } => {}
                }
            }
        }
        assert_all_transformed(&items);
        assert_eq!(invoked, 3, "the transform runs once per received object");
    }

    #[tokio::test(start_paused = true)]
    async fn delta_fifo() {
        let fifo = Arc::new(DeltaFifo::new(
            meta_namespace_key_func::<Pod>(),
            DeltaFifoConfig::default(),
        ));
        let invoked = run_case(fifo.clone()).await;
        // The queue's content: each key's latest object.
        fifo.close();
        let mut items = BTreeMap::new();
        while let Ok(latest) = tokio::time::timeout(
            PATIENCE,
            fifo.pop_batch(|deltas, _| {
                deltas
                    .last()
                    .filter(|d| d.kind != DeltaType::Deleted)
                    .and_then(|d| Some((d.key()?.clone(), d.object()?.clone())))
            }),
        )
        .await
        .expect("the closed queue did not drain")
        {
            if let Some((k, obj)) = latest {
                items.insert(k, obj);
            }
        }
        assert_all_transformed(&items);
        assert_eq!(invoked, 3, "the transform runs once per received object");
    }
}

/// A scripted lister-watcher, a rendezvous fake watch and a run harness (the pieces of
/// client-go's `ListWatch`, `watch.NewFake()` and `ListAndWatch` these ports need).
mod support {
    use std::{
        collections::BTreeMap,
        pin::Pin,
        sync::Arc,
        task::{Context, Poll},
        time::Duration,
    };

    use futures::{Stream, StreamExt, stream};
    use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ListMeta};
    use kcache::{
        ListerWatcher,
        lister_watcher::{
            INITIAL_EVENTS_END_ANNOTATION, ListParams, ObjectList, Status, VersionMatch,
            WatchEvent, WatchParams, WatchStream,
        },
        reflector::{Config, Error, Reflector, ReflectorHandle, ReflectorStore},
    };
    use kube_core::{
        ObjectMeta, TypeMeta,
        watch::{Bookmark, BookmarkMeta},
    };
    use parking_lot::Mutex;
    use tokio::{
        sync::{mpsc, oneshot},
        task::JoinHandle,
        time::Instant,
    };
    use tokio_stream::wrappers::ReceiverStream;
    use tokio_util::sync::CancellationToken;

    pub(crate) use kcache::lister_watcher::Error as LwError;

    /// How long (in paused, virtual time) any wait may take before the test fails.
    pub(crate) const PATIENCE: Duration = Duration::from_secs(3600);

    /// What a request asked for, in the terms of client-go's `metav1.ListOptions`.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub(crate) struct Opts {
        pub(crate) resource_version: String,
        pub(crate) resource_version_match: String,
        pub(crate) limit: u32,
        pub(crate) continue_token: String,
        pub(crate) allow_watch_bookmarks: bool,
        pub(crate) send_initial_events: Option<bool>,
        pub(crate) timeout_seconds: Option<u32>,
    }

    impl Opts {
        fn of_list(p: &ListParams) -> Self {
            Self {
                resource_version: p.resource_version.clone().unwrap_or_default(),
                resource_version_match: match p.version_match {
                    Some(VersionMatch::Exact) => "Exact".into(),
                    Some(VersionMatch::NotOlderThan) => "NotOlderThan".into(),
                    None => String::new(),
                },
                limit: p.limit.unwrap_or(0),
                continue_token: p.continue_token.clone().unwrap_or_default(),
                // kcache lists never carry a timeout (`ListParams::timeout` is a no-op).
                ..Self::default()
            }
        }

        fn of_watch(p: &WatchParams, resource_version: &str) -> Self {
            Self {
                resource_version: resource_version.into(),
                // kube-core sends resourceVersionMatch=NotOlderThan with sendInitialEvents.
                resource_version_match: if p.send_initial_events {
                    "NotOlderThan".into()
                } else {
                    String::new()
                },
                allow_watch_bookmarks: p.bookmarks,
                send_initial_events: p.send_initial_events.then_some(true),
                timeout_seconds: p.timeout,
                ..Self::default()
            }
        }

        pub(crate) fn without_timeout(self) -> Self {
            Self {
                timeout_seconds: None,
                ..self
            }
        }
    }

    /// One request to the lister-watcher.
    #[derive(Debug, Clone)]
    pub(crate) struct Call {
        pub(crate) watch: bool,
        pub(crate) opts: Opts,
        pub(crate) at: Instant,
    }

    type ListFn = Box<dyn FnMut(&Opts) -> Result<ObjectList<Pod>, LwError> + Send>;
    type WatchFn = Box<dyn FnMut(&Opts) -> Result<WatchStream<Pod>, LwError> + Send>;

    /// client-go's `ListWatch` with `ListFunc` and `WatchFunc`: every request is recorded,
    /// then answered by the script.
    #[derive(Clone)]
    pub(crate) struct Lw {
        list: Arc<Mutex<ListFn>>,
        watch: Arc<Mutex<WatchFn>>,
        calls: Arc<Mutex<Vec<Call>>>,
    }

    impl Lw {
        pub(crate) fn new(
            list: impl FnMut(&Opts) -> Result<ObjectList<Pod>, LwError> + Send + 'static,
            watch: impl FnMut(&Opts) -> Result<WatchStream<Pod>, LwError> + Send + 'static,
        ) -> Self {
            Self {
                list: Arc::new(Mutex::new(Box::new(list))),
                watch: Arc::new(Mutex::new(Box::new(watch))),
                calls: Arc::default(),
            }
        }

        pub(crate) fn calls(&self) -> Vec<Call> {
            self.calls.lock().clone()
        }

        pub(crate) fn lists(&self) -> Vec<Opts> {
            self.calls()
                .into_iter()
                .filter(|c| !c.watch)
                .map(|c| c.opts)
                .collect()
        }

        pub(crate) fn watches(&self) -> Vec<Opts> {
            self.calls()
                .into_iter()
                .filter(|c| c.watch)
                .map(|c| c.opts)
                .collect()
        }

        fn record(&self, watch: bool, opts: &Opts) {
            self.calls.lock().push(Call {
                watch,
                opts: opts.clone(),
                at: Instant::now(),
            });
        }
    }

    impl ListerWatcher<Pod> for Lw {
        async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, LwError> {
            let opts = Opts::of_list(params);
            self.record(false, &opts);
            let mut f = self.list.lock();
            (*f)(&opts)
        }

        async fn watch(
            &self,
            params: &WatchParams,
            resource_version: &str,
        ) -> Result<WatchStream<Pod>, LwError> {
            let opts = Opts::of_watch(params, resource_version);
            self.record(true, &opts);
            let mut f = self.watch.lock();
            (*f)(&opts)
        }

        fn describe(&self) -> String {
            "pods".into()
        }
    }

    /// The producer side of a fake watch. As client-go's `FakeWatcher` is unbuffered, a send
    /// returns once the reflector has taken the event (and, the runtime being single-threaded,
    /// handled it); dropping the producer closes the watch.
    pub(crate) struct FakeWatch {
        tx: mpsc::Sender<(WatchEvent<Pod>, oneshot::Sender<()>)>,
    }

    pub(crate) fn fake_watch() -> (FakeWatch, WatchStream<Pod>) {
        let (tx, rx) = mpsc::channel(1);
        let stream = ReceiverStream::new(rx).map(|(event, taken): (_, oneshot::Sender<()>)| {
            let _ = taken.send(());
            Ok(event)
        });
        (FakeWatch { tx }, stream.boxed())
    }

    impl FakeWatch {
        /// Hands `event` to the reader and waits until it took it.
        pub(crate) async fn send(&self, event: WatchEvent<Pod>) {
            let taken = tokio::time::timeout(PATIENCE, async {
                let (ack, taken) = oneshot::channel();
                self.tx.send((event, ack)).await.is_ok() && taken.await.is_ok()
            })
            .await;
            assert!(
                matches!(taken, Ok(true)),
                "the reflector did not take the watch event (the watch is stopped or never read)"
            );
        }

        /// Whether the reader stopped the watch (dropped the stream).
        pub(crate) fn is_stopped(&self) -> bool {
            self.tx.is_closed()
        }

        /// Waits until the reader stopped the watch.
        pub(crate) async fn stopped(&self) {
            tokio::time::timeout(PATIENCE, self.tx.closed())
                .await
                .expect("the reflector never stopped the watch");
        }
    }

    /// What happened to a probed stream: `"ResultChan"` when first read, `"Stop"` when
    /// dropped (client-go's `MockWatcher` call log).
    pub(crate) type ProbeLog = Arc<Mutex<Vec<&'static str>>>;

    struct Probe {
        inner: WatchStream<Pod>,
        log: ProbeLog,
        read: bool,
        on_drop: Option<Box<dyn FnOnce() + Send>>,
    }

    impl Stream for Probe {
        type Item = Result<WatchEvent<Pod>, LwError>;

        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            if !self.read {
                self.read = true;
                self.log.lock().push("ResultChan");
            }
            self.inner.poll_next_unpin(cx)
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.log.lock().push("Stop");
            if let Some(f) = self.on_drop.take() {
                f();
            }
        }
    }

    pub(crate) fn probe(inner: WatchStream<Pod>) -> (ProbeLog, WatchStream<Pod>) {
        let log = ProbeLog::default();
        let stream = Probe {
            inner,
            log: log.clone(),
            read: false,
            on_drop: None,
        };
        (log, stream.boxed())
    }

    /// `inner`, calling `on_drop` when the reflector stops it.
    pub(crate) fn probe_with_drop(
        inner: WatchStream<Pod>,
        on_drop: impl FnOnce() + Send + 'static,
    ) -> WatchStream<Pod> {
        Probe {
            inner,
            log: ProbeLog::default(),
            read: false,
            on_drop: Some(Box::new(on_drop)),
        }
        .boxed()
    }

    /// A watch that never sends anything and never ends.
    pub(crate) fn pending() -> WatchStream<Pod> {
        stream::pending().boxed()
    }

    /// A watch that is already closed (client-go: a stopped `FakeWatcher`).
    pub(crate) fn closed() -> WatchStream<Pod> {
        stream::empty().boxed()
    }

    /// A watch that sends `events` at once, then stays open.
    pub(crate) fn events_then_hold(events: Vec<WatchEvent<Pod>>) -> WatchStream<Pod> {
        stream::iter(events.into_iter().map(Ok))
            .chain(stream::pending())
            .boxed()
    }

    /// A pod named `name` (no name if empty) at `rv` (none if empty).
    pub(crate) fn pod(name: &str, rv: &str) -> Pod {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Pod {
            metadata: ObjectMeta {
                name: non_empty(name),
                resource_version: non_empty(rv),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    pub(crate) fn name(p: &Pod) -> String {
        p.metadata.name.clone().unwrap_or_default()
    }

    pub(crate) fn rv(p: &Pod) -> String {
        p.metadata.resource_version.clone().unwrap_or_default()
    }

    /// A page of a list at `rv`, continued by `continue_token` unless it is empty.
    pub(crate) fn page(rv: &str, continue_token: &str, items: Vec<Pod>) -> ObjectList<Pod> {
        ObjectList {
            types: TypeMeta {
                api_version: "v1".into(),
                kind: "PodList".into(),
            },
            metadata: ListMeta {
                resource_version: Some(rv.into()),
                continue_: (!continue_token.is_empty()).then(|| continue_token.into()),
                ..ListMeta::default()
            },
            items,
        }
    }

    pub(crate) fn pod_list(rv: &str, items: Vec<Pod>) -> ObjectList<Pod> {
        page(rv, "", items)
    }

    pub(crate) fn added(p: Pod) -> WatchEvent<Pod> {
        WatchEvent::Added(p)
    }

    pub(crate) fn modified(p: Pod) -> WatchEvent<Pod> {
        WatchEvent::Modified(p)
    }

    pub(crate) fn deleted(p: Pod) -> WatchEvent<Pod> {
        WatchEvent::Deleted(p)
    }

    /// A BOOKMARK at `rv`, with the `k8s.io/initial-events-end` annotation set to the value
    /// given, if any.
    pub(crate) fn bookmark(rv: &str, initial_events_end: Option<&str>) -> WatchEvent<Pod> {
        let annotations: BTreeMap<String, String> = initial_events_end
            .map(|v| (INITIAL_EVENTS_END_ANNOTATION.to_owned(), v.to_owned()))
            .into_iter()
            .collect();
        WatchEvent::Bookmark(Bookmark {
            types: TypeMeta {
                api_version: "v1".into(),
                kind: "Pod".into(),
            },
            metadata: BookmarkMeta {
                resource_version: rv.into(),
                annotations,
            },
        })
    }

    pub(crate) fn status(code: u16, reason: &str, message: &str) -> Status {
        kcache::testing::status(code, reason, message)
    }

    fn status_with_details(
        code: u16,
        reason: &str,
        message: &str,
        details: serde_json::Value,
    ) -> Status {
        serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code, "details": details,
        }))
        .expect("a Status literal always deserializes")
    }

    /// `apierrors.NewTooManyRequests("too many requests", 1)`.
    pub(crate) fn too_many_requests() -> Status {
        status_with_details(
            429,
            "TooManyRequests",
            "Too many requests: too many requests",
            serde_json::json!({"retryAfterSeconds": 1}),
        )
    }

    /// `apierrors.NewInternalError(errors.New(cause))`.
    pub(crate) fn internal_error(cause: &str) -> Status {
        status_with_details(
            500,
            "InternalError",
            &format!("Internal error occurred: {cause}"),
            serde_json::json!({"causes": [{"message": cause}]}),
        )
    }

    /// `apierrors.NewResourceExpired(message)`.
    pub(crate) fn expired(message: &str) -> Status {
        status(410, "Expired", message)
    }

    /// `apierrors.NewTimeoutError(message, 1)`, with `causes` in its details unless null.
    pub(crate) fn timeout_status(message: &str, causes: serde_json::Value) -> Status {
        let mut details = serde_json::json!({"retryAfterSeconds": 1});
        if !causes.is_null() {
            details["causes"] = causes;
        }
        status_with_details(504, "Timeout", &format!("Timeout: {message}"), details)
    }

    pub(crate) fn api_error(status: Status) -> LwError {
        LwError::api(status, None)
    }

    /// An error that is neither a server `Status` nor a transport failure (client-go's
    /// `fmt.Errorf` in a `ListFunc` / `WatchFunc`).
    pub(crate) fn plain_error(message: &str) -> LwError {
        LwError::protocol(message)
    }

    /// client-go's `syscall.ECONNREFUSED`.
    pub(crate) fn refused() -> LwError {
        LwError::transport("connection refused")
    }

    /// An error the reflector reported to its watch error handler.
    #[derive(Debug, Clone)]
    pub(crate) struct Reported {
        pub(crate) kind: &'static str,
        pub(crate) text: String,
        pub(crate) transport: bool,
    }

    impl Reported {
        fn of(e: &Error) -> Self {
            let kind = match e {
                Error::List { .. } => "list",
                Error::WatchOpen { .. } => "watch open",
                Error::WatchList { .. } => "streaming list",
                Error::WatchStream { .. } => "watch stream",
                Error::VeryShortWatch { .. } => "very short watch",
                Error::ShortWatch { .. } => "short watch",
                Error::StreamingListEndedEarly { .. } => "streaming list ended early",
                Error::Store { .. } => "store",
                _ => "other",
            };
            Self {
                kind,
                text: e.to_string(),
                transport: e.lister_watcher_error().is_some_and(LwError::is_transport),
            }
        }
    }

    /// Never ends the run on an error.
    pub(crate) fn never(_: &Reported) -> bool {
        false
    }

    /// A running reflector.
    pub(crate) struct Running {
        pub(crate) handle: ReflectorHandle,
        pub(crate) errors: Arc<Mutex<Vec<Reported>>>,
        cancel: CancellationToken,
        task: JoinHandle<()>,
    }

    impl Running {
        /// Waits until the reflector stopped by itself (it was cancelled from the script).
        pub(crate) async fn finished(self) {
            tokio::time::timeout(PATIENCE, self.task)
                .await
                .expect("the reflector did not stop")
                .expect("the reflector task panicked");
        }

        /// Cancels the reflector and waits until it stopped.
        pub(crate) async fn stop(self) {
            self.cancel.cancel();
            self.finished().await;
        }
    }

    /// Runs a reflector over `lw` into `store`; errors are recorded, and the run is cancelled
    /// from the error handler when `stop_on` says so (where client-go's round returns it).
    pub(crate) fn start(
        lw: Lw,
        store: Arc<dyn ReflectorStore<Pod>>,
        config: Config,
        cancel: &CancellationToken,
        stop_on: impl Fn(&Reported) -> bool + Send + Sync + 'static,
    ) -> Running {
        start_with(lw, store, config, cancel, stop_on, |r| r)
    }

    pub(crate) fn start_with(
        lw: Lw,
        store: Arc<dyn ReflectorStore<Pod>>,
        config: Config,
        cancel: &CancellationToken,
        stop_on: impl Fn(&Reported) -> bool + Send + Sync + 'static,
        customize: impl FnOnce(Reflector<Pod, Lw>) -> Reflector<Pod, Lw>,
    ) -> Running {
        let errors: Arc<Mutex<Vec<Reported>>> = Arc::default();
        let (errs, c) = (errors.clone(), cancel.clone());
        let reflector =
            Reflector::new(lw, store, config).with_error_handler(Arc::new(move |e: &Error| {
                let reported = Reported::of(e);
                let stop = stop_on(&reported);
                errs.lock().push(reported);
                if stop {
                    c.cancel();
                }
            }));
        let reflector = customize(reflector);
        let handle = reflector.handle();
        Running {
            handle,
            errors,
            cancel: cancel.clone(),
            task: tokio::spawn(reflector.run(cancel.clone())),
        }
    }

    /// Waits (in virtual time) until `cond` holds.
    pub(crate) async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
        let waited = tokio::time::timeout(PATIENCE, async {
            while !cond() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "timed out waiting for {what}");
    }
}
