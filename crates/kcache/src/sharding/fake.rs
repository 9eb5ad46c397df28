//! [`FakeLeases`]: the in-memory [`ShardLeases`], a test double (feature `testing`).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::{NamedRecord, ShardLeases};
use crate::leaderelection::{LeaseRecord, LockError, VersionedRecord};

/// In-memory [`ShardLeases`] with real optimistic concurrency; clones share the Leases, so
/// several [`ShardManager`](super::ShardManager)s can compete on them in one test.
///
/// ```
/// use kcache::leaderelection::LeaseRecord;
/// use kcache::sharding::{FakeLeases, ShardLeases};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let leases = FakeLeases::new();
/// let rv = leases.create("g-shard-0", &LeaseRecord::default()).await.unwrap();
/// leases.update("g-shard-0", &LeaseRecord::default(), &rv).await.unwrap();
/// assert!(leases.update("g-shard-0", &LeaseRecord::default(), &rv).await.unwrap_err().is_conflict());
/// # });
/// ```
#[derive(Clone, Debug, Default)]
pub struct FakeLeases {
    state: Arc<Mutex<FakeState>>,
}

#[derive(Debug, Default)]
struct FakeState {
    leases: BTreeMap<String, (LeaseRecord, u64)>,
    version: u64,
    failing: bool,
    latency: Duration,
    /// When each Lease was last written (tokio's clock, so paused-time tests can read it).
    written_at: BTreeMap<String, Instant>,
}

impl FakeLeases {
    /// No Leases.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current record of `name`.
    pub fn record(&self, name: &str) -> Option<LeaseRecord> {
        self.state.lock().leases.get(name).map(|(r, _)| r.clone())
    }

    /// Makes every call fail (an unreachable API server) until called with `false`.
    pub fn set_failing(&self, failing: bool) {
        self.state.lock().failing = failing;
    }

    /// Makes every call take `latency` before it answers (a slow API server).
    pub fn set_latency(&self, latency: Duration) {
        self.state.lock().latency = latency;
    }

    /// When `name` was last created or updated, on tokio's clock.
    pub fn written_at(&self, name: &str) -> Option<Instant> {
        self.state.lock().written_at.get(name).copied()
    }

    async fn delay(&self) {
        let latency = self.state.lock().latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
    }

    fn check(st: &FakeState) -> Result<(), LockError> {
        if st.failing {
            Err(LockError::other("the fake API server is unreachable"))
        } else {
            Ok(())
        }
    }
}

impl ShardLeases for FakeLeases {
    async fn list(&self) -> Result<Vec<NamedRecord>, LockError> {
        self.delay().await;
        let st = self.state.lock();
        Self::check(&st)?;
        Ok(st
            .leases
            .iter()
            .map(|(name, (record, v))| NamedRecord {
                name: name.clone(),
                record: VersionedRecord {
                    record: record.clone(),
                    resource_version: v.to_string(),
                },
            })
            .collect())
    }

    async fn create(&self, name: &str, record: &LeaseRecord) -> Result<String, LockError> {
        self.delay().await;
        let mut st = self.state.lock();
        Self::check(&st)?;
        if st.leases.contains_key(name) {
            return Err(LockError::Conflict(format!("{name} already exists")));
        }
        st.version += 1;
        let v = st.version;
        st.leases.insert(name.to_owned(), (record.clone(), v));
        st.written_at.insert(name.to_owned(), Instant::now());
        Ok(v.to_string())
    }

    async fn update(
        &self,
        name: &str,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> Result<String, LockError> {
        self.delay().await;
        let mut guard = self.state.lock();
        let st = &mut *guard;
        Self::check(st)?;
        st.version += 1;
        let v = st.version;
        match st.leases.get_mut(name) {
            None => Err(LockError::NotFound(name.to_owned())),
            Some((_, at)) if at.to_string() != resource_version => Err(LockError::Conflict(
                format!("{name} is at version {at}, not {resource_version}"),
            )),
            Some(entry) => {
                *entry = (record.clone(), v);
                st.written_at.insert(name.to_owned(), Instant::now());
                Ok(v.to_string())
            }
        }
    }

    fn describe(&self) -> String {
        "fake shard leases".to_owned()
    }
}
