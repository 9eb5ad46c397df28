//! The controller's unit tests (FakeSource, paused time).

use crate::test_support::eventually;
use std::{
    collections::HashMap,
    sync::atomic::{AtomicUsize, Ordering},
};

use k8s_openapi::{
    api::core::v1::{ConfigMap, Secret},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use parking_lot::Mutex;

use super::*;
use crate::workqueue::RateLimitingInterface as _;
use crate::{informer, testing::FakeSource};

use crate::testing::config_map as cm;

mod metrics;

struct Setup {
    src: FakeSource<ConfigMap>,
    informer: SharedIndexInformer<ConfigMap>,
    cancel: CancellationToken,
}

fn setup() -> Setup {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    let cancel = CancellationToken::new();
    tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    Setup {
        src,
        informer,
        cancel,
    }
}

#[tokio::test(start_paused = true)]
async fn reconcile_runs_for_every_object_and_sees_deletions_as_none() {
    let s = setup();
    s.src.upsert(cm("a"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let controller = Controller::new(s.informer.clone(), Config::default());
    let log = Arc::clone(&seen);
    let run = tokio::spawn(controller.run(
        move |key, obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().push(format!("{key} {}", obj.is_some()));
                Ok::<_, String>(Action::Done)
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| seen.lock().len() == 1).await;
    s.src.delete(&ObjectKey::new(Some("ns"), "a"));
    eventually(|| seen.lock().len() == 2).await;
    assert_eq!(*seen.lock(), ["ns/a true", "ns/a false"]);
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn errors_are_retried_with_backoff_and_success_forgets_the_key() {
    let s = setup();
    s.src.upsert(cm("a"));
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let controller = Controller::new(s.informer.clone(), Config::default());
    let queue = controller.queue().clone();
    let log = Arc::clone(&attempts);
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                let mut log = log.lock();
                log.push(tokio::time::Instant::now());
                if log.len() < 4 {
                    Err("not yet".to_owned())
                } else {
                    Ok(Action::Done)
                }
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| attempts.lock().len() == 4).await;
    let t = attempts.lock().clone();
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps[0] >= Duration::from_millis(5)
            && gaps[1] >= Duration::from_millis(10)
            && gaps[2] >= Duration::from_millis(20),
        "{gaps:?}"
    );
    eventually(|| queue.num_requeues(&ObjectKey::new(Some("ns"), "a")) == 0).await;
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn requeue_after_reconciles_again_after_the_delay() {
    let s = setup();
    s.src.upsert(cm("a"));
    let times = Arc::new(Mutex::new(Vec::new()));
    let controller = Controller::new(s.informer.clone(), Config::default());
    let log = Arc::clone(&times);
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().push(tokio::time::Instant::now());
                Ok::<_, String>(Action::RequeueAfter(Duration::from_secs(30)))
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| times.lock().len() >= 3).await;
    let t = times.lock().clone();
    assert!(t[1] - t[0] >= Duration::from_secs(30));
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_is_never_reconciled_by_two_workers_at_once() {
    let s = setup();
    for i in 0..20 {
        s.src.upsert(cm(&format!("c{i}")));
    }
    let in_flight: Arc<Mutex<HashMap<ObjectKey, usize>>> = Arc::default();
    let total = Arc::new(AtomicUsize::new(0));
    let controller = Controller::new(s.informer.clone(), Config::default().workers(4));
    let (f, t) = (Arc::clone(&in_flight), Arc::clone(&total));
    let run = tokio::spawn(controller.run(
        move |key: ObjectKey, _obj: Option<Arc<ConfigMap>>| {
            let (f, t) = (Arc::clone(&f), Arc::clone(&t));
            async move {
                let n = {
                    let mut m = f.lock();
                    let n = m.entry(key.clone()).or_default();
                    *n += 1;
                    *n
                };
                assert_eq!(n, 1, "two workers on {key}");
                tokio::time::sleep(Duration::from_millis(2)).await;
                *f.lock().get_mut(&key).unwrap() -= 1;
                t.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(Action::Done)
            }
        },
        s.cancel.clone(),
    ));
    for round in 0..5 {
        for i in 0..20 {
            s.src.upsert(cm(&format!("c{i}")));
        }
        tokio::time::sleep(Duration::from_millis(1 + round)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while total.load(Ordering::SeqCst) < 20 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    s.cancel.cancel();
    run.await.unwrap().unwrap();
    assert!(
        in_flight.lock().values().all(|n| *n == 0),
        "shutdown waited for reconciles in flight"
    );
}

#[tokio::test(start_paused = true)]
async fn owned_objects_enqueue_their_controller_owner() {
    let s = setup();
    s.src.upsert(cm("owner"));
    let secrets = FakeSource::<Secret>::new();
    let secret_informer = SharedIndexInformer::new(secrets.clone(), informer::Config::default());
    tokio::spawn({
        let (i, c) = (secret_informer.clone(), s.cancel.clone());
        async move { i.run(c).await }
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let controller = Controller::new(s.informer.clone(), Config::default()).owns(&secret_informer);
    let log = Arc::clone(&seen);
    let run = tokio::spawn(controller.run(
        move |key: ObjectKey, _obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().push(key.to_string());
                Ok::<_, String>(Action::Done)
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| seen.lock().len() == 1).await;
    let mut secret = Secret::default();
    secret.metadata.name = Some("child".into());
    secret.metadata.namespace = Some("ns".into());
    secret.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: "u".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    secrets.upsert(secret);
    eventually(|| seen.lock().len() == 2).await;
    assert_eq!(*seen.lock(), ["ns/owner", "ns/owner"]);
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

/// The instants at which a reconcile ran.
struct Attempts {
    times: Arc<Mutex<Vec<tokio::time::Instant>>>,
}

impl Attempts {
    fn new() -> Self {
        Self {
            times: Arc::default(),
        }
    }
    fn log(&self) -> Arc<Mutex<Vec<tokio::time::Instant>>> {
        Arc::clone(&self.times)
    }
    fn count(&self) -> usize {
        self.times.lock().len()
    }
    fn gaps(&self) -> Vec<Duration> {
        self.times.lock().windows(2).map(|w| w[1] - w[0]).collect()
    }
}

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

/// Initial lists asked of `src`: list calls, and watches with `sendInitialEvents`
/// (a streaming list).
fn list_calls(src: &FakeSource<ConfigMap>) -> usize {
    use crate::testing::Call;
    src.calls()
        .iter()
        .filter(|c| {
            matches!(
                c,
                Call::List { .. }
                    | Call::Watch {
                        send_initial_events: true,
                        ..
                    }
            )
        })
        .count()
}

#[tokio::test(start_paused = true)]
async fn under_leader_election_workers_run_only_while_leading_and_drain_when_it_ends() {
    use crate::leaderelection::{self, FakeLock, LeaderElector, LeaseRecord};

    let s = setup();
    s.src.upsert(cm("a"));
    s.src.upsert(cm("b"));
    // Someone else holds the lease, for an hour.
    let lock = FakeLock::with_record(LeaseRecord {
        holder_identity: "other".into(),
        lease_duration_seconds: 3600,
        ..LeaseRecord::default()
    });
    let mut config = leaderelection::Config::new("me");
    config.lease_duration = Duration::from_secs(4);
    config.renew_deadline = Duration::from_secs(3);
    config.retry_period = Duration::from_secs(1);
    config.release_on_cancel = true;
    let elector = Arc::new(LeaderElector::new(config, lock.clone()).unwrap());
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let controller = Controller::new(s.informer.clone(), Config::default().workers(2));
    let run = tokio::spawn({
        let (elector, log, cancel) = (Arc::clone(&elector), Arc::clone(&log), s.cancel.clone());
        async move {
            controller
                .run_with_leader_election(
                    &elector,
                    move |key: ObjectKey, _obj: Option<Arc<ConfigMap>>| {
                        let log = Arc::clone(&log);
                        async move {
                            log.lock().push(format!("start {key}"));
                            if key.as_str() == "ns/slow" {
                                tokio::time::sleep(Duration::from_secs(5)).await;
                            }
                            log.lock().push(format!("end {key}"));
                            Ok::<_, String>(Action::Done)
                        }
                    },
                    cancel,
                )
                .await
        }
    });

    // Standby: synced, but nothing reconciled.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(s.informer.has_synced());
    assert!(!elector.is_leader());
    assert!(log.lock().is_empty(), "{:?}", log.lock());
    let lists = list_calls(&s.src);
    assert_eq!(lists, 1);

    // The holder releases the lease: we lead, and reconcile what the cache holds.
    lock.set_record(LeaseRecord {
        holder_identity: String::new(),
        lease_duration_seconds: 1,
        ..LeaseRecord::default()
    });
    eventually(|| log.lock().iter().filter(|l| l.starts_with("end")).count() == 2).await;
    assert!(elector.is_leader());
    let mut ends: Vec<String> = log.lock().clone();
    ends.sort();
    assert_eq!(ends, ["end ns/a", "end ns/b", "start ns/a", "start ns/b"]);
    assert_eq!(list_calls(&s.src), lists, "no new list on takeover");

    // A slow reconcile is in flight when renewals start failing: we step down after the
    // renew deadline, and the slow reconcile is drained, not aborted.
    s.src.upsert(cm("slow"));
    eventually(|| log.lock().contains(&"start ns/slow".to_owned())).await;
    lock.set_failing(true);
    eventually(|| !elector.is_leader()).await;
    eventually(|| log.lock().contains(&"end ns/slow".to_owned())).await;

    // Not leading: changes are cached and queued, not reconciled.
    s.src.upsert(cm("c"));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(s.informer.indexer().get_by_key("ns/c").is_some());
    assert!(
        !log.lock().iter().any(|l| l.contains("ns/c")),
        "{:?}",
        log.lock()
    );

    // The lock recovers: we lead again and catch up, still without a new list.
    lock.set_failing(false);
    eventually(|| log.lock().contains(&"end ns/c".to_owned())).await;
    assert!(elector.is_leader());
    assert_eq!(list_calls(&s.src), lists);

    // Cancel: workers drained, lease released.
    s.cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(lock.record().unwrap().holder_identity, "");
}

#[tokio::test(start_paused = true)]
async fn an_update_filter_drops_the_updates_it_rejects_and_never_adds_or_deletes() {
    let s = setup();
    s.src.upsert(cm("a"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let controller = Controller::new_with_update_filter(
        s.informer.clone(),
        Config::default(),
        |old: &ConfigMap, new: &ConfigMap| old.metadata.labels != new.metadata.labels,
    );
    let log = Arc::clone(&seen);
    let run = tokio::spawn(controller.run(
        move |key, obj: Option<Arc<ConfigMap>>| {
            let log = Arc::clone(&log);
            async move {
                let labels = obj.as_ref().and_then(|o| o.metadata.labels.clone());
                log.lock()
                    .push(format!("{key} {} {:?}", obj.is_some(), labels.is_some()));
                Ok::<_, String>(Action::Done)
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| seen.lock().len() == 1).await;
    // An annotation changes: the filter (labels only) drops the update.
    let mut annotated = cm("a");
    annotated.metadata.annotations = Some([("note".to_owned(), "x".to_owned())].into());
    s.src.upsert(annotated.clone());
    eventually(|| {
        s.informer
            .indexer()
            .get_by_key("ns/a")
            .is_some_and(|o| o.metadata.annotations.is_some())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(seen.lock().len(), 1, "{:?}", seen.lock());
    // A label changes: reconciled.
    let mut labelled = annotated;
    labelled.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    s.src.upsert(labelled);
    eventually(|| seen.lock().len() == 2).await;
    // A delete is never filtered.
    s.src.delete(&ObjectKey::new(Some("ns"), "a"));
    eventually(|| seen.lock().len() == 3).await;
    assert_eq!(
        *seen.lock(),
        ["ns/a true false", "ns/a true true", "ns/a false false"]
    );
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn run_while_leading_follows_a_leader_state_driven_elsewhere() {
    use crate::leaderelection::LeaderState;

    let s = setup();
    s.src.upsert(cm("a"));
    s.src.upsert(cm("b"));
    let (state, leading) = tokio::sync::watch::channel(LeaderState::Standby { leader: None });
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let controller = Controller::new(s.informer.clone(), Config::default().workers(2));
    let run = tokio::spawn({
        let (log, cancel) = (Arc::clone(&log), s.cancel.clone());
        controller.run_while_leading(
            leading,
            move |key: ObjectKey, _obj: Option<Arc<ConfigMap>>| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().push(key.to_string());
                    Ok::<_, String>(Action::Done)
                }
            },
            cancel,
        )
    });

    // Standby: synced, nothing reconciled.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(s.informer.has_synced());
    assert!(log.lock().is_empty(), "{:?}", log.lock());

    // Leading: everything in the cache is reconciled, without a new list.
    let lists = list_calls(&s.src);
    state.send_replace(LeaderState::Leading);
    eventually(|| log.lock().len() == 2).await;
    let mut keys = log.lock().clone();
    keys.sort();
    assert_eq!(keys, ["ns/a", "ns/b"]);

    // Standby again: a change is cached, not reconciled.
    state.send_replace(LeaderState::Standby { leader: None });
    tokio::time::sleep(Duration::from_secs(1)).await;
    s.src.upsert(cm("c"));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(s.informer.indexer().get_by_key("ns/c").is_some());
    assert!(!log.lock().contains(&"ns/c".to_owned()), "{:?}", log.lock());

    // Leading again: caught up, still on the first list.
    state.send_replace(LeaderState::Leading);
    eventually(|| log.lock().contains(&"ns/c".to_owned())).await;
    assert_eq!(list_calls(&s.src), lists);

    s.cancel.cancel();
    run.await.unwrap().unwrap();
}
