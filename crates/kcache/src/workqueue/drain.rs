//! The one drain every queue's `shutdown_with_drain` waits on.

use std::pin::pin;

use tokio::sync::Notify;

/// Waits until `drained()` holds, re-checking each time `notify` fires. The check runs after
/// the waiter is registered, so a notification between the check and the wait is not lost.
pub(super) async fn wait(notify: &Notify, drained: impl Fn() -> bool) {
    loop {
        let mut notified = pin!(notify.notified());
        notified.as_mut().enable();
        if drained() {
            return;
        }
        notified.await;
    }
}
