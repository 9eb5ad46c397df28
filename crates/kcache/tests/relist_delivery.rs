//! What a relist delivers to a handler of an informer without a resync period — a deliberate
//! difference from client-go, pinned here.
//!
//! client-go delivers `OnUpdate(old, new)` for every object of a relist, changed or not, to
//! every handler of an informer without a resync period: `addListener` marks a new listener as
//! "syncing" and only an informer with a resync period ever recomputes that mark, so a relist's
//! unchanged objects (a resync notification) reach all of them. kcache delivers an unchanged
//! object (same resourceVersion) only to handlers whose resync is due, and without a resync
//! period none is: a relist after a 410 costs the handlers nothing for what did not change,
//! and whether a handler sees such updates does not depend on another handler's resync
//! setting. A handler that wants everything re-delivered periodically asks for it with a
//! resync period (`HandlerConfig::resync_period`).

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    HandlerFns, SharedIndexInformer, informer,
    testing::{FakeSource, config_map as cm},
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

fn relists(informer: &SharedIndexInformer<ConfigMap>) -> u64 {
    informer.reflector_metrics().map_or(0, |m| m.relists)
}

#[tokio::test(start_paused = true)]
async fn a_relist_delivers_changed_objects_only_to_a_handler_without_resync() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.upsert(cm("b"));
    let informer = SharedIndexInformer::<ConfigMap>::new(src.clone(), informer::Config::default());
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let (l1, l2) = (Arc::clone(&log), Arc::clone(&log));
    informer
        .add_event_handler(
            HandlerFns::<ConfigMap>::new()
                .on_add(move |o, _| {
                    l1.lock()
                        .push(format!("add {}", o.metadata.name.clone().unwrap()))
                })
                .on_update(move |_, o| {
                    l2.lock()
                        .push(format!("update {}", o.metadata.name.clone().unwrap()))
                }),
        )
        .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    tokio::time::timeout(Duration::from_secs(30), informer.wait_for_sync())
        .await
        .expect("synced");
    tokio::time::sleep(Duration::from_secs(2)).await;
    log.lock().sort(); // the initial list's order is not specified
    assert_eq!(*log.lock(), ["add a", "add b"]);
    let relists_before = relists(&informer);

    // The watch breaks, b changes, and the history is compacted: the re-watch gets 410 and the
    // informer relists, with a unchanged and b changed.
    src.drop_watches();
    let mut b = cm("b");
    b.data = Some([("k".to_owned(), "v2".to_owned())].into());
    src.upsert(b);
    src.compact();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while relists(&informer) == relists_before && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(relists(&informer) > relists_before, "relisted");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        *log.lock(),
        ["add a", "add b", "update b"],
        "only the changed object is delivered (client-go would also deliver `update a`)"
    );
    cancel.cancel();
    task.await.unwrap();
}
