//! Failing reconciles: retry limits, timeouts, custom rate limiters and error policies, terminal
//! errors, panics, and a controller whose informer is not running.

use super::*;

#[tokio::test(start_paused = true)]
async fn max_retries_gives_up_after_n_failed_retries() {
    let s = setup();
    s.src.upsert(cm("a"));
    let attempts = Attempts::new();
    let controller = Controller::new(s.informer.clone(), Config::default().max_retries(2));
    let metrics = controller.metrics().clone();
    let log = attempts.log();
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().push(tokio::time::Instant::now());
                Err::<Action, _>("always fails".to_owned())
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| attempts.count() == 3).await;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(
        attempts.count(),
        3,
        "the first try and 2 retries, then nothing"
    );
    assert_eq!(metrics.gave_up(), 1);
    assert_eq!(metrics.retried(), 2);
    assert_eq!(metrics.failed(), 3);
    // The next change queues the key afresh.
    s.src.upsert(cm("a"));
    eventually(|| attempts.count() == 6).await;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!((attempts.count(), metrics.gave_up()), (6, 2));
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn reconcile_timeout_cancels_the_reconcile_and_retries_it_with_backoff() {
    let s = setup();
    s.src.upsert(cm("a"));
    let attempts = Attempts::new();
    let dropped = Arc::new(AtomicUsize::new(0));
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let controller = Controller::new(
        s.informer.clone(),
        Config::default().reconcile_timeout(Duration::from_secs(1)),
    );
    let metrics = controller.metrics().clone();
    let (log, d) = (attempts.log(), Arc::clone(&dropped));
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let (log, d) = (Arc::clone(&log), Arc::clone(&d));
            async move {
                let first = {
                    let mut log = log.lock();
                    log.push(tokio::time::Instant::now());
                    log.len() == 1
                };
                if first {
                    let _guard = OnDrop(d);
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Ok::<_, String>(Action::Done)
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| attempts.count() == 2).await;
    let gap = attempts.gaps()[0];
    assert!(
        gap >= Duration::from_secs(1) && gap < Duration::from_secs(2),
        "{gap:?}"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the slow reconcile was cancelled"
    );
    assert_eq!((metrics.timed_out(), metrics.succeeded()), (1, 1));
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_custom_rate_limiter_paces_the_retries() {
    use crate::workqueue::ItemExponentialFailureRateLimiter;
    let s = setup();
    s.src.upsert(cm("a"));
    let attempts = Attempts::new();
    let controller = Controller::new(
        s.informer.clone(),
        Config::default().rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_secs(2),
            Duration::from_secs(5),
        )),
    );
    let log = attempts.log();
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().push(tokio::time::Instant::now());
                Err::<Action, _>("fails")
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| attempts.count() == 4).await;
    let gaps = attempts.gaps();
    let secs: Vec<u64> = gaps.iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [2, 4, 5], "2 s doubling, capped at 5 s: {gaps:?}");
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_error_policy_can_requeue_after_a_delay_and_give_up() {
    let s = setup();
    s.src.upsert(cm("a"));
    let attempts = Attempts::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let policy_log = Arc::clone(&seen);
    let controller = Controller::new(s.informer.clone(), Config::default()).with_error_policy(
        move |key: &ObjectKey, err: &String, retries: u32| {
            policy_log.lock().push(format!("{key} {err} {retries}"));
            if retries < 2 {
                ErrorAction::RequeueAfter(Duration::from_secs(7))
            } else {
                ErrorAction::GiveUp
            }
        },
    );
    let metrics = controller.metrics().clone();
    let log = attempts.log();
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().push(tokio::time::Instant::now());
                Err::<Action, _>("boom".to_owned())
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| attempts.count() == 3).await;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(attempts.count(), 3);
    let secs: Vec<u64> = attempts.gaps().iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [7, 7]);
    assert_eq!(*seen.lock(), ["ns/a boom 0", "ns/a boom 1", "ns/a boom 2"]);
    assert_eq!((metrics.retried(), metrics.gave_up()), (2, 1));
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_terminal_error_is_counted_and_never_retried() {
    let s = setup();
    s.src.upsert(cm("a"));
    let attempts = Attempts::new();
    let policy_calls = Arc::new(AtomicUsize::new(0));
    let p = Arc::clone(&policy_calls);
    let controller = Controller::new(s.informer.clone(), Config::default()).with_error_policy(
        move |_: &ObjectKey, _: &Terminal<&'static str>, _: u32| {
            p.fetch_add(1, Ordering::SeqCst);
            ErrorAction::Backoff
        },
    );
    let metrics = controller.metrics().clone();
    let log = attempts.log();
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().push(tokio::time::Instant::now());
                Err::<Action, _>(Terminal("invalid spec"))
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| attempts.count() == 1).await;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(attempts.count(), 1);
    assert_eq!(
        policy_calls.load(Ordering::SeqCst),
        0,
        "policy not consulted"
    );
    assert_eq!((metrics.terminal(), metrics.retried()), (1, 0));
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_is_caught_counted_and_retried_with_backoff() {
    let s = setup();
    s.src.upsert(cm("a"));
    let attempts = Attempts::new();
    let controller = Controller::new(s.informer.clone(), Config::default());
    let metrics = controller.metrics().clone();
    let log = attempts.log();
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let n = {
                let mut log = log.lock();
                log.push(tokio::time::Instant::now());
                log.len()
            };
            assert!(n != 1, "panics while building the future");
            async move {
                assert!(n != 2, "panics while polling the future");
                Ok::<_, String>(Action::Done)
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| attempts.count() == 3).await;
    let gaps = attempts.gaps();
    assert!(
        gaps[0] >= Duration::from_millis(5) && gaps[1] >= Duration::from_millis(10),
        "{gaps:?}"
    );
    assert_eq!((metrics.panicked(), metrics.succeeded()), (2, 1));
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn run_fails_when_the_informer_was_never_started() {
    let src = FakeSource::<ConfigMap>::new();
    let informer = SharedIndexInformer::new(src, informer::Config::default());
    let controller = Controller::new(
        informer,
        Config::default()
            .name("cms")
            .informer_start_timeout(Duration::from_secs(5)),
    );
    let start = tokio::time::Instant::now();
    let err = controller
        .run(
            |_key, _obj: Option<Arc<ConfigMap>>| async { Ok::<_, String>(Action::Done) },
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::InformerNotStarted {
            controller: "cms".into(),
            waited: Duration::from_secs(5)
        }
    );
    assert!(start.elapsed() >= Duration::from_secs(5));
    assert!(err.to_string().contains("not started"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn run_fails_when_the_informer_has_stopped() {
    let s = setup();
    let controller = Controller::new(s.informer.clone(), Config::default());
    s.cancel.cancel();
    eventually(|| s.informer.is_stopped()).await;
    let err = controller
        .run(
            |_key, _obj: Option<Arc<ConfigMap>>| async { Ok::<_, String>(Action::Done) },
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InformerStopped { .. }), "{err}");
}
