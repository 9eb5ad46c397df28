//! The observability families added on 2026-12-02 — reflector causes, types, histograms and
//! resourceVersion age; handler buffer depths; controller active workers and reconcile time;
//! the leader-election health check — scraped over HTTP from `kcache_metrics::serve` and
//! parsed with a Prometheus text parser.

mod support;

use std::{
    sync::{Arc, Condvar, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    SharedIndexInformer,
    controller::{self, Action, Controller},
    informer::{self, HandlerConfig, HandlerFns},
    leaderelection::{self, FakeLock, LeaderElector},
    store::ObjectKey,
    testing::{FakeSource, config_map as cm, status},
};
use kcache_metrics::{Checks, ControllerMetrics, InformerMetrics, leader_election_check};
use prometheus_client::registry::Registry;
use support::{buckets, eventually, get, histograms, parse, value};
use tokio_util::sync::CancellationToken;

/// Serves `registry` and `checks` on an ephemeral port until `cancel` fires.
async fn serve(
    registry: Registry,
    checks: Checks,
    cancel: &CancellationToken,
) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(kcache_metrics::serve(
        listener,
        Arc::new(registry),
        checks,
        cancel.clone(),
    ));
    addr
}

/// A gate handlers and reconciles wait on until the test opens it.
#[derive(Default)]
struct Gate(Mutex<bool>, Condvar);

impl Gate {
    fn wait(&self) {
        let mut open = self.0.lock().unwrap();
        while !*open {
            open = self.1.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.0.lock().unwrap() = true;
        self.1.notify_all();
    }
}

#[tokio::test]
async fn reflector_and_handler_families_over_http() {
    let mut registry = Registry::default();
    let informers = InformerMetrics::new(&mut registry);
    let src = FakeSource::<ConfigMap>::new();
    for n in ["a", "b", "c", "d", "e"] {
        src.upsert(cm(n));
    }
    let mut config = informer::Config::default();
    config.reflector = config
        .reflector
        .initial_list(kcache::reflector::InitialList::List);
    let informer = SharedIndexInformer::new(src.clone(), config);
    informers.register(&informer);

    // "slow" blocks in its first notification; the second handler keeps up.
    let gate = Arc::new(Gate::default());
    let g = Arc::clone(&gate);
    let slow = informer
        .add_event_handler_with_config(
            HandlerFns::new().on_add(move |_: &Arc<ConfigMap>, _| g.wait()),
            HandlerConfig::default().name("slow"),
        )
        .unwrap();
    let fast = informer.add_event_handler(HandlerFns::new()).unwrap();
    assert_eq!(fast.name(), "handler-2");

    let cancel = CancellationToken::new();
    let addr = serve(registry, Checks::new(), &cancel).await;
    let run = tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    informer.wait_for_sync().await;
    eventually(async || src.watcher_count() > 0).await;

    src.upsert(cm("f")); // ADDED
    src.upsert(cm("a")); // MODIFIED
    src.delete(&ObjectKey::new(Some("ns"), "b")); // DELETED
    src.advance_resource_version();
    src.bookmark(); // BOOKMARK
    eventually(async || {
        informer
            .reflector_metrics()
            .is_some_and(|m| m.watch_events == 4)
    })
    .await;
    // A 410 in the stream (an ERROR event): one relist, cause expired.
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    eventually(async || informer.reflector_metrics().is_some_and(|m| m.relists == 1)).await;
    eventually(async || fast.delivered() == 8 && fast.pending() == 0).await;

    let (code, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    let m = parse(&body);
    let r = ("resource", "objects");
    for (cause, want) in [
        ("expired", 1.0),
        ("too_large", 0.0),
        ("selection_changed", 0.0),
        ("error", 0.0),
    ] {
        let labels = [r, ("cause", cause)];
        assert_eq!(
            value(&m, "kcache_reflector_relists_total", &labels),
            want,
            "{cause}: {body}"
        );
    }
    for (kind, want) in [
        ("ADDED", 1.0),
        ("MODIFIED", 1.0),
        ("DELETED", 1.0),
        ("BOOKMARK", 1.0),
        ("ERROR", 1.0),
    ] {
        let labels = [r, ("type", kind)];
        assert_eq!(
            value(&m, "kcache_reflector_watch_events_total", &labels),
            want,
            "{kind}: {body}"
        );
    }
    assert_eq!(value(&m, "kcache_reflector_bookmarks_total", &[r]), 1.0);
    assert_eq!(value(&m, "kcache_reflector_lists_total", &[r]), 2.0);
    let age = value(
        &m,
        "kcache_reflector_last_resource_version_age_seconds",
        &[r],
    );
    assert!(age >= 0.0, "{age}");

    // Two lists: 5 objects, then 5 again (a, c, d, e, f).
    let h = histograms(&body);
    assert_eq!(value(&m, "kcache_reflector_list_items_count", &[r]), 2.0);
    assert_eq!(value(&m, "kcache_reflector_list_items_sum", &[r]), 10.0);
    let items = buckets(&h, "kcache_reflector_list_items", &[r]);
    assert_eq!(items.first(), Some(&(0.0, 0.0)), "{items:?}");
    assert!(
        items.contains(&(1.0, 0.0)) && items.contains(&(10.0, 2.0)),
        "{items:?}"
    );
    assert_eq!(items.last(), Some(&(f64::INFINITY, 2.0)));
    let durations = buckets(&h, "kcache_reflector_list_duration_seconds", &[r]);
    assert_eq!(
        durations.len(),
        13,
        "client-go's 12 buckets and +Inf: {durations:?}"
    );
    assert_eq!(durations[0].0, 0.005);
    assert_eq!(durations.last(), Some(&(f64::INFINITY, 2.0)));
    assert_eq!(
        value(&m, "kcache_reflector_list_duration_seconds_count", &[r]),
        2.0
    );

    // "slow" holds its first batch (the 5 initial adds); the 3 live notifications wait.
    let depth = |handler| {
        let labels = [r, ("handler", handler)];
        (
            value(&m, "kcache_informer_handler_buffer_depth", &labels),
            value(&m, "kcache_informer_handler_buffer_max_depth", &labels),
        )
    };
    assert_eq!(depth("slow"), (3.0, 5.0), "{body}");
    assert_eq!(depth("handler-2"), (0.0, 5.0), "{body}");
    assert_eq!(slow.pending(), 3);

    gate.open();
    eventually(async || slow.delivered() == 8).await;
    let m = parse(&get(addr, "/metrics").await.1);
    assert_eq!(
        value(
            &m,
            "kcache_informer_handler_buffer_depth",
            &[r, ("handler", "slow")]
        ),
        0.0
    );
    cancel.cancel();
    run.await.unwrap();
}

#[tokio::test]
async fn controller_active_workers_and_reconcile_time_over_http() {
    let mut registry = Registry::default();
    let metrics = ControllerMetrics::new(&mut registry);
    let src = FakeSource::<ConfigMap>::new();
    for n in ["a", "b", "c"] {
        src.upsert(cm(n));
    }
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    let controller = Controller::new(
        informer.clone(),
        controller::Config::default().name("configmaps").workers(2),
    );
    metrics.register_controller("configmaps", 2, controller.metrics());
    let counters = controller.metrics().clone();
    let cancel = CancellationToken::new();
    let addr = serve(registry, Checks::new(), &cancel).await;
    let run_informer = tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    let (open, gate) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let mut gate = gate.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok::<_, String>(Action::Done)
            }
        },
        cancel.clone(),
    ));
    let c = [("controller", "configmaps")];
    // Both workers are blocked inside a reconcile; the third key waits in the queue.
    eventually(async || counters.active_workers() == 2).await;
    let m = parse(&get(addr, "/metrics").await.1);
    assert_eq!(value(&m, "controller_runtime_active_workers", &c), 2.0);
    assert_eq!(
        value(&m, "controller_runtime_max_concurrent_reconciles", &c),
        2.0
    );
    assert_eq!(
        value(&m, "controller_runtime_reconcile_time_seconds_count", &c),
        0.0
    );

    open.send_replace(true);
    eventually(async || counters.succeeded() == 3).await;
    let (_, body) = get(addr, "/metrics").await;
    let m = parse(&body);
    assert_eq!(value(&m, "controller_runtime_active_workers", &c), 0.0);
    assert_eq!(
        value(&m, "controller_runtime_reconcile_time_seconds_count", &c),
        3.0
    );
    let h = histograms(&body);
    let b = buckets(&h, "controller_runtime_reconcile_time_seconds", &c);
    assert_eq!(
        b.len(),
        41,
        "controller-runtime's 40 buckets and +Inf: {b:?}"
    );
    assert_eq!((b[0].0, b[39].0), (0.005, 60.0));
    assert_eq!(b[40], (f64::INFINITY, 3.0));
    cancel.cancel();
    run.await.unwrap().unwrap();
    run_informer.await.unwrap();
}

#[tokio::test]
async fn the_leader_election_check_fails_while_renewals_fail_and_recovers() {
    let lock = FakeLock::new();
    let mut config = leaderelection::Config::new("replica-0");
    config.lease_duration = Duration::from_secs(1);
    config.renew_deadline = Duration::from_millis(800);
    config.retry_period = Duration::from_millis(200);
    let elector = Arc::new(LeaderElector::new(config, lock.clone()).unwrap());
    let checks = Checks::new().live(
        "leaderElection",
        leader_election_check(Arc::clone(&elector), Duration::from_millis(500)),
    );
    let cancel = CancellationToken::new();
    let addr = serve(Registry::default(), checks, &cancel).await;
    let spawn_run = || {
        let (e, c) = (Arc::clone(&elector), cancel.clone());
        tokio::spawn(async move { e.run(c).await })
    };

    let run = spawn_run();
    eventually(async || elector.is_leader()).await;
    let (code, body) = get(addr, "/healthz").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]leaderElection ok"), "{body}");

    // Renewals fail: the elector steps down, but the lease it last saw is still its own, and
    // past lease duration + tolerance it reports itself unhealthy.
    lock.set_failing(true);
    eventually(async || get(addr, "/healthz").await.0 == 503).await;
    let (_, body) = get(addr, "/healthz").await;
    assert!(
        body.contains("[-]leaderElection failed: failed election to renew leadership"),
        "{body}"
    );
    run.await.unwrap();

    // The lock works again and the process competes again: healthy.
    lock.set_failing(false);
    let run = spawn_run();
    eventually(async || get(addr, "/healthz").await.0 == 200).await;
    assert!(elector.is_leader());
    cancel.cancel();
    run.await.unwrap();
}
