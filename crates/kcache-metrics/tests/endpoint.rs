//! The metrics endpoint after scripted scenarios, scraped over HTTP and parsed with a
//! Prometheus text parser (not string-matched).

mod support;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    SharedIndexInformer, informer,
    reflector::BackoffConfig,
    testing::{FakeSource, status},
    workqueue::{RateLimitingQueue, RateLimitingQueueConfig},
};
use kcache_metrics::{Checks, InformerMetrics, WorkqueueMetrics};
use prometheus_client::registry::Registry;
use support::{eventually, get, parse, value};
use tokio_util::sync::CancellationToken;

use kcache::testing::config_map as cm;

#[tokio::test]
async fn workqueue_and_informer_metrics_and_readiness_over_http() {
    let mut registry = Registry::default();
    let queues = Arc::new(WorkqueueMetrics::new(&mut registry));
    let informers = InformerMetrics::new(&mut registry);

    let src = FakeSource::<ConfigMap>::new();
    for n in ["a", "b", "c"] {
        src.upsert(cm(n));
    }
    // Two failed lists first, then the server behaves.
    src.fail_lists(2, status(500, "InternalError", "etcd is down"));
    let mut config = informer::Config::default();
    // A short backoff keeps this real-time test short.
    config.reflector = config
        .reflector
        .initial_list(kcache::reflector::InitialList::List)
        .backoff(BackoffConfig::new(
            Duration::from_millis(50),
            Duration::from_millis(200),
        ));
    let informer = SharedIndexInformer::new(src.clone(), config);
    informers.register(&informer);

    let (queue, driver) = RateLimitingQueue::<String>::with_config(
        RateLimitingQueueConfig::default()
            .name("configmaps")
            .metrics_provider(queues),
    );
    let driver = tokio::spawn(driver);

    let cancel = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let checks = Checks::new()
        .with_informers(informers.clone())
        .failure_threshold(2);
    let server = tokio::spawn(kcache_metrics::serve(
        listener,
        Arc::new(registry),
        checks,
        cancel.clone(),
    ));

    // Not started: not ready.
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503, "{body}");
    let (code, _) = get(addr, "/healthz").await;
    assert_eq!(code, 200);

    let run = tokio::spawn({
        let i = informer.clone();
        let c = cancel.clone();
        async move { i.run(c).await }
    });
    informer.wait_for_sync().await;
    eventually(async || get(addr, "/readyz").await.0 == 200).await;

    // The queue: three adds, one retry, one done.
    queue.add("ns/a".into()).unwrap();
    queue.add("ns/b".into()).unwrap();
    queue.add("ns/a".into()).unwrap(); // already queued: not an add, as in client-go
    queue.add_rate_limited("ns/c".into()).unwrap();
    let item = queue.get().await.unwrap();
    queue.done(&item);
    tokio::time::sleep(Duration::from_millis(100)).await; // the rate-limited add lands

    // A 410 in the watch: one relist.
    eventually(async || src.watcher_count() > 0).await;
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    eventually(async || informer.reflector_metrics().is_some_and(|m| m.relists == 1)).await;

    let (code, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    let m = parse(&body);
    let q = [("name", "configmaps")];
    assert_eq!(value(&m, "workqueue_adds_total", &q), 3.0, "{body}");
    assert_eq!(value(&m, "workqueue_retries_total", &q), 1.0, "{body}");
    assert_eq!(value(&m, "workqueue_depth", &q), 2.0, "{body}");
    let r = [("resource", "objects")];
    assert_eq!(
        value(
            &m,
            "kcache_reflector_relists_total",
            &[("resource", "objects"), ("cause", "expired")]
        ),
        1.0,
        "{body}"
    );
    assert!(
        value(&m, "kcache_reflector_errors_total", &r) >= 3.0,
        "{body}"
    );
    assert_eq!(value(&m, "kcache_informer_objects", &r), 3.0, "{body}");
    assert_eq!(value(&m, "kcache_informer_synced", &r), 1.0, "{body}");
    assert!(
        body.contains("workqueue_queue_duration_seconds_bucket"),
        "{body}"
    );

    // A reflector that keeps failing makes the process unready, and ready again after.
    src.fail_lists(1000, status(500, "InternalError", "etcd is down"));
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    eventually(async || get(addr, "/readyz").await.0 == 503).await;
    let (_, body) = get(addr, "/readyz").await;
    assert!(body.contains("[-]informer objects failed"), "{body}");
    assert!(body.contains("etcd is down"), "{body}");
    src.clear_list_failures();
    eventually(async || get(addr, "/readyz").await.0 == 200).await;
    cancel.cancel();
    run.await.unwrap();
    server.await.unwrap().unwrap();
    queue.shutdown();
    let _ = driver.await;
}
