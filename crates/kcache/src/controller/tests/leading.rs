//! Leader election, update filters and a leader state driven elsewhere.

use super::*;

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
