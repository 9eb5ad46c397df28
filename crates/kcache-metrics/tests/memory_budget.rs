//! Cache memory over HTTP: `kcache_informer_cache_bytes` follows the informer's accounted
//! total, and `/readyz` fails while the cache is over its memory budget and passes again once
//! objects are deleted.

mod support;

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    SharedIndexInformer, informer,
    store::ObjectKey,
    testing::{FakeSource, config_map},
};
use kcache_metrics::{Checks, InformerMetrics};
use prometheus_client::registry::Registry;
use support::{eventually, get, parse, value};
use tokio_util::sync::CancellationToken;

const BUDGET: usize = 64 * 1024;

fn blob(name: &str, bytes: usize) -> ConfigMap {
    let mut cm = config_map(name);
    cm.data = Some(BTreeMap::from([("blob".to_owned(), "x".repeat(bytes))]));
    cm
}

#[tokio::test]
async fn readiness_fails_over_the_memory_budget_and_recovers_under_it() {
    let mut registry = Registry::default();
    let informers = InformerMetrics::new(&mut registry);
    let src = FakeSource::<ConfigMap>::new();
    src.upsert(blob("small", 1_000));
    let config = informer::Config::default().memory_budget_bytes(BUDGET);
    let informer = SharedIndexInformer::builder(src.clone())
        .config(config)
        .account_memory()
        .build();
    informers.register(&informer);

    let cancel = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let checks = Checks::new().with_informers(informers.clone());
    let server = tokio::spawn(kcache_metrics::serve(
        listener,
        Arc::new(registry),
        checks,
        cancel.clone(),
    ));
    let run = tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    informer.wait_for_sync().await;
    eventually(async || get(addr, "/readyz").await.0 == 200).await;

    let r = [("resource", "objects")];
    let scrape = async || parse(&get(addr, "/metrics").await.1);
    let m = scrape().await;
    let bytes = informer.memory().unwrap().bytes;
    assert!(bytes > 1_000 && bytes < BUDGET, "{bytes}");
    assert_eq!(value(&m, "kcache_informer_cache_bytes", &r), bytes as f64);
    assert_eq!(
        value(&m, "kcache_informer_cache_budget_bytes", &r),
        BUDGET as f64
    );

    // Two 40 KB objects: over the 64 KiB budget.
    src.upsert(blob("big-1", 40_000));
    src.upsert(blob("big-2", 40_000));
    eventually(async || get(addr, "/readyz").await.0 == 503).await;
    let usage = informer.memory().unwrap();
    assert_eq!(usage.objects, 3);
    assert!(informer.over_memory_budget());
    let (_, body) = get(addr, "/readyz").await;
    let expected = format!(
        "[-]informer objects failed: the objects cache holds {} bytes (3 objects), over its \
         memory budget of {BUDGET} bytes",
        usage.bytes
    );
    assert!(body.contains(&expected), "{body}");
    let m = scrape().await;
    assert_eq!(
        value(&m, "kcache_informer_cache_bytes", &r),
        usage.bytes as f64
    );

    // Deleting one brings it back under: ready again.
    src.delete(&ObjectKey::new(Some("ns"), "big-2"));
    eventually(async || get(addr, "/readyz").await.0 == 200).await;
    assert!(!informer.over_memory_budget());
    let m = scrape().await;
    let now = informer.memory().unwrap();
    assert_eq!(now.objects, 2);
    assert!(now.bytes < BUDGET && now.bytes > 40_000, "{now:?}");
    assert_eq!(
        value(&m, "kcache_informer_cache_bytes", &r),
        now.bytes as f64
    );

    cancel.cancel();
    run.await.unwrap();
    server.await.unwrap().unwrap();
}
