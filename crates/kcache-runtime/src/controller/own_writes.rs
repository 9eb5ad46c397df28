//! [`OwnWrites`]: the resourceVersions of the primary objects a controller wrote itself, so
//! that the watch events of those writes do not queue the key again at once.
//!
//! A reconcile that writes its own object (a status, an annotation, a finalizer) already
//! knows what it wrote; queueing the key again on the write's own watch event is what turns
//! a failing reconcile that writes into a hot loop (the event bypasses the backoff). Other
//! writers' events still queue it, and so do deletes.

use std::{collections::HashMap, time::Duration};

use kcache::store::ObjectKey;
use kube_core::Resource;
use parking_lot::Mutex;
use tokio::time::Instant;

/// Past this many objects with writes pending, a record drops the expired entries of all.
const SWEEP_OVER: usize = 1024;

/// The writes whose watch events are still to come, by object.
#[derive(Debug)]
pub(crate) struct OwnWrites {
    /// After this long, a write's event is no longer waited for (a relist may have merged it).
    ttl: Duration,
    writes: Mutex<HashMap<ObjectKey, Vec<(String, Instant)>>>,
}

fn key_of<K: Resource>(obj: &K) -> Option<(ObjectKey, &str)> {
    let meta = obj.meta();
    let name = meta.name.as_deref()?;
    let rv = meta
        .resource_version
        .as_deref()
        .filter(|rv| !rv.is_empty())?;
    Some((ObjectKey::new(meta.namespace.as_deref(), name), rv))
}

impl OwnWrites {
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            writes: Mutex::new(HashMap::new()),
        }
    }

    /// Records that this controller wrote `obj` (as the server answered). A write that
    /// finalized the object (terminating, no finalizer left) deleted it: its event is a
    /// delete, which always queues, so it is not recorded.
    pub(crate) fn record<K: Resource>(&self, obj: &K) {
        let meta = obj.meta();
        if meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(Vec::is_empty) {
            return;
        }
        let Some((key, rv)) = key_of(obj) else { return };
        let now = Instant::now();
        let mut writes = self.writes.lock();
        if writes.len() >= SWEEP_OVER {
            // Events lost to a relist leave entries behind: drop the expired ones.
            writes.retain(|_, list| {
                list.retain(|(_, at)| now.saturating_duration_since(*at) < self.ttl);
                !list.is_empty()
            });
        }
        let list = writes.entry(key).or_default();
        list.retain(|(_, at)| now.saturating_duration_since(*at) < self.ttl);
        list.push((rv.to_owned(), now));
    }

    /// Whether `obj` is at a resourceVersion this controller wrote (forgotten once seen).
    pub(crate) fn take<K: Resource>(&self, obj: &K) -> bool {
        let Some((key, rv)) = key_of(obj) else {
            return false;
        };
        let mut writes = self.writes.lock();
        let Some(list) = writes.get_mut(&key) else {
            return false;
        };
        let now = Instant::now();
        let mut found = false;
        list.retain(|(written, at)| {
            if now.saturating_duration_since(*at) >= self.ttl {
                return false;
            }
            if written == rv {
                found = true;
                return false;
            }
            true
        });
        if list.is_empty() {
            writes.remove(&key);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(rv: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.name = Some("a".into());
        cm.metadata.resource_version = Some(rv.into());
        cm
    }

    #[tokio::test(start_paused = true)]
    async fn an_own_write_is_taken_once_and_forgotten_after_the_ttl() {
        let own = OwnWrites::new(Duration::from_secs(60));
        own.record(&cm("5"));
        own.record(&cm("7"));
        assert!(!own.take(&cm("6")), "another writer's version");
        assert!(own.take(&cm("5")));
        assert!(!own.take(&cm("5")), "taken once");
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert!(!own.take(&cm("7")), "expired");
        assert!(own.writes.lock().is_empty());
    }

    #[test]
    fn a_write_that_finalized_the_object_is_not_recorded() {
        let own = OwnWrites::new(Duration::from_secs(60));
        let mut gone = cm("9");
        gone.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        own.record(&gone);
        assert!(own.writes.lock().is_empty());
    }
}
