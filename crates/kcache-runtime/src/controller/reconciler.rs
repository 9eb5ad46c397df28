//! The function the kcache [`Controller`](kcache::controller::Controller) runs for each key:
//! wait for the caches to show this controller's earlier writes, read the object, call the
//! user's reconcile; and the error policy that sees through it.

use std::{fmt, future::Future, sync::Arc};

use kcache::{
    controller::{Action, ErrorAction, ErrorPolicy, ReconcileError},
    store::ObjectKey,
};
use tracing::debug;

use super::context::{Context, Shared};
use crate::{ApiObject, expectations::CacheBehind};

/// How a wrapped reconcile failed.
pub(crate) enum Failure<E> {
    /// The user's reconcile returned an error.
    Reconcile(E),
    /// It was not run: the caches had not caught up with an earlier write.
    CacheBehind(CacheBehind),
}

impl<E: fmt::Display> fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reconcile(e) => e.fmt(f),
            Self::CacheBehind(e) => e.fmt(f),
        }
    }
}

impl<E: ReconcileError> ReconcileError for Failure<E> {
    fn is_terminal(&self) -> bool {
        match self {
            Self::Reconcile(e) => e.is_terminal(),
            Self::CacheBehind(_) => false,
        }
    }
}

/// The user's error policy for their errors; the queue's backoff when the caches are behind.
pub(crate) struct Policy<P>(pub(crate) P);

impl<E, P: ErrorPolicy<E>> ErrorPolicy<Failure<E>> for Policy<P> {
    fn on_error(&self, key: &ObjectKey, error: &Failure<E>, retries: u32) -> ErrorAction {
        match error {
            Failure::Reconcile(e) => self.0.on_error(key, e, retries),
            Failure::CacheBehind(_) => ErrorAction::Backoff,
        }
    }
}

/// One reconcile of `key`: waits for the caches, reads the object, runs `reconcile`.
/// An object gone from the cache is not reconciled (its owned objects are garbage
/// collected; a finalizer keeps an object in the cache until its cleanup ran).
pub(crate) async fn reconcile_key<K, F, Fut, E>(
    shared: Arc<Shared<K>>,
    reconcile: Arc<F>,
    key: ObjectKey,
) -> Result<Action, Failure<E>>
where
    K: ApiObject,
    F: Fn(Arc<K>, Context<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    let timeout = shared.manager.config.cache_wait_timeout;
    tokio::select! {
        waited = shared.expectations.wait(&key, timeout) => waited.map_err(Failure::CacheBehind)?,
        // Draining: a reconcile in flight finishes, one still waiting is not started. Not a
        // failure: the key is left to the next leader (which queues every object), or to
        // this process's next start.
        () = shared.manager.stopping.cancelled() => {
            debug!(controller = %shared.name, %key, "shutting down: not reconciled");
            return Ok(Action::Done);
        }
    }
    // Read after the wait: the cache is now at least as new as this controller's writes.
    let Some(object) = shared.primary.get(&key) else {
        debug!(controller = %shared.name, %key, "gone from the cache; nothing to reconcile");
        return Ok(Action::Done);
    };
    let ctx = Context::new(Arc::clone(&shared), key, Arc::clone(&object));
    reconcile(object, ctx).await.map_err(Failure::Reconcile)
}
