//! How the registry wakes the garbage collector (`crate::gc`) after a write that may concern
//! it, without depending on it: the collector's task waits on the [`Trigger`] the state holds.

use tokio::sync::Notify;

use crate::object::StoredObject;

/// Wakes the collector; cheap, and harmless when it is off.
#[derive(Debug, Default)]
pub(crate) struct Trigger(Notify);

impl Trigger {
    /// Waits for a wake-up (the collector's task).
    pub(crate) async fn notified(&self) {
        self.0.notified().await;
    }

    /// Asks for a pass soon.
    pub(crate) fn wake(&self) {
        self.0.notify_one();
    }

    /// Asks for a pass when `obj` has owner references or is being deleted.
    pub(crate) fn wake_for(&self, obj: &StoredObject) {
        if concerns_gc(obj) {
            self.wake();
        }
    }
}

/// Whether the serialised object mentions owner references or a deletionTimestamp (a cheap
/// byte search; a false positive only costs a parse).
pub(crate) fn concerns_gc(obj: &StoredObject) -> bool {
    let json = obj.json();
    memchr::memmem::find(json, b"\"ownerReferences\"").is_some()
        || memchr::memmem::find(json, b"\"deletionTimestamp\"").is_some()
}
