//! ListAndWatch's errors, backoffs and retries (`reflector_test.go`'s ListAndWatch, backoff and 429
//! tests).

use super::*;

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
