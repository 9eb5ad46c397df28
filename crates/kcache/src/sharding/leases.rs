//! The Leases a shard group runs on: one per shard (`<group>-shard-<i>`) and one per live
//! replica (`<group>-member-<identity>`), listed together and written with optimistic
//! concurrency.

use crate::leaderelection::{LeaseRecord, LockError, VersionedRecord};

/// The label every Lease of a shard group carries, with the group's name as its value
/// (listed with `labelSelector=kcache.dev/shard-group=<group>`).
pub const GROUP_LABEL: &str = "kcache.dev/shard-group";

/// One Lease of the group: its name and record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedRecord {
    /// The Lease's name.
    pub name: String,
    /// Its record and resource version.
    pub record: VersionedRecord,
}

/// Lists, creates and updates the Leases of one shard group.
///
/// Implemented over HTTP by `kcache-client` (`HttpShardLeases`), in memory by `FakeLeases`
/// (feature `testing`).
pub trait ShardLeases: Send + Sync + 'static {
    /// Every Lease of the group.
    ///
    /// # Errors
    /// [`LockError::Other`] when they cannot be listed.
    fn list(&self) -> impl Future<Output = Result<Vec<NamedRecord>, LockError>> + Send;

    /// Creates the Lease `name` (labelled with the group); returns its resource version.
    ///
    /// # Errors
    /// [`LockError::Conflict`] when it exists already.
    fn create(
        &self,
        name: &str,
        record: &LeaseRecord,
    ) -> impl Future<Output = Result<String, LockError>> + Send;

    /// Replaces the Lease `name` if it is still at `resource_version`.
    ///
    /// # Errors
    /// [`LockError::Conflict`] when it was written since; [`LockError::NotFound`] when it is
    /// gone.
    fn update(
        &self,
        name: &str,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> impl Future<Output = Result<String, LockError>> + Send;

    /// For logs: the namespace and group.
    fn describe(&self) -> String;
}
