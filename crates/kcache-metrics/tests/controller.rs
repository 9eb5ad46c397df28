//! Controller metrics under controller-runtime's names, after a scripted run (exact counts).

mod support;

use std::{collections::HashMap, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    SharedIndexInformer,
    controller::{self, Action, Controller},
    informer,
    testing::FakeSource,
};
use kcache_metrics::ControllerMetrics;
use prometheus_client::{encoding::text::encode, registry::Registry};
use tokio_util::sync::CancellationToken;

use kcache::testing::config_map as cm;

/// The registry's samples keyed `name{k=v,…}` (labels sorted).
fn samples(registry: &Registry) -> HashMap<String, f64> {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    support::parse(&text)
        .into_iter()
        .map(|((name, labels), v)| {
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            (format!("{name}{{{}}}", labels.join(",")), v)
        })
        .collect()
}

#[tokio::test]
async fn reconcile_results_by_kind_and_leader_status() {
    let mut registry = Registry::default();
    let metrics = ControllerMetrics::new(&mut registry);
    let src = FakeSource::<ConfigMap>::new();
    for n in ["good-1", "good-2", "bad"] {
        src.upsert(cm(n));
    }
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    let controller = Controller::new(
        informer.clone(),
        controller::Config::default()
            .name("configmaps")
            .workers(2)
            .max_retries(2),
    );
    metrics.register_controller("configmaps", 2, controller.metrics());
    let leading = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let l = Arc::clone(&leading);
    metrics.register_leader("kcache-demo", move || {
        l.load(std::sync::atomic::Ordering::SeqCst)
    });
    let counters = controller.metrics().clone();

    let cancel = CancellationToken::new();
    let run_informer = tokio::spawn({
        let i = informer.clone();
        let c = cancel.clone();
        async move { i.run(c).await }
    });
    let run = tokio::spawn(controller.run(
        |key, _obj: Option<Arc<ConfigMap>>| async move {
            if key.name() == "bad" {
                Err("the bad one fails".to_owned())
            } else {
                Ok(Action::Done)
            }
        },
        cancel.clone(),
    ));
    // 2 successes, and for "bad": 1 failure + 2 retries, then given up.
    for _ in 0..400 {
        if counters.gave_up() == 1 && counters.succeeded() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let s = samples(&registry);
    let get = |k: &str| *s.get(k).unwrap_or_else(|| panic!("no {k} in {s:?}"));
    assert_eq!(
        get("controller_runtime_reconcile_total{controller=configmaps,result=success}"),
        2.0
    );
    assert_eq!(
        get("controller_runtime_reconcile_total{controller=configmaps,result=error}"),
        3.0
    );
    assert_eq!(
        get("controller_runtime_reconcile_errors_total{controller=configmaps}"),
        3.0
    );
    assert_eq!(
        get("controller_runtime_terminal_reconcile_errors_total{controller=configmaps}"),
        0.0
    );
    assert_eq!(
        get("controller_runtime_reconcile_panics_total{controller=configmaps}"),
        0.0
    );
    assert_eq!(
        get("kcache_controller_retries_total{controller=configmaps}"),
        2.0
    );
    assert_eq!(
        get("kcache_controller_gave_up_total{controller=configmaps}"),
        1.0
    );
    assert_eq!(
        get("controller_runtime_max_concurrent_reconciles{controller=configmaps}"),
        2.0
    );
    assert_eq!(get("leader_election_master_status{name=kcache-demo}"), 1.0);
    leading.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        samples(&registry)["leader_election_master_status{name=kcache-demo}"],
        0.0
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
    run_informer.await.unwrap();
}

/// Every `workqueue_*` family of a controller's queue, with controller-runtime's labels, and
/// the informer's series with separate resource labels, scraped over HTTP.
#[tokio::test]
async fn a_controllers_work_queue_and_its_informer_are_served_with_separate_labels() {
    use kcache_metrics::{Checks, InformerMetrics, ResourceLabels, WorkqueueMetrics};
    use support::{buckets, get, histograms, parse, value};

    let mut registry = Registry::default();
    let queues = Arc::new(WorkqueueMetrics::with_controller_label(&mut registry));
    let informers = InformerMetrics::new(&mut registry);
    let src = FakeSource::<ConfigMap>::new();
    for n in ["a", "b"] {
        src.upsert(cm(n));
    }
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    informers.register_with_labels(
        &informer,
        // An existence selector: the test's Prometheus parser splits label values at `=`.
        ResourceLabels::of::<ConfigMap>(Some("ns"), Some("app")),
    );
    let controller = Controller::new(
        informer.clone(),
        controller::Config::default()
            .name("configmaps")
            .metrics_provider(queues),
    );
    let counters = controller.metrics().clone();
    let cancel = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(kcache_metrics::serve(
        listener,
        Arc::new(registry),
        Checks::new().with_informers(informers),
        cancel.clone(),
    ));
    let run_informer = tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    // "a" fails once: one retry.
    let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let run = tokio::spawn(controller.run(
        move |key, _obj: Option<Arc<ConfigMap>>| {
            let failed = Arc::clone(&failed);
            async move {
                if key.name() == "a" && !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    return Err("first try fails".to_owned());
                }
                Ok(Action::Done)
            }
        },
        cancel.clone(),
    ));
    support::eventually(async || counters.succeeded() == 2).await;

    let (code, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    let m = parse(&body);
    let q = [("name", "configmaps"), ("controller", "configmaps")];
    assert_eq!(value(&m, "workqueue_adds_total", &q), 3.0, "{body}");
    assert_eq!(value(&m, "workqueue_retries_total", &q), 1.0, "{body}");
    assert_eq!(value(&m, "workqueue_depth", &q), 0.0, "{body}");
    assert_eq!(
        value(&m, "workqueue_unfinished_work_seconds", &q),
        0.0,
        "{body}"
    );
    assert_eq!(
        value(&m, "workqueue_longest_running_processor_seconds", &q),
        0.0,
        "{body}"
    );
    let h = histograms(&body);
    for family in [
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
    ] {
        let b = buckets(&h, family, &q);
        assert_eq!(b.last().unwrap().1, 3.0, "{family}: {body}");
    }
    let r = [
        ("resource", "configmaps"),
        ("namespace", "ns"),
        ("selector", "app"),
    ];
    assert_eq!(value(&m, "kcache_informer_objects", &r), 2.0, "{body}");
    assert_eq!(value(&m, "kcache_informer_synced", &r), 1.0, "{body}");
    let handler = [
        ("resource", "configmaps"),
        ("namespace", "ns"),
        ("selector", "app"),
        ("handler", "controller configmaps"),
    ];
    assert_eq!(
        value(&m, "kcache_informer_handler_buffer_depth", &handler),
        0.0,
        "{body}"
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
    run_informer.await.unwrap();
    server.await.unwrap().unwrap();
}
