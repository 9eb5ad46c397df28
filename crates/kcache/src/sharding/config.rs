//! [`Config`] of a [`ShardManager`](super::ShardManager), and its validation.

use std::time::Duration;

use super::selector::Field;

/// How a [`ShardManager`](super::ShardManager) shares its shards.
///
/// ```
/// use std::time::Duration;
/// use kcache::sharding::Config;
/// let config = Config::new("my-controller", "replica-0")
///     .shards(12)
///     .lease_duration(Duration::from_secs(15));
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The group's name: Leases are `<group>-shard-<i>` and `<group>-member-<identity>`.
    pub group: String,
    /// This replica's identity (unique among the replicas; part of a Lease name, so a DNS
    /// label: lower-case letters, digits and `-`).
    pub identity: String,
    /// The number of shards (fixed for the life of the group; default 12).
    pub shards: u32,
    /// The field objects are sharded on (default `metadata.uid`).
    pub field: Field,
    /// How long a Lease stays valid after its last observed renewal (default 15 s).
    pub lease_duration: Duration,
    /// A shard whose Lease was not renewed for this long stops being reconciled here
    /// (default 10 s; less than `lease_duration`).
    pub renew_deadline: Duration,
    /// How often Leases are read and renewed (default 2 s, with up to 20 % jitter).
    pub retry_period: Duration,
}

/// An invalid [`Config`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work; the message says why.
    #[error("invalid shard manager configuration: {0}")]
    InvalidConfig(String),
}

impl Config {
    /// Defaults for `group` and `identity`.
    pub fn new(group: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            identity: identity.into(),
            shards: 12,
            field: Field::Uid,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Sets [`Config::shards`].
    #[must_use]
    pub fn shards(mut self, n: u32) -> Self {
        self.shards = n;
        self
    }

    /// Sets [`Config::field`].
    #[must_use]
    pub fn field(mut self, field: Field) -> Self {
        self.field = field;
        self
    }

    /// Sets [`Config::lease_duration`].
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// Sets [`Config::renew_deadline`].
    #[must_use]
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// Sets [`Config::retry_period`].
    #[must_use]
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// Checks the configuration (client-go's leader election rules for the durations).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] saying what is wrong.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::InvalidConfig(m.to_owned()));
        if self.group.is_empty() || self.identity.is_empty() {
            return bad("the group and the identity must not be empty");
        }
        let label_ok = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        };
        if !label_ok(&self.group) || !label_ok(&self.identity) {
            return bad(
                "the group and the identity must be lower-case letters, digits, '-' or '.'",
            );
        }
        if self.shards == 0 || self.shards > 4096 {
            return bad("shards must be between 1 and 4096");
        }
        if self.lease_duration.as_secs() < 1 {
            return bad("lease_duration must be at least 1 s (Leases count whole seconds)");
        }
        if self.lease_duration <= self.renew_deadline {
            return bad("lease_duration must be greater than renew_deadline");
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * 1.2 {
            return bad("renew_deadline must be greater than retry_period × 1.2");
        }
        if self.retry_period.is_zero() {
            return bad("retry_period must be positive");
        }
        Ok(())
    }

    pub(super) fn shard_lease(&self, shard: u32) -> String {
        format!("{}-shard-{shard}", self.group)
    }

    pub(super) fn member_prefix(&self) -> String {
        format!("{}-member-", self.group)
    }

    pub(super) fn member_lease(&self) -> String {
        format!("{}{}", self.member_prefix(), self.identity)
    }
}
