//! The elector's timing and identity, with client-go's defaults and validation.

use std::time::Duration;

/// client-go's `JitterFactor`: acquire attempts wait between `retry_period` and
/// `(1 + JITTER_FACTOR) * retry_period`, so `renew_deadline` must exceed
/// `JITTER_FACTOR * retry_period`.
pub const JITTER_FACTOR: f64 = 1.2;

/// How a [`LeaderElector`](super::LeaderElector) competes for its lease.
///
/// [`Config::new`] gives client-go's core defaults (15 s / 10 s / 2 s); change the public
/// fields to tune them and [`Config::validate`] (also run by
/// [`LeaderElector::new`](super::LeaderElector::new)) checks them.
///
/// ```
/// use std::time::Duration;
/// use kcache::leaderelection::Config;
///
/// let mut config = Config::new("replica-0");
/// config.release_on_cancel = true;
/// assert_eq!(config.lease_duration, Duration::from_secs(15));
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// This candidate's identity, written as the lease's `holderIdentity`; unique among the
    /// candidates (a pod name, or hostname plus a random suffix).
    pub identity: String,
    /// How long a standby waits, without observing any change to the lease, before it takes
    /// over. Measured on the standby's own clock from its last observed change, never from
    /// the record's timestamps. Written to the record in whole seconds (default 15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failing renewal before it steps down
    /// (default 10 s).
    pub renew_deadline: Duration,
    /// The pause between attempts: renewals every `retry_period`, acquire attempts every
    /// `retry_period` plus up to [`JITTER_FACTOR`] times as much (default 2 s).
    pub retry_period: Duration,
    /// When the run is cancelled while leading, write the lease with an empty holder and a
    /// 1 s duration so that a standby takes over at once. Only set it if the work guarded
    /// by the lease has stopped by the time the run is cancelled (default false).
    pub release_on_cancel: bool,
}

impl Config {
    /// client-go's core defaults for `identity`: lease 15 s, renew deadline 10 s, retry 2 s,
    /// no release on cancel.
    pub fn new(identity: impl Into<String>) -> Self {
        Self {
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: false,
        }
    }

    /// Checks client-go's rules: every duration positive,
    /// `lease_duration > renew_deadline > JITTER_FACTOR * retry_period`, a non-empty
    /// identity. In addition (the lease stores whole seconds) `lease_duration` must be at
    /// least 1 s and fit the record's `i32`.
    ///
    /// # Errors
    /// The first rule broken, as an [`Error`].
    pub fn validate(&self) -> Result<(), Error> {
        if self.lease_duration.is_zero() {
            return Err(Error::ZeroLeaseDuration);
        }
        if self.renew_deadline.is_zero() {
            return Err(Error::ZeroRenewDeadline);
        }
        if self.retry_period.is_zero() {
            return Err(Error::ZeroRetryPeriod);
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::LeaseDurationNotAboveRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(Error::RenewDeadlineNotAboveJitteredRetry {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        if self.lease_duration < Duration::from_secs(1)
            || self.lease_duration.as_secs() > i32::MAX as u64
        {
            return Err(Error::LeaseDurationOutOfRange(self.lease_duration));
        }
        if self.identity.is_empty() {
            return Err(Error::EmptyIdentity);
        }
        Ok(())
    }

    /// `lease_duration` in the record's whole seconds (truncated, as client-go does).
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// An invalid [`Config`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `lease_duration` is zero.
    #[error("leader election: lease_duration must be greater than zero")]
    ZeroLeaseDuration,
    /// `renew_deadline` is zero.
    #[error("leader election: renew_deadline must be greater than zero")]
    ZeroRenewDeadline,
    /// `retry_period` is zero.
    #[error("leader election: retry_period must be greater than zero")]
    ZeroRetryPeriod,
    /// `lease_duration <= renew_deadline`: a standby could take over while the leader still
    /// believes it may renew.
    #[error(
        "leader election: lease_duration ({lease_duration:?}) must be greater than \
         renew_deadline ({renew_deadline:?})"
    )]
    LeaseDurationNotAboveRenewDeadline {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
    /// `renew_deadline <= 1.2 * retry_period`: the leader would not get a jittered retry in
    /// before its deadline.
    #[error(
        "leader election: renew_deadline ({renew_deadline:?}) must be greater than \
         retry_period ({retry_period:?}) times the jitter factor 1.2"
    )]
    RenewDeadlineNotAboveJitteredRetry {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
    },
    /// `lease_duration` is under 1 s (the record would say 0 s) or too long for the record.
    #[error(
        "leader election: lease_duration ({0:?}) must be between 1 s and i32::MAX seconds, \
         the lease stores whole seconds"
    )]
    LeaseDurationOutOfRange(Duration),
    /// `identity` is empty.
    #[error("leader election: identity must not be empty")]
    EmptyIdentity,
}
