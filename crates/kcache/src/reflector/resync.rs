//! The periodic resync timer.

use std::time::Duration;

use tokio::time::Instant;

/// Fires every `period` (never when the period is zero).
pub(crate) struct Resync {
    period: Duration,
    deadline: Option<Instant>,
}

impl Resync {
    pub(crate) fn new(period: Duration) -> Self {
        let mut r = Self {
            period,
            deadline: None,
        };
        r.reset();
        r
    }

    pub(crate) fn reset(&mut self) {
        self.deadline = (!self.period.is_zero())
            .then(|| Instant::now().checked_add(self.period))
            .flatten();
    }

    /// Completes when the resync is due; never when disabled.
    pub(crate) async fn due(&self) {
        match self.deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    }
}
