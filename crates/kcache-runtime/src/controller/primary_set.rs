//! A controller whose primary cache is a set of namespaces (one informer per namespace):
//! kcache's [`Controller`](kcache::controller::Controller) takes one primary informer, the
//! first namespace's; the others queue their keys through [`MorePrimary`], with the same
//! update filter and priorities, and [`requeue_while_leading`] queues their objects on each
//! start of leading, as the controller does for its primary cache.

use std::sync::Arc;

use kcache::{
    HandlerRegistration, SharedIndexInformer,
    controller::{UpdateFilter, WorkQueue},
    informer::{self, DeletedObject, EventHandler},
    leaderelection::LeaderState,
    store::ObjectKey,
    workqueue::priority,
};
use kube_core::Resource;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The keys of every object of the informers beyond the first, for a new leader.
pub(super) type Keys = Arc<dyn Fn() -> Vec<ObjectKey> + Send + Sync>;

/// Queues the key of each changed object of one more informer of a primary set, as the
/// controller queues its primary informer's: low priority for the initial list and for
/// updates that leave the resourceVersion where it was; updates `filter` rejects queue
/// nothing.
struct MorePrimary<S> {
    queue: WorkQueue,
    filter: UpdateFilter<S>,
}

fn key<S: Resource>(obj: &S) -> ObjectKey {
    let meta = obj.meta();
    ObjectKey::new(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

impl<S: Resource + Send + Sync + 'static> EventHandler<S> for MorePrimary<S> {
    fn on_add(&self, obj: &Arc<S>, initial: bool) {
        let priority = if initial {
            priority::LOW
        } else {
            priority::NORMAL
        };
        // A queue that shut down refuses keys: the controller is stopping.
        let _ = self.queue.add_with_priority(key(&**obj), priority);
    }

    fn on_update(&self, old: &Arc<S>, new: &Arc<S>) {
        if !(self.filter)(old, new) {
            return;
        }
        let (was, is) = (&old.meta().resource_version, &new.meta().resource_version);
        let priority = if was.is_some() && was == is {
            priority::LOW
        } else {
            priority::NORMAL
        };
        let _ = self.queue.add_with_priority(key(&**new), priority);
    }

    fn on_delete(&self, obj: &DeletedObject<S>) {
        let _ = self
            .queue
            .add_with_priority(key(&**obj.object()), priority::NORMAL);
    }
}

/// Registers the handlers of `informers` (a primary set's beyond the first) on `queue`;
/// returns their registrations and what lists their keys.
pub(super) fn register<S>(
    informers: &[SharedIndexInformer<S>],
    queue: &WorkQueue,
    filter: &UpdateFilter<S>,
    controller: &str,
) -> (Vec<HandlerRegistration>, Keys)
where
    S: Resource + Clone + Send + Sync + 'static,
{
    let registrations = informers
        .iter()
        .map(|informer| {
            informer
                .add_event_handler_with_config(
                    MorePrimary {
                        queue: queue.clone(),
                        filter: Arc::clone(filter),
                    },
                    informer::HandlerConfig::default()
                        .delivery(informer::Delivery::Inline)
                        .name(format!("controller {controller}")),
                )
                .expect("a primary informer has stopped before the manager ran")
        })
        .collect();
    let informers = informers.to_vec();
    let keys: Keys = Arc::new(move || {
        informers
            .iter()
            .flat_map(|i| i.indexer().list_keys())
            .collect()
    });
    (registrations, keys)
}

/// Queues `keys()` each time `leading` starts leading, until `cancel` fires or the state's
/// sender is gone.
pub(super) async fn requeue_while_leading(
    mut leading: watch::Receiver<LeaderState>,
    queue: WorkQueue,
    keys: Keys,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            r = leading.wait_for(LeaderState::is_leading) => if r.is_err() { return },
        }
        for key in keys() {
            let _ = queue.add_with_priority(key, priority::NORMAL);
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            r = leading.wait_for(|s| !s.is_leading()) => if r.is_err() { return },
        }
    }
}
