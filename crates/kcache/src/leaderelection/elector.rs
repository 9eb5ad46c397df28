//! The acquire / renew loop.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::{
    sync::watch,
    time::{Instant, sleep, sleep_until, timeout_at},
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{
    config::{Config, Error, JITTER_FACTOR},
    lock::LeaseLock,
    state::{Callbacks, LeaderState, Observed},
};

/// A candidate in a leader election over a [`LeaseLock`], with client-go's semantics.
///
/// [`run`](Self::run) tries to acquire the lease every `retry_period` (jittered); once it
/// holds it, it renews every `retry_period`, and when no renewal succeeds within
/// `renew_deadline` it steps down and `run` returns. A standby takes over a lease held by
/// another candidate only after observing no change to it for the lease's duration, on its
/// own clock. Writes are conditional on the version last read: a conflict means someone
/// else wrote, and the next attempt re-reads.
///
/// Callbacks run on the task that calls `run` and must not block: spawn long work from
/// `on_started_leading`, or use [`run_leading`](super::run_leading).
///
/// ```no_run
/// use std::sync::Arc;
/// use kcache::leaderelection::{Config, FakeLock, LeaderElector};
/// use tokio_util::sync::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), kcache::leaderelection::Error> {
/// let elector = Arc::new(
///     LeaderElector::new(Config::new("replica-0"), FakeLock::new())?
///         .on_started_leading(|leading: CancellationToken| {
///             tokio::spawn(async move {
///                 // Work until leadership ends.
///                 leading.cancelled().await;
///             });
///         })
///         .on_stopped_leading(|| tracing::info!("no longer leading"))
///         .on_new_leader(|id| tracing::info!(%id, "new leader")),
/// );
/// let cancel = CancellationToken::new();
/// elector.run(cancel.clone()).await; // returns on cancel or when leadership is lost
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct LeaderElector<L> {
    pub(super) config: Config,
    pub(super) lock: L,
    pub(super) describe: String,
    pub(super) callbacks: Callbacks,
    pub(super) observed: Mutex<Observed>,
    pub(super) state: watch::Sender<LeaderState>,
}

impl<L: LeaseLock> LeaderElector<L> {
    /// An elector competing as `config.identity` on `lock`.
    ///
    /// # Errors
    /// [`Error`] when `config` is invalid ([`Config::validate`]).
    pub fn new(config: Config, lock: L) -> Result<Self, Error> {
        config.validate()?;
        let describe = lock.describe();
        Ok(Self {
            config,
            lock,
            describe,
            callbacks: Callbacks::default(),
            observed: Mutex::new(Observed::default()),
            state: watch::Sender::new(LeaderState::Standby { leader: None }),
        })
    }
}

impl<L> LeaderElector<L> {
    /// Called when this candidate starts leading, with a token cancelled when leadership
    /// ends (lost, or the run cancelled).
    #[must_use]
    pub fn on_started_leading(
        mut self,
        f: impl Fn(CancellationToken) + Send + Sync + 'static,
    ) -> Self {
        self.callbacks.started = Some(Arc::new(f));
        self
    }

    /// Called every time [`run`](Self::run) ends, whether or not this candidate led (as in
    /// client-go); after a release, if one is made.
    #[must_use]
    pub fn on_stopped_leading(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.callbacks.stopped = Some(Arc::new(f));
        self
    }

    /// Called with the holder's identity when the observed holder changes, including the
    /// first holder observed and this candidate itself. An empty holder (a released lease)
    /// is not reported.
    #[must_use]
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.callbacks.new_leader = Some(Arc::new(f));
        self
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether this candidate is leading now: between acquiring the lease and stepping down.
    /// (client-go's `IsLeader` compares the last observed holder instead, which stays true
    /// after a failed renewal until the lease is re-read.)
    pub fn is_leader(&self) -> bool {
        self.state.borrow().is_leading()
    }

    /// The holder last observed, if any (client-go's `GetLeader`); informational.
    pub fn leader(&self) -> Option<String> {
        let o = self.observed.lock();
        Some(o.holder().to_owned()).filter(|h| !h.is_empty())
    }

    /// The leader state, updated as it changes.
    pub fn watch(&self) -> watch::Receiver<LeaderState> {
        self.state.subscribe()
    }

    pub(super) fn standby_state(&self) -> LeaderState {
        let leader = self.leader().filter(|h| *h != self.config.identity);
        LeaderState::Standby { leader }
    }
}

/// Steps down and runs `on_stopped_leading` when `run` ends, even if its future is dropped.
struct RunGuard<'a, L> {
    elector: &'a LeaderElector<L>,
    leading: Option<CancellationToken>,
}

impl<L> RunGuard<'_, L> {
    fn step_down(&mut self) {
        if let Some(token) = self.leading.take() {
            token.cancel();
            self.elector
                .state
                .send_replace(self.elector.standby_state());
        }
    }
}

impl<L> Drop for RunGuard<'_, L> {
    fn drop(&mut self) {
        self.step_down();
        if let Some(f) = &self.elector.callbacks.stopped {
            f();
        }
    }
}

impl<L: LeaseLock> LeaderElector<L> {
    /// Competes for the lease until `cancel` is cancelled or, once leading, until leadership
    /// is lost. Run one at a time per elector; it may be run again after it returns.
    ///
    /// On the way out: the leading token is cancelled, the state becomes
    /// [`LeaderState::Standby`], the lease is released if `release_on_cancel` is set and
    /// this candidate still holds it, then `on_stopped_leading` runs (always, even if this
    /// candidate never led, or the future is dropped).
    pub async fn run(&self, cancel: CancellationToken) {
        let mut guard = RunGuard {
            elector: self,
            leading: None,
        };
        if !self.acquire(&cancel).await {
            return;
        }
        let leading = cancel.child_token();
        guard.leading = Some(leading.clone());
        self.state.send_replace(LeaderState::Leading);
        if let Some(f) = &self.callbacks.started {
            f(leading);
        }
        self.renew(&cancel).await;
        guard.step_down();
        if self.config.release_on_cancel {
            self.release().await;
        }
    }

    async fn acquire(&self, cancel: &CancellationToken) -> bool {
        let (lock, identity) = (&self.describe, &self.config.identity);
        info!(%lock, %identity, "attempting to acquire the leader lease");
        loop {
            let acquired = tokio::select! {
                biased;
                () = cancel.cancelled() => return false,
                ok = self.try_acquire_or_renew() => ok,
            };
            self.maybe_report_transition();
            if acquired {
                info!(%lock, %identity, "acquired the leader lease");
                return true;
            }
            debug!(%lock, "did not acquire the leader lease; will retry");
            let pause = self
                .config
                .retry_period
                .mul_f64(1.0 + JITTER_FACTOR * rand::random::<f64>());
            tokio::select! {
                biased;
                () = cancel.cancelled() => return false,
                () = sleep(pause) => {}
            }
        }
    }

    async fn renew(&self, cancel: &CancellationToken) {
        let lock = &self.describe;
        loop {
            let deadline = Instant::now() + self.config.renew_deadline;
            let renewed = self.renew_until(deadline, cancel).await;
            self.maybe_report_transition();
            match renewed {
                None => {
                    info!(%lock, "leader election cancelled");
                    return;
                }
                Some(false) => {
                    warn!(%lock, deadline = ?self.config.renew_deadline,
                        "failed to renew the leader lease within the deadline; stepping down");
                    return;
                }
                Some(true) => debug!(%lock, "renewed the leader lease"),
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    info!(%lock, "leader election cancelled");
                    return;
                }
                () = sleep(self.config.retry_period) => {}
            }
        }
    }

    /// Retries every `retry_period` until a renewal succeeds (`Some(true)`), `deadline`
    /// passes (`Some(false)`) or `cancel` fires (`None`).
    async fn renew_until(&self, deadline: Instant, cancel: &CancellationToken) -> Option<bool> {
        loop {
            let attempt = tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                r = timeout_at(deadline, self.try_acquire_or_renew()) => r,
            };
            match attempt {
                Ok(true) => return Some(true),
                Ok(false) => {}
                Err(_elapsed) => return Some(false),
            }
            let next = (Instant::now() + self.config.retry_period).min(deadline);
            tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                () = sleep_until(next) => {}
            }
            if Instant::now() >= deadline {
                return Some(false);
            }
        }
    }
}
