//! The storage an election runs on: one lease record, read and written with optimistic
//! concurrency.

use std::{fmt, time::SystemTime};

/// The election state stored in the lock (a `coordination.k8s.io/v1` Lease's spec).
///
/// The timestamps are informational: electors never compare them with their own clock, they
/// only notice that the record changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The holder's identity; empty when nobody holds the lease (after a release).
    pub holder_identity: String,
    /// How long, in seconds, the holder claims the lease after each renewal.
    pub lease_duration_seconds: i32,
    /// When the current holder acquired the lease.
    pub acquire_time: Option<SystemTime>,
    /// When the current holder last renewed the lease.
    pub renew_time: Option<SystemTime>,
    /// How many times the lease changed hands.
    pub leader_transitions: i32,
}

/// A [`LeaseRecord`] with the opaque `resourceVersion` it was read or written at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedRecord {
    /// The record.
    pub record: LeaseRecord,
    /// The version to pass to [`LeaseLock::update`]; opaque to the elector.
    pub resource_version: String,
}

/// Gets, creates and updates one lease record.
///
/// Implemented over HTTP by `kcache-client`, and in memory by
/// [`FakeLock`](super::FakeLock). Updates are conditional on the `resource_version` they
/// are given: when the record was written since, they fail with
/// [`LockError::Conflict`].
pub trait LeaseLock: Send + Sync {
    /// The current record.
    ///
    /// # Errors
    /// [`LockError::NotFound`] when there is no record yet; [`LockError::Other`] for anything
    /// else.
    fn get(&self) -> impl Future<Output = Result<VersionedRecord, LockError>> + Send;

    /// Creates the record; returns the new resource version.
    ///
    /// # Errors
    /// [`LockError::Conflict`] when it already exists (another candidate created it first).
    fn create(
        &self,
        record: &LeaseRecord,
    ) -> impl Future<Output = Result<String, LockError>> + Send;

    /// Replaces the record if it is still at `resource_version`; returns the new version.
    ///
    /// # Errors
    /// [`LockError::Conflict`] when it was written since; [`LockError::NotFound`] when it was
    /// deleted.
    fn update(
        &self,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> impl Future<Output = Result<String, LockError>> + Send;

    /// A short description for logs, such as `namespace/name`.
    fn describe(&self) -> String;
}

/// A [`LeaseLock`] failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The record changed since the given version, or was created by someone else first
    /// (HTTP 409).
    #[error("lease lock conflict: {0}")]
    Conflict(String),
    /// There is no record (HTTP 404).
    #[error("lease lock not found: {0}")]
    NotFound(String),
    /// Any other failure: transport, authorization, decoding.
    #[error("lease lock error: {0}")]
    Other(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl LockError {
    /// An [`LockError::Other`] from any error (or message).
    pub fn other(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Other(err.into())
    }

    /// Whether this is [`LockError::Conflict`].
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict(_))
    }

    /// Whether this is [`LockError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound(_))
    }
}

/// Describes a holder for logs: the identity, or `<none>`.
pub(crate) struct Holder<'a>(pub(crate) &'a str);

impl fmt::Display for Holder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("<none>")
        } else {
            f.write_str(self.0)
        }
    }
}
