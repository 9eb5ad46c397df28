//! [`HandlerRegistration`]: a handler's membership in an informer.

use std::sync::Arc;

use tokio::sync::Notify;

use super::listener::Listener;

/// What a registration needs from its informer (type-erased over the object type).
pub(crate) trait InformerOps: Send + Sync {
    fn upstream_synced(&self) -> bool;
    fn sync_notify(&self) -> &Notify;
    fn remove_listener(&self, id: u64) -> bool;
}

/// What a registration needs from its listener.
pub(crate) trait ListenerOps: Send + Sync {
    fn id(&self) -> u64;
    fn initial_done(&self) -> bool;
    fn pending(&self) -> usize;
    fn delivered(&self) -> u64;
    fn close(&self);
    fn is_closed(&self) -> bool;
    fn resync_period(&self) -> std::time::Duration;
}

impl<K: Send + Sync + 'static> ListenerOps for Listener<K> {
    fn id(&self) -> u64 {
        self.id
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

    /// Notifications delivered to this handler so far.
    pub fn delivered(&self) -> u64 {
        self.listener.delivered()
    }

    /// Removes the handler: it gets no further notifications. Idempotent; other handlers are
    /// unaffected. Returns whether this call removed it.
    pub fn remove(&self) -> bool {
        let removed = self.informer.remove_listener(self.listener.id());
        self.listener.close();
        removed
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
            .field("pending", &self.listener.pending())
            .finish()
    }
}
