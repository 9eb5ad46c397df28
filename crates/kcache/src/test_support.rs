//! Helpers shared by the crate's unit tests.

use std::time::Duration;

/// Waits until `cond` holds, polling every 10 ms (in paused time that is free); panics after
/// 10,000 polls (100 s of test time).
pub(crate) async fn eventually(cond: impl FnMut() -> bool) {
    eventually_tries("condition never held", 10_000, cond).await;
}

/// Waits until `cond` holds, polling every 10 ms at most `tries` times; then panics with
/// `what`.
pub(crate) async fn eventually_tries(what: &str, tries: u32, mut cond: impl FnMut() -> bool) {
    for _ in 0..tries {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}");
}
