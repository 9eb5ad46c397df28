//! Reconciling: every object, retries with backoff, requeues, one worker per key, owners of owned
//! objects.

use super::*;

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
