//! Fault injection: drop, stall or truncate watches, compact the history, delay or fail
//! requests. Driven from Rust through [`FaultHandle`] and, when enabled, over HTTP under
//! `/debug/kcache/`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::status::ApiError;
use crate::store::Store;

/// The status injected failures answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectedFailure {
    /// 500 InternalError.
    Internal,
    /// 429 TooManyRequests with `Retry-After: secs`.
    TooManyRequests {
        /// Seconds for the Retry-After header.
        retry_after: u64,
    },
    /// 410 Expired (an ERROR event for watches, as the real server sends it).
    Expired,
    /// 503 ServiceUnavailable.
    Unavailable,
}

impl InjectedFailure {
    /// The error a failed request answers with.
    #[must_use]
    pub fn to_error(self) -> ApiError {
        match self {
            InjectedFailure::Internal => ApiError::internal("injected fault"),
            InjectedFailure::TooManyRequests { retry_after } => {
                ApiError::too_many_requests(retry_after)
            }
            InjectedFailure::Expired => ApiError::list_too_old(),
            InjectedFailure::Unavailable => ApiError::new(
                503,
                "ServiceUnavailable",
                "injected fault: service unavailable",
            ),
        }
    }

    /// Parses `500`, `429`, `410` or `503`.
    #[must_use]
    pub fn from_code(code: u16, retry_after: u64) -> Option<Self> {
        match code {
            500 => Some(Self::Internal),
            429 => Some(Self::TooManyRequests { retry_after }),
            410 => Some(Self::Expired),
            503 => Some(Self::Unavailable),
            _ => None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct FaultState {
    fail: Mutex<Option<(u64, InjectedFailure)>>,
    latency_ms: AtomicU64,
    drop_token: Mutex<CancellationToken>,
    stall: watch::Sender<bool>,
    truncate: AtomicUsize,
    pub(crate) dropped: AtomicU64,
}

impl FaultState {
    pub(crate) fn new() -> Self {
        Self {
            fail: Mutex::new(None),
            latency_ms: AtomicU64::new(0),
            drop_token: Mutex::new(CancellationToken::new()),
            stall: watch::channel(false).0,
            truncate: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Consumes one injected failure, if any is pending.
    pub(crate) fn take_failure(&self) -> Option<InjectedFailure> {
        let mut f = self.fail.lock();
        let (n, kind) = (*f)?;
        if n <= 1 {
            *f = None;
        } else {
            *f = Some((n - 1, kind));
        }
        Some(kind)
    }

    pub(crate) fn latency(&self) -> Duration {
        Duration::from_millis(self.latency_ms.load(Ordering::Relaxed))
    }

    /// Token cancelled by the next "drop all watches".
    pub(crate) fn watch_token(&self) -> CancellationToken {
        self.drop_token.lock().clone()
    }

    pub(crate) fn stall_receiver(&self) -> watch::Receiver<bool> {
        self.stall.subscribe()
    }

    /// Whether the next watch event must be truncated (consumes one).
    pub(crate) fn take_truncate(&self) -> bool {
        self.truncate
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// Injects faults into a running server; cheap to clone.
#[derive(Debug, Clone)]
pub struct FaultHandle {
    pub(crate) state: Arc<FaultState>,
    pub(crate) store: Store,
}

impl FaultHandle {
    /// Ends every open watch now (a clean end of stream, as when a server restarts
    /// gracefully). Watches opened afterwards are unaffected.
    pub fn drop_watches(&self) {
        let old = std::mem::take(&mut *self.state.drop_token.lock());
        old.cancel();
    }

    /// Drops all history: lists at older RVs, older continue tokens and watches from older
    /// RVs now get 410 Expired.
    pub fn compact(&self) {
        self.store.compact_now();
    }

    /// Makes the next `count` API requests fail with `failure`.
    pub fn fail_next(&self, count: u64, failure: InjectedFailure) {
        *self.state.fail.lock() = (count > 0).then_some((count, failure));
    }

    /// Delays every API request by `latency` (zero turns it off).
    pub fn set_latency(&self, latency: Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self.state.latency_ms.store(ms, Ordering::Relaxed);
    }

    /// Stalls (or resumes) every watch: while stalled, no events or bookmarks are sent but
    /// connections stay open; resuming delivers what was held back.
    pub fn stall_watches(&self, stalled: bool) {
        self.state.stall.send_replace(stalled);
    }

    /// The next `count` watch events are cut in the middle of their JSON and their
    /// connections aborted (no terminating chunk).
    pub fn truncate_next_watch_events(&self, count: usize) {
        self.state.truncate.store(count, Ordering::Release);
    }

    /// How many watches were ended by [`drop_watches`](Self::drop_watches) or truncation.
    #[must_use]
    pub fn dropped_watches(&self) -> u64 {
        self.state.dropped.load(Ordering::Relaxed)
    }
}
