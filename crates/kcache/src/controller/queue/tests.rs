//! The controller's queue kinds (FakeSource, paused time).

use crate::test_support::eventually;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::controller::{Action, Controller};
use crate::informer::{self, SharedIndexInformer};
use crate::testing::{FakeSource, config_map as cm};

/// Starts a one-worker controller over `initial` objects, holds its first reconcile until an
/// object named `new` has been created and queued, and returns the reconcile order.
async fn order_after_initial_list(kind: WorkQueueKind, initial: usize) -> Vec<String> {
    let src = FakeSource::<ConfigMap>::new();
    for i in 0..initial {
        src.upsert(cm(&format!("old-{i:03}")));
    }
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    let cancel = CancellationToken::new();
    tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    let controller = Controller::new(informer, super::super::Config::default().queue(kind));
    let queue = controller.queue().clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let gate = Arc::new(Semaphore::new(0));
    let run = tokio::spawn(controller.run(
        {
            let (seen, gate) = (Arc::clone(&seen), Arc::clone(&gate));
            move |key: ObjectKey, _obj: Option<Arc<ConfigMap>>| {
                let (seen, gate) = (Arc::clone(&seen), Arc::clone(&gate));
                async move {
                    let first = {
                        let mut seen = seen.lock();
                        seen.push(key.name().to_owned());
                        seen.len() == 1
                    };
                    if first {
                        gate.acquire().await.expect("open").forget();
                    }
                    Ok::<_, String>(Action::Done)
                }
            }
        },
        cancel.clone(),
    ));
    eventually(|| seen.lock().len() == 1).await;
    assert_eq!(queue.len(), initial - 1);
    src.upsert(cm("new"));
    eventually(|| queue.len() == initial).await;
    gate.add_permits(1);
    eventually(|| seen.lock().len() == initial + 1).await;
    cancel.cancel();
    run.await.unwrap().unwrap();
    seen.lock().clone()
}

#[tokio::test(start_paused = true)]
async fn priority_queue_reconciles_an_object_created_after_the_initial_list_first() {
    let order = order_after_initial_list(WorkQueueKind::Priority, 20).await;
    assert_eq!(order[1], "new", "{order:?}");
}

#[tokio::test(start_paused = true)]
async fn rate_limiting_queue_reconciles_in_arrival_order() {
    let order = order_after_initial_list(WorkQueueKind::RateLimiting, 20).await;
    assert_eq!(order.last().map(String::as_str), Some("new"), "{order:?}");
}

#[test]
fn initial_list_adds_and_resyncs_are_low_priority() {
    assert_eq!(add_priority(true), priority::LOW);
    assert_eq!(add_priority(false), priority::NORMAL);
    let mut old = cm("a");
    old.metadata.resource_version = Some("7".into());
    let mut changed = old.clone();
    assert_eq!(update_priority(&old, &changed), priority::LOW, "resync");
    changed.metadata.resource_version = Some("8".into());
    assert_eq!(
        update_priority(&old, &changed),
        priority::NORMAL,
        "a real change"
    );
    let (a, b) = (cm("a"), cm("a"));
    assert_eq!(
        update_priority(&a, &b),
        priority::NORMAL,
        "no resourceVersion: not a resync"
    );
}

#[tokio::test(start_paused = true)]
async fn retries_keep_the_priority_the_key_was_reconciled_at() {
    let (queue, driver) =
        WorkQueue::from_config(&super::super::Config::default().queue(WorkQueueKind::Priority));
    tokio::spawn(driver);
    let (low, other) = (
        ObjectKey::new(Some("ns"), "low"),
        ObjectKey::new(Some("ns"), "x"),
    );
    queue.add_with_priority(low.clone(), priority::LOW).unwrap();
    assert_eq!(queue.get().await, Some(low.clone()));
    queue.add_rate_limited(low.clone()).unwrap();
    queue.add_after(other.clone(), Duration::ZERO).unwrap(); // not held: NORMAL
    queue.done(&low);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let prio = queue.as_priority().expect("a priority queue");
    assert_eq!(
        prio.get_with_priority().await,
        Some((other, priority::NORMAL))
    );
    assert_eq!(prio.get_with_priority().await, Some((low, priority::LOW)));
}

#[tokio::test]
async fn the_default_queue_is_rate_limiting_and_ignores_priorities() {
    let (queue, _driver) = WorkQueue::from_config(&super::super::Config::default());
    assert_eq!(queue.kind(), Some(WorkQueueKind::RateLimiting));
    assert!(queue.as_rate_limiting().is_some() && queue.as_priority().is_none());
    let (a, b) = (ObjectKey::new(None, "a"), ObjectKey::new(None, "b"));
    queue.add_with_priority(a.clone(), priority::LOW).unwrap();
    queue.add_with_priority(b, 10).unwrap();
    assert_eq!(queue.get().await, Some(a), "FIFO");
}
