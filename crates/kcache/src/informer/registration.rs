//! [`HandlerRegistration`]: a handler's membership in an informer.

use std::sync::Arc;

use tokio::sync::Notify;

use kube_core::Resource;

use super::{
    SharedIndexInformer,
    listener::{Activity, Listener},
};

/// What a registration needs from its informer (type-erased over the object type).
pub(crate) trait InformerOps: Send + Sync {
    fn upstream_synced(&self) -> bool;
    fn sync_notify(&self) -> &Notify;
    fn remove_listener(&self, id: u64) -> bool;
}

/// What a registration needs from its listener.
pub(crate) trait ListenerOps: Send + Sync {
    fn id(&self) -> u64;
    fn name(&self) -> &str;
    fn max_pending(&self) -> usize;
    fn initial_done(&self) -> bool;
    fn pending(&self) -> usize;
    fn delivered(&self) -> u64;
    fn close(&self);
    fn is_closed(&self) -> bool;
    fn resync_period(&self) -> std::time::Duration;
    fn activity(&self) -> Arc<Activity>;
}

impl<K: Send + Sync + 'static> ListenerOps for Listener<K> {
    fn id(&self) -> u64 {
        self.id
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn max_pending(&self) -> usize {
        Listener::max_pending(self)
    }
    fn initial_done(&self) -> bool {
        Listener::initial_done(self)
    }
    fn pending(&self) -> usize {
        Listener::pending(self)
    }
    fn delivered(&self) -> u64 {
        Listener::delivered(self)
    }
    fn close(&self) {
        Listener::close(self);
    }
    fn is_closed(&self) -> bool {
        Listener::is_closed(self)
    }
    fn resync_period(&self) -> std::time::Duration {
        Listener::resync_period(self)
    }
    fn activity(&self) -> Arc<Activity> {
        Arc::clone(&self.activity)
    }
}

/// A registered handler (client-go's `ResourceEventHandlerRegistration`). Cheap to clone.
#[derive(Clone)]
pub struct HandlerRegistration {
    informer: Arc<dyn InformerOps>,
    listener: Arc<dyn ListenerOps>,
}

impl HandlerRegistration {
    pub(crate) fn new<K: Send + Sync + 'static>(
        informer: Arc<dyn InformerOps>,
        listener: Arc<Listener<K>>,
    ) -> Self {
        Self { informer, listener }
    }

    /// True once the informer has synced **and** this handler has handled every add of the
    /// initial list (or, for a handler added after start, every synthetic add).
    pub fn has_synced(&self) -> bool {
        self.informer.upstream_synced() && self.listener.initial_done()
    }

    /// Waits until [`has_synced`](Self::has_synced), or until the handler is removed or the
    /// informer stops (then it returns `false`).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn synced(&self) -> bool {
        loop {
            let notified = self.informer.sync_notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.has_synced() {
                return true;
            }
            if self.listener.is_closed() {
                return false;
            }
            notified.await;
        }
    }

    /// Notifications waiting for this handler (keys, for a coalescing buffer): its buffer depth.
    pub fn pending(&self) -> usize {
        self.listener.pending()
    }

    /// The largest [`pending`](Self::pending) this handler's buffer has reached: how far it
    /// fell behind at worst.
    pub fn max_pending(&self) -> usize {
        self.listener.max_pending()
    }

    /// The handler's name: [`HandlerConfig::name`](super::HandlerConfig::name), or
    /// `handler-N` (N counting the informer's registrations from 1).
    pub fn name(&self) -> &str {
        self.listener.name()
    }

    /// Notifications delivered to this handler so far.
    pub fn delivered(&self) -> u64 {
        self.listener.delivered()
    }

    /// Removes the handler: it gets no further notifications. Idempotent; other handlers are
    /// unaffected. Returns whether this call removed it.
    ///
    /// It does not wait: a call the handler is in goes on after `remove` returns (on another
    /// thread), and the handler may be entered once more by a task that had already taken
    /// its next notification. [`remove_and_wait`](Self::remove_and_wait) waits for both.
    pub fn remove(&self) -> bool {
        let removed = self.informer.remove_listener(self.listener.id());
        self.listener.close();
        removed
    }

    /// Removes the handler as [`remove`](Self::remove) does — at once, when called — and
    /// returns a future that resolves once the handler has returned from any call it was in
    /// and will never be called again: the handler's task has ended (client-go 1.37's
    /// `ShutDownEventHandler`). Notifications still buffered for it are dropped. The future
    /// resolves to whether this call removed the handler; a second removal waits the same way
    /// and resolves to `false`. Before the informer runs, or after it has stopped, it resolves
    /// at once.
    ///
    /// Never wait for it from inside the handler itself (from a handler method, or by blocking
    /// the handler on a task that waits for it): the handler would wait for its own return.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::informer::{self, HandlerFns, SharedIndexInformer};
    /// use kcache::testing::{FakeSource, config_map};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let source = FakeSource::<ConfigMap>::new();
    /// source.upsert(config_map("a"));
    /// let informer = SharedIndexInformer::new(source, informer::Config::default());
    /// let reg = informer.add_event_handler(HandlerFns::new().on_add(|_: &Arc<ConfigMap>, _| {}))?;
    /// let cancel = CancellationToken::new();
    /// let run = tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
    /// reg.synced().await;
    /// assert!(reg.remove_and_wait().await, "removed, and the handler has stopped");
    /// assert!(!reg.remove_and_wait().await, "already removed");
    /// cancel.cancel();
    /// run.await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe. The handler is removed when this method is called, not when the future is
    /// first polled; dropping the future abandons only the wait, and the handler stays removed
    /// (its last call may then still be in progress).
    pub fn remove_and_wait(&self) -> impl Future<Output = bool> + Send + 'static {
        let removed = self.remove();
        let activity = self.listener.activity();
        async move {
            activity.idle().await;
            removed
        }
    }

    /// The resync period in effect for this handler (zero: never), after client-go's rules.
    pub fn resync_period(&self) -> std::time::Duration {
        self.listener.resync_period()
    }

    /// Whether the handler was removed (or the informer stopped).
    pub fn is_removed(&self) -> bool {
        self.listener.is_closed()
    }
}

impl std::fmt::Debug for HandlerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("id", &self.listener.id())
            .field("name", &self.listener.name())
            .field("pending", &self.listener.pending())
            .finish()
    }
}

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// The handlers registered now, in registration order (removed ones are not listed): their
    /// names, buffer depths and sync state, for metrics.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::informer::{self, HandlerConfig, HandlerFns, SharedIndexInformer};
    /// use kcache::testing::FakeSource;
    ///
    /// let informer = SharedIndexInformer::new(FakeSource::<ConfigMap>::new(), informer::Config::default());
    /// let first = informer.add_event_handler(HandlerFns::new())?;
    /// informer.add_event_handler_with_config(HandlerFns::new(), HandlerConfig::default().name("audit"))?;
    /// informer.add_event_handler(HandlerFns::new())?;
    /// let names = || -> Vec<String> { informer.handlers().iter().map(|h| h.name().to_owned()).collect() };
    /// assert_eq!(names(), ["handler-1", "audit", "handler-3"]);
    /// first.remove();
    /// assert_eq!(names(), ["audit", "handler-3"]);
    /// # Ok::<(), kcache::informer::Error>(())
    /// ```
    pub fn handlers(&self) -> Vec<HandlerRegistration> {
        let ops = Arc::clone(&self.inner) as Arc<dyn InformerOps>;
        self.inner
            .processor
            .listeners()
            .into_iter()
            .map(|l| HandlerRegistration::new(Arc::clone(&ops), l))
            .collect()
    }
}
