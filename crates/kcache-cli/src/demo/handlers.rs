//! The demo's handlers, each rebuilding the set of pods (key → resourceVersion) from the
//! notifications it receives, so that the verification can compare every handler's view with
//! the server's.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kcache::{
    EventHandler,
    informer::DeletedObject,
    store::{ObjectKey, meta_namespace_key},
};
use kcache_client::Compact;
use kube_core::Resource;
use parking_lot::Mutex;

/// Key → resourceVersion.
pub(super) type Snapshot = HashMap<ObjectKey, String>;

/// State rebuilt from notifications. Strict: an add for a key it already holds, or an
/// update/delete for a key it does not hold, is an anomaly — a lost or duplicated event.
#[derive(Debug, Default)]
pub(super) struct Rebuilt {
    state: Mutex<Snapshot>,
    anomalies: Mutex<Vec<String>>,
    /// Notifications handled (adds, updates, deletes).
    pub handled: AtomicU64,
    /// Notifications handled that were not initial-list adds.
    pub live: AtomicU64,
    /// Test-only: drop the first initial-list add (see `--inject-divergence`).
    drop_one: AtomicBool,
}

/// The most anomalies kept for the report.
const MAX_ANOMALIES: usize = 20;

impl Rebuilt {
    /// An empty state; with `drop_one_event`, the first initial-list add is dropped on purpose.
    pub(super) fn new(drop_one_event: bool) -> Self {
        Self {
            drop_one: AtomicBool::new(drop_one_event),
            ..Self::default()
        }
    }

    fn anomaly(&self, msg: String) {
        let mut a = self.anomalies.lock();
        if a.len() < MAX_ANOMALIES {
            a.push(msg);
        }
    }

    fn rv(pod: &impl Resource) -> String {
        pod.meta().resource_version.clone().unwrap_or_default()
    }

    /// Applies an add.
    pub(super) fn add(&self, pod: &impl Resource, initial: bool) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        if !initial {
            self.live.fetch_add(1, Ordering::Relaxed);
        }
        if initial && self.drop_one.swap(false, Ordering::Relaxed) {
            return;
        }
        let Ok(key) = meta_namespace_key(pod) else {
            return self.anomaly("an added pod without a name".to_owned());
        };
        if self
            .state
            .lock()
            .insert(key.clone(), Self::rv(pod))
            .is_some()
        {
            self.anomaly(format!("add for {key}, which it already had"));
        }
    }

    /// Applies an update.
    pub(super) fn update(&self, new: &impl Resource) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        self.live.fetch_add(1, Ordering::Relaxed);
        let Ok(key) = meta_namespace_key(new) else {
            return self.anomaly("an updated pod without a name".to_owned());
        };
        if self
            .state
            .lock()
            .insert(key.clone(), Self::rv(new))
            .is_none()
        {
            self.anomaly(format!("update for {key}, which it never saw added"));
        }
    }

    /// Applies a delete.
    pub(super) fn delete(&self, pod: &impl Resource) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        self.live.fetch_add(1, Ordering::Relaxed);
        let Ok(key) = meta_namespace_key(pod) else {
            return self.anomaly("a deleted pod without a name".to_owned());
        };
        if self.state.lock().remove(&key).is_none() {
            self.anomaly(format!("delete for {key}, which it did not have"));
        }
    }

    /// Sets the state of `key` from a level-triggered reconcile (`None`: gone).
    pub(super) fn set(&self, key: ObjectKey, rv: Option<String>) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state.lock();
        match rv {
            Some(rv) => state.insert(key, rv),
            None => state.remove(&key),
        };
    }

    /// A copy of the rebuilt state.
    pub(super) fn snapshot(&self) -> Snapshot {
        self.state.lock().clone()
    }

    /// The anomalies seen so far.
    pub(super) fn anomalies(&self) -> Vec<String> {
        self.anomalies.lock().clone()
    }
}

/// Counts and records every notification; returns at once.
pub(super) struct Recording {
    /// The state it rebuilds.
    pub state: Arc<Rebuilt>,
    /// Sleep this long per notification (the slow handler).
    pub delay: Duration,
}

impl Recording {
    fn pause(&self) {
        if !self.delay.is_zero() {
            // Handlers run on tokio's blocking pool: sleeping here blocks only this handler.
            std::thread::sleep(self.delay);
        }
    }
}

/// Reads only metadata: the lean objects it receives are never decoded.
impl EventHandler<Compact<Pod>> for Recording {
    fn on_add(&self, obj: &Arc<Compact<Pod>>, is_in_initial_list: bool) {
        self.pause();
        self.state.add(&**obj, is_in_initial_list);
    }

    fn on_update(&self, _old: &Arc<Compact<Pod>>, new: &Arc<Compact<Pod>>) {
        self.pause();
        self.state.update(&**new);
    }

    fn on_delete(&self, obj: &DeletedObject<Compact<Pod>>) {
        self.pause();
        self.state.delete(&**obj.object());
    }
}

#[cfg(test)]
mod tests {
    use kube_core::ObjectMeta;

    use super::*;

    fn pod(name: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn rebuilt_state_follows_add_update_delete_and_flags_impossible_sequences() {
        let s = Rebuilt::new(false);
        s.add(&pod("a", "1"), true);
        s.add(&pod("b", "2"), false);
        s.update(&pod("a", "3"));
        s.delete(&pod("b", "4"));
        let snap = s.snapshot();
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[&ObjectKey::new(Some("ns"), "a")], "3");
        assert!(s.anomalies().is_empty());
        assert_eq!(s.handled.load(Ordering::Relaxed), 4);
        assert_eq!(s.live.load(Ordering::Relaxed), 3);

        s.update(&pod("zz", "5"));
        s.delete(&pod("yy", "6"));
        s.add(&pod("a", "7"), false);
        assert_eq!(s.anomalies().len(), 3, "{:?}", s.anomalies());
    }

    #[test]
    fn drop_switch_loses_exactly_the_first_initial_add() {
        let s = Rebuilt::new(true);
        s.add(&pod("live", "1"), false);
        s.add(&pod("a", "2"), true);
        s.add(&pod("b", "3"), true);
        let snap = s.snapshot();
        assert!(snap.contains_key(&ObjectKey::new(Some("ns"), "live")));
        assert!(!snap.contains_key(&ObjectKey::new(Some("ns"), "a")));
        assert!(snap.contains_key(&ObjectKey::new(Some("ns"), "b")));
    }
}
