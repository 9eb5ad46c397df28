//! Read-your-own-writes: what a controller wrote, per reconciled key, until its caches have
//! seen it.
//!
//! Every write made through a reconcile's [`TrackedApi`](crate::TrackedApi) records an
//! expectation for the key being reconciled: "the cache of this type holds this object at a
//! resourceVersion at least as new as the write" (or, for a delete, "no longer holds it").
//! Before the next reconcile of that key, the worker waits until every expectation of the key
//! is met, for at most the controller's cache wait timeout:
//!
//! - met: the reconcile runs, and reads its own writes from the cache;
//! - not met in time: the reconcile does not run on a stale cache; the key is retried with
//!   the queue's backoff (counted in `kcache_controller_cache_wait_timeouts_total`);
//! - an expectation older than the expectation TTL (five minutes, kube-controller-manager's
//!   `ExpectationsTimeout`) is dropped with a warning, so that a write whose event never
//!   comes (the object changed again and the watch compacted it away) cannot hold a key back
//!   for ever.
//!
//! resourceVersions are compared as integers, as kube-apiserver's are (etcd revisions; the
//! comparison client-go 1.35 offers as `CompareResourceVersion`); one that is not an integer
//! matches only itself.

use std::{collections::HashMap, sync::Arc, time::Duration};

use kcache::store::ObjectKey;
use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};
use tracing::warn;

use crate::metrics::ControllerCacheMetrics;

/// The metadata of a cache's objects, as read-your-own-writes reads it.
pub(crate) trait MetaReader: Send + Sync {
    /// The resourceVersion of the cache's last list or watch event.
    fn last_sync_resource_version(&self) -> String;
    /// The resourceVersion of the object with this key (empty when it has none), if cached.
    fn resource_version(&self, key: &str) -> Option<String>;
}

impl MetaReader for Arc<dyn MetaReader> {
    fn last_sync_resource_version(&self) -> String {
        (**self).last_sync_resource_version()
    }

    fn resource_version(&self, key: &str) -> Option<String> {
        (**self).resource_version(key)
    }
}

/// How often a waiting worker looks at the caches without being woken (a bookmark moves a
/// cache's resourceVersion without a notification).
const POLL: Duration = Duration::from_millis(50);

/// How often a new write also drops the met and expired expectations of every key: a key
/// that is never reconciled again would otherwise keep its entries.
const SWEEP_ALL_EVERY: Duration = Duration::from_secs(30);

/// Whether resourceVersion `seen` is at least as new as `written`.
pub(crate) fn at_least(seen: &str, written: &str) -> bool {
    match (seen.parse::<u64>(), written.parse::<u64>()) {
        (Ok(seen), Ok(written)) => seen >= written,
        _ => !seen.is_empty() && seen == written,
    }
}

/// One write not yet seen by its cache.
struct Pending {
    /// True once the cache has caught up with the write.
    met: Box<dyn Fn() -> bool + Send + Sync>,
    /// For logs: `created deployments mon/web at resourceVersion 42`.
    what: String,
    since: Instant,
}

/// What a write leaves behind in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// The object exists at the write's resourceVersion (create, apply, patch, update, or a
    /// delete that left it terminating).
    Upserted,
    /// The object is gone.
    Deleted,
}

/// The cache's state has caught up with a write of `key` at `rv`.
fn caught_up(cache: &dyn MetaReader, key: &ObjectKey, rv: &str, written: Written) -> bool {
    if !rv.is_empty() && at_least(&cache.last_sync_resource_version(), rv) {
        return true;
    }
    let cached = cache.resource_version(key.as_str());
    match written {
        Written::Upserted => cached.is_some_and(|seen| !seen.is_empty() && at_least(&seen, rv)),
        Written::Deleted => cached.is_none(),
    }
}

/// A reconcile that could not run: the cache had not caught up with an earlier write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cache has not caught up with this controller's earlier write ({what}) within {waited:?}; retrying later"
)]
pub(crate) struct CacheBehind {
    /// The oldest write not yet seen.
    pub(crate) what: String,
    /// How long the worker waited.
    pub(crate) waited: Duration,
}

/// The expectations of one controller, by reconciled key.
pub(crate) struct Expectations {
    controller: String,
    pending: Mutex<HashMap<ObjectKey, Vec<Pending>>>,
    /// When every key was last swept.
    swept: Mutex<Instant>,
    /// Notified after every change applied to any of the manager's caches.
    wake: Arc<Notify>,
    ttl: Duration,
    metrics: ControllerCacheMetrics,
}

impl std::fmt::Debug for Expectations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expectations")
            .field("controller", &self.controller)
            .field("keys", &self.pending.lock().len())
            .finish_non_exhaustive()
    }
}

impl Expectations {
    pub(crate) fn new(
        controller: String,
        wake: Arc<Notify>,
        ttl: Duration,
        metrics: ControllerCacheMetrics,
    ) -> Self {
        Self {
            controller,
            pending: Mutex::new(HashMap::new()),
            swept: Mutex::new(Instant::now()),
            wake,
            ttl,
            metrics,
        }
    }

    /// Records that the reconcile of `reconciled` wrote `key` into the cache `cache` at `rv`.
    pub(crate) fn expect<R>(
        &self,
        reconciled: &ObjectKey,
        cache: R,
        key: ObjectKey,
        rv: String,
        written: Written,
        what: String,
    ) where
        R: MetaReader + 'static,
    {
        self.maybe_sweep_all(Instant::now());
        if caught_up(&cache, &key, &rv, written) {
            return;
        }
        let pending = Pending {
            met: Box::new(move || caught_up(&cache, &key, &rv, written)),
            what,
            since: Instant::now(),
        };
        self.pending
            .lock()
            .entry(reconciled.clone())
            .or_default()
            .push(pending);
        self.metrics.pending.inc();
    }

    /// Every [`SWEEP_ALL_EVERY`], drops the met and expired expectations of every key.
    fn maybe_sweep_all(&self, now: Instant) {
        {
            let mut swept = self.swept.lock();
            if now.saturating_duration_since(*swept) < SWEEP_ALL_EVERY {
                return;
            }
            *swept = now;
        }
        let keys: Vec<ObjectKey> = self.pending.lock().keys().cloned().collect();
        for key in keys {
            self.sweep(&key, now);
        }
    }

    /// Drops the met and expired expectations of `key`; the oldest one left, if any.
    fn sweep(&self, key: &ObjectKey, now: Instant) -> Option<String> {
        let mut pending = self.pending.lock();
        let list = pending.get_mut(key)?;
        let before = list.len();
        list.retain(|p| {
            if (p.met)() {
                return false;
            }
            if now.saturating_duration_since(p.since) >= self.ttl {
                warn!(controller = %self.controller, %key, write = %p.what, ttl = ?self.ttl,
                    "the cache never showed this write; no longer waiting for it");
                self.metrics.expired.inc();
                return false;
            }
            true
        });
        let gone = before - list.len();
        self.metrics
            .pending
            .dec_by(i64::try_from(gone).unwrap_or(i64::MAX));
        let oldest = list.first().map(|p| p.what.clone());
        if list.is_empty() {
            pending.remove(key);
        }
        oldest
    }

    /// Waits until the caches have caught up with every write recorded for `key`, for at most
    /// `timeout`.
    ///
    /// # Errors
    /// [`CacheBehind`] when they have not within `timeout`.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is consumed.
    pub(crate) async fn wait(&self, key: &ObjectKey, timeout: Duration) -> Result<(), CacheBehind> {
        let started = Instant::now();
        let deadline = started + timeout;
        let mut waiting = false;
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = Instant::now();
            let Some(what) = self.sweep(key, now) else {
                if waiting {
                    self.metrics
                        .wait_seconds
                        .observe(now.saturating_duration_since(started).as_secs_f64());
                }
                return Ok(());
            };
            if !waiting {
                waiting = true;
                self.metrics.waits.inc();
            }
            if now >= deadline {
                self.metrics.wait_seconds.observe(timeout.as_secs_f64());
                self.metrics.timeouts.inc();
                return Err(CacheBehind {
                    what,
                    waited: timeout,
                });
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(POLL) => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Writes recorded and not yet seen, over every key.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pending.lock().values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kcache::store::{Reader, ThreadSafeStore};
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::metrics::RuntimeMetrics;

    fn cm(name: &str, rv: &str) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.name = Some(name.into());
        cm.metadata.resource_version = Some(rv.into());
        Arc::new(cm)
    }

    fn setup() -> (ThreadSafeStore<ConfigMap>, Arc<Notify>, Expectations) {
        let store = ThreadSafeStore::<ConfigMap>::for_resource();
        let wake = Arc::new(Notify::new());
        let metrics = RuntimeMetrics::new(&mut Registry::default());
        let e = Expectations::new(
            "c".into(),
            Arc::clone(&wake),
            Duration::from_secs(300),
            metrics.controller("c"),
        );
        (store, wake, e)
    }

    #[test]
    fn resource_versions_compare_as_integers_and_opaque_ones_only_by_equality() {
        assert!(at_least("10", "9"));
        assert!(at_least("10", "10"));
        assert!(!at_least("9", "10"));
        assert!(at_least("abc", "abc"));
        assert!(!at_least("abd", "abc"));
        assert!(!at_least("", ""));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_waits_until_the_cache_holds_the_write_at_its_resource_version() {
        let (store, wake, e) = setup();
        let owner = ObjectKey::new(Some("ns"), "owner");
        let key = ObjectKey::new(Some("ns"), "child");
        store.add(cm("child", "5")).unwrap();
        e.expect(
            &owner,
            Reader::from(store.clone()),
            key.clone(),
            "7".into(),
            Written::Upserted,
            "patched configmaps ns/child".into(),
        );
        assert_eq!(e.len(), 1);
        let waiter = tokio::spawn(async move {
            let r = e.wait(&owner, Duration::from_secs(10)).await;
            (r, e)
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiter.is_finished(), "rv 5 is older than the write");
        store.update(cm("child", "7")).unwrap();
        wake.notify_waiters();
        let (r, e) = waiter.await.unwrap();
        assert_eq!(r, Ok(()));
        assert_eq!(e.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delete_is_seen_once_the_object_is_gone_and_a_wait_is_bounded() {
        let (store, _wake, e) = setup();
        let owner = ObjectKey::new(Some("ns"), "owner");
        store.add(cm("child", "5")).unwrap();
        e.expect(
            &owner,
            Reader::from(store.clone()),
            ObjectKey::new(Some("ns"), "child"),
            String::new(),
            Written::Deleted,
            "deleted configmaps ns/child".into(),
        );
        let behind = e.wait(&owner, Duration::from_secs(3)).await.unwrap_err();
        assert_eq!(behind.waited, Duration::from_secs(3));
        assert_eq!(behind.what, "deleted configmaps ns/child");
        // Still expected: the next reconcile waits again, and passes once it is gone.
        assert_eq!(e.len(), 1);
        store.delete_by_key("ns/child");
        assert_eq!(e.wait(&owner, Duration::from_secs(3)).await, Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn an_expectation_older_than_the_ttl_is_dropped() {
        let (store, _wake, e) = setup();
        let owner = ObjectKey::new(Some("ns"), "owner");
        e.expect(
            &owner,
            Reader::from(store.clone()),
            ObjectKey::new(Some("ns"), "child"),
            "9".into(),
            Written::Upserted,
            "created configmaps ns/child".into(),
        );
        tokio::time::sleep(Duration::from_secs(301)).await;
        assert_eq!(e.wait(&owner, Duration::from_secs(1)).await, Ok(()));
        assert_eq!(e.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_expectations_of_a_key_never_reconciled_again_are_dropped_by_later_writes() {
        let (store, _wake, e) = setup();
        let gone = ObjectKey::new(Some("ns"), "gone");
        let child = ObjectKey::new(Some("ns"), "child");
        let expect = |owner: &ObjectKey| {
            e.expect(
                owner,
                Reader::from(store.clone()),
                child.clone(),
                "9".into(),
                Written::Upserted,
                "applied configmaps ns/child".into(),
            );
        };
        expect(&gone);
        assert_eq!(e.len(), 1);
        // Seen by the cache, but "gone" is never reconciled again.
        store.add(cm("child", "9")).unwrap();
        tokio::time::sleep(SWEEP_ALL_EVERY).await;
        expect(&ObjectKey::new(Some("ns"), "other"));
        assert_eq!(
            e.len(),
            0,
            "met: dropped by the sweep; the new one is met at once"
        );
    }

    #[test]
    fn a_write_the_cache_already_holds_is_not_recorded() {
        let (store, _wake, e) = setup();
        store.add(cm("child", "8")).unwrap();
        e.expect(
            &ObjectKey::new(Some("ns"), "owner"),
            Reader::from(store),
            ObjectKey::new(Some("ns"), "child"),
            "8".into(),
            Written::Upserted,
            "applied configmaps ns/child".into(),
        );
        assert_eq!(e.len(), 0);
    }
}
