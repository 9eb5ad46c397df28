//! `shared_informer_test.go`: watch disruptions, error handlers, transforms and adding or removing
//! handlers.

use super::*;

/// A watch closed while the store changed: after the relist, the handler without resync sees
/// the changed objects, the one with a due resync sees them all.
///
/// client-go's fake source can make a change without telling open watches (`AddDropWatch`),
/// then force a relist (`ResetWatch`). With [`FakeSource`] the same situation is built from a
/// disruption: the watch is dropped and the history compacted, so the reflector must relist,
/// and the relist is held (lists stall) until the test's `ResetWatch` point. The relist is a
/// plain LIST (the reflector's streaming list is turned off) so that the stall holds it.
#[tokio::test(start_paused = true)]
async fn test_shared_informer_watch_disruption() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    src.upsert(pod("pod2"));
    let config = informer::Config::default()
        .resync_period(Duration::from_secs(1))
        .reflector(reflector::Config::default().initial_list(kcache::reflector::InitialList::List));
    let informer = SharedIndexInformer::new(src.clone(), config);

    let no_resync = TestListener::new("listenerNoResync", Duration::ZERO, &["pod1", "pod2"]);
    no_resync.register(&informer).unwrap();
    let resync = TestListener::new("listenerResync", Duration::from_secs(1), &["pod1", "pod2"]);
    resync.register(&informer).unwrap();
    let listeners = [&no_resync, &resync];
    let run = Running::start(&informer);
    for l in listeners {
        assert!(l.ok().await, "{}", l.report());
    }

    // Add pod3 and bump pod2 where no watch sees them: only a relist will.
    src.stall_lists(true);
    src.drop_watches();
    src.upsert(pod("pod3"));
    src.upsert(pod("pod2"));
    src.compact();

    // Nobody saw any change.
    for l in listeners {
        assert!(l.ok().await, "{}", l.report());
    }
    for l in listeners {
        l.reset();
    }
    no_resync.expect(&["pod2", "pod3"]);
    resync.expect(&["pod1", "pod2", "pod3"]);

    // A resync check: listenerResync is due, listenerNoResync never is.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // ResetWatch: the relist goes through.
    src.stall_lists(false);
    for l in listeners {
        assert!(l.ok().await, "{}", l.report());
    }
    run.stop().await;
}

/// client-go's fake source cannot stream an initial list, so the reflector falls back to a LIST,
/// which fails with "Access Denied": the watch error handler is told.
///
/// kcache also tells the handler of the refused streaming list (documented: it is called with
/// every error the reflector recovers from), so the "Access Denied" error is the first one
/// after that.
#[tokio::test(start_paused = true)]
async fn test_shared_informer_error_handling() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    src.set_supports_watch_list(false);
    src.fail_lists(1000, status(403, "Forbidden", "Access Denied"));
    let (tx, mut errors) = tokio::sync::mpsc::unbounded_channel();
    let informer = SharedIndexInformer::builder(src.clone())
        .config(informer::Config::default().resync_period(Duration::from_secs(1)))
        .watch_error_handler(move |err| {
            let fallback = matches!(err, reflector::Error::WatchList { .. });
            let _ = tx.send((fallback, err.to_string()));
        })
        .build();
    let run = Running::start(&informer);
    let first = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            let (fallback, err) = errors
                .recv()
                .await
                .expect("the informer dropped its handler");
            if !fallback {
                return err;
            }
        }
    })
    .await
    .expect("timeout waiting for the error handler call");
    assert!(
        first.contains("Access Denied"),
        "expected an 'Access Denied' error, got: {first}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_shared_informer_transformer() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    src.upsert(pod("pod2"));
    let informer = SharedIndexInformer::builder(src.clone())
        .config(informer::Config::default().resync_period(Duration::from_secs(1)))
        .transform(|mut pod: Pod| {
            if let Some(name) = pod.metadata.name.as_mut() {
                *name = name.to_uppercase();
            }
            pod
        })
        .build();
    let listener = TestListener::new("listenerTransformer", Duration::ZERO, &["POD1", "POD2"]);
    // AddEventHandler: the informer's resync period.
    informer
        .add_event_handler_with_config(
            Arc::clone(&listener),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    assert!(listener.ok().await, "{}", listener.report());
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_shared_informer_remove_handler() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let handle1 = informer.add_event_handler(HandlerFns::new()).unwrap();
    let handle2 = informer.add_event_handler(HandlerFns::new()).unwrap();
    assert_eq!(handler_count(&informer), 2);

    assert!(handle2.remove(), "removing the second handler failed");
    assert_eq!(handler_count(&informer), 1);
    assert!(handle1.remove(), "removing the first handler failed");
    assert_eq!(
        handler_count(&informer),
        0,
        "handlers left after removing both"
    );
}

/// client-go lets any informer be asked to remove any registration; a foreign one is left alone.
/// A kcache registration removes itself from the informer that issued it: there is no call that
/// hands it to another informer, so that step is the type system's. The rest is as in Go.
#[tokio::test(start_paused = true)]
async fn test_shared_informer_remove_foreign_handler() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let src2 = FakeSource::<Pod>::new();
    src2.upsert(pod("pod1"));
    let informer2 = informer_with_resync(&src2, Duration::from_secs(1));

    let handle1 = informer.add_event_handler(HandlerFns::new()).unwrap();
    let handle2 = informer.add_event_handler(HandlerFns::new()).unwrap();
    assert_eq!(handler_count(&informer), 2);
    assert_eq!(handler_count(&informer2), 0);
    assert!(
        !is_registered(&informer2, &handle1),
        "handle1 registered for informer2"
    );
    assert!(
        !is_registered(&informer2, &handle2),
        "handle2 registered for informer2"
    );

    assert_eq!(handler_count(&informer), 2);
    assert_eq!(handler_count(&informer2), 0);
    assert!(
        is_registered(&informer, &handle1),
        "handle1 no longer registered"
    );
    assert!(
        is_registered(&informer, &handle2),
        "handle2 no longer registered"
    );

    assert!(handle2.remove());
    assert_eq!(handler_count(&informer), 1);
    assert!(handle1.remove());
    assert_eq!(handler_count(&informer), 0);
}

#[tokio::test(start_paused = true)]
async fn test_shared_informer_multiple_registration() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    // One handler, registered twice.
    let handler1 = Arc::new(HandlerFns::<Pod>::new());
    let reg1 = informer.add_event_handler(Arc::clone(&handler1)).unwrap();
    assert!(
        is_registered(&informer, &reg1),
        "reg1 not active after registration"
    );
    let reg2 = informer.add_event_handler(Arc::clone(&handler1)).unwrap();
    assert!(
        is_registered(&informer, &reg2),
        "reg2 not active after registration"
    );
    assert_eq!(handler_count(&informer), 2);

    assert!(reg1.remove(), "removing the duplicate registration failed");
    assert!(
        !is_registered(&informer, &reg1),
        "reg1 still active after removal"
    );
    assert!(
        is_registered(&informer, &reg2),
        "reg2 not active after removing reg1"
    );
    assert_eq!(handler_count(&informer), 1);

    assert!(reg2.remove(), "removing the second registration failed");
    assert!(
        !is_registered(&informer, &reg2),
        "reg2 still active after removal"
    );
    assert_eq!(handler_count(&informer), 0);
}

#[tokio::test(start_paused = true)]
async fn test_removing_removed_shared_informer() {
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let reg = informer.add_event_handler(HandlerFns::new()).unwrap();
    assert!(reg.remove(), "removing the registration failed");
    assert!(
        !is_registered(&informer, &reg),
        "still active after removal"
    );
    // Removing again is no error (kcache: it reports that it removed nothing).
    assert!(!reg.remove());
    assert!(
        !is_registered(&informer, &reg),
        "still active after the second removal"
    );
}

/// Many threads adding and removing handlers while the source churns; meant to find races (Go
/// runs it under -race). The workers stop when the stopped informer refuses a handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_shared_informer_handler_abuse() {
    use rand::Rng as _;

    let src = FakeSource::<Pod>::new();
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let run = Running::start(&informer);
    let done = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));

    let workers: Vec<_> = (0..100)
        .map(|_| {
            let (informer, done, errors) =
                (informer.clone(), Arc::clone(&done), Arc::clone(&errors));
            std::thread::spawn(move || {
                let mut rng = rand::rng();
                let mut handles: Vec<HandlerRegistration> = Vec::new();
                while !done.load(Ordering::SeqCst) {
                    if rng.random_range(0..2) == 0 {
                        let funcs = HandlerFns::<Pod>::new()
                            .on_add(|_, _| {})
                            .on_update(|_, _| {})
                            .on_delete(|_| {});
                        let options =
                            HandlerConfig::default().resync_period(Duration::from_secs(1));
                        match informer.add_event_handler_with_config(funcs, options) {
                            Ok(reg) => handles.push(reg),
                            // The test is over.
                            Err(Error::Stopped) => return,
                            Err(err) => {
                                errors.lock().push(format!("failed to add handler: {err}"));
                                return;
                            }
                        }
                    } else if !handles.is_empty() {
                        let idx = rng.random_range(0..handles.len());
                        handles.swap_remove(idx).remove();
                    }
                    std::thread::yield_now();
                }
            })
        })
        .collect();

    // While the workers run, churn the source.
    let mut rng = rand::rng();
    let mut objs: Vec<String> = Vec::new();
    for i in 0..10_000 {
        if objs.is_empty() {
            let name = format!("pod{i}");
            src.upsert(pod(&name));
            objs.push(name);
        }
        match rng.random_range(0..3) {
            0 => {
                let name = format!("pod{i}");
                src.upsert(pod(&name));
                objs.push(name);
            }
            1 => {
                let idx = rng.random_range(0..objs.len());
                src.upsert(pod(&objs[idx]));
            }
            _ => {
                let idx = rng.random_range(0..objs.len());
                src.delete(&key(&objs.remove(idx)));
            }
        }
        if i % 100 == 0 {
            tokio::task::yield_now().await;
        }
    }

    // Stop the informer first, to race the workers against it closing.
    run.stop().await;
    done.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().expect("a worker panicked");
    }
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
}
