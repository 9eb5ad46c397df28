//! client-go v0.36.5's `util/workqueue` tests — `queue_test.go`, `delaying_queue_test.go`,
//! `rate_limiting_queue_test.go`, `default_rate_limiters_test.go` and `metrics_test.go` —
//! ported one for one to kcache's [`Queue`], [`DelayingQueue`], [`RateLimitingQueue`], rate
//! limiters and [`MetricsProvider`]. kcache has no parallelizer, so `parallelizer_test.go` has
//! nothing to port.
//!
//! Each test is named after the Go test it ports (snake case). Where client-go steps a fake
//! clock, these tests pause tokio's clock and advance it. `README.md` lists every Go
//! test with its Rust counterpart and status.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kcache::workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};
use kcache::workqueue::{
    DelayingQueue, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    Queue, QueueConfig, RateLimiter, RateLimitingQueue, RateLimitingQueueConfig,
    WithMaxWaitRateLimiter,
};
use parking_lot::Mutex;
use tokio::task::{JoinHandle, yield_now};
use tokio::time::advance;

/// How long any wait may take before the test fails (in paused-time tests, virtual time).
const WAIT: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the test loudly if it takes longer than [`WAIT`].
async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// Awaits a spawned task, failing the test if it panicked or did not finish in time.
async fn join<T>(what: &str, task: JoinHandle<T>) -> T {
    within(what, task)
        .await
        .unwrap_or_else(|e| panic!("{what} failed: {e}"))
}

/// Lets every other task (a queue's driver in particular) run until it waits. Yielding keeps
/// this task ready, so a paused clock is never auto-advanced meanwhile.
async fn settle() {
    for _ in 0..64 {
        yield_now().await;
    }
}

/// Yields until `len()` is `want` (client-go's `waitForAdded` polls `Len()` the same way).
async fn wait_for_len(what: &str, len: impl Fn() -> usize, want: usize) {
    for _ in 0..10_000 {
        if len() == want {
            return;
        }
        yield_now().await;
    }
    panic!("{what}: length stayed {} instead of {want}", len());
}

/// Asserts for a while that `len()` stays 0 (client-go polls `Len()` for 30 ms expecting a
/// timeout).
async fn stays_empty(what: &str, len: impl Fn() -> usize) {
    for _ in 0..256 {
        assert_eq!(len(), 0, "{what}: should not have added");
        yield_now().await;
    }
}

const MS: Duration = Duration::from_millis(1);

mod delaying;
mod metrics;
mod queue;
mod rate_limiting;
