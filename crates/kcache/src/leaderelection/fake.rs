//! An in-memory [`LeaseLock`] for tests.

use std::sync::Arc;

use parking_lot::Mutex;

use super::lock::{LeaseLock, LeaseRecord, LockError, VersionedRecord};

/// A call made on a [`FakeLock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockOp {
    /// [`LeaseLock::get`].
    Get,
    /// [`LeaseLock::create`].
    Create,
    /// [`LeaseLock::update`].
    Update,
}

/// An in-memory lease with real optimistic concurrency: every write bumps a counter used as
/// the resource version, and an update at an older version fails with
/// [`LockError::Conflict`].
///
/// Clones share the same lease, so several electors (and the test, through
/// [`FakeLock::set_record`]) can compete on it.
///
/// ```
/// use kcache::leaderelection::{FakeLock, LeaseLock, LeaseRecord};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let lock = FakeLock::new();
/// assert!(lock.get().await.unwrap_err().is_not_found());
/// let rv = lock.create(&LeaseRecord::default()).await.unwrap();
/// lock.set_record(LeaseRecord { holder_identity: "other".into(), ..LeaseRecord::default() });
/// assert!(lock.update(&LeaseRecord::default(), &rv).await.unwrap_err().is_conflict());
/// # });
/// ```
#[derive(Clone, Debug, Default)]
pub struct FakeLock {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    record: Option<LeaseRecord>,
    version: u64,
    failing: bool,
    ops: Vec<LockOp>,
}

impl FakeLock {
    /// A lock with no lease yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A lock whose lease already holds `record`.
    pub fn with_record(record: LeaseRecord) -> Self {
        let lock = Self::new();
        lock.set_record(record);
        lock
    }

    /// The current record, if any.
    pub fn record(&self) -> Option<LeaseRecord> {
        self.state.lock().record.clone()
    }

    /// Overwrites the record unconditionally, as another writer would (bumps the version).
    pub fn set_record(&self, record: LeaseRecord) {
        let mut s = self.state.lock();
        s.record = Some(record);
        s.version += 1;
    }

    /// While `failing`, every call fails with [`LockError::Other`] (an unreachable server).
    pub fn set_failing(&self, failing: bool) {
        self.state.lock().failing = failing;
    }

    /// The calls made so far, in order (failed ones included).
    pub fn ops(&self) -> Vec<LockOp> {
        self.state.lock().ops.clone()
    }

    /// Forgets the calls recorded so far.
    pub fn clear_ops(&self) {
        self.state.lock().ops.clear();
    }

    fn enter(&self, op: LockOp) -> Result<parking_lot::MutexGuard<'_, State>, LockError> {
        let mut s = self.state.lock();
        s.ops.push(op);
        if s.failing {
            return Err(LockError::other("fake lock: injected failure"));
        }
        Ok(s)
    }
}

impl LeaseLock for FakeLock {
    async fn get(&self) -> Result<VersionedRecord, LockError> {
        let s = self.enter(LockOp::Get)?;
        match &s.record {
            Some(record) => Ok(VersionedRecord {
                record: record.clone(),
                resource_version: s.version.to_string(),
            }),
            None => Err(LockError::NotFound("fake lease".to_owned())),
        }
    }

    async fn create(&self, record: &LeaseRecord) -> Result<String, LockError> {
        let mut s = self.enter(LockOp::Create)?;
        if s.record.is_some() {
            return Err(LockError::Conflict("fake lease already exists".to_owned()));
        }
        s.record = Some(record.clone());
        s.version += 1;
        Ok(s.version.to_string())
    }

    async fn update(
        &self,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> Result<String, LockError> {
        let mut s = self.enter(LockOp::Update)?;
        if s.record.is_none() {
            return Err(LockError::NotFound("fake lease".to_owned()));
        }
        if s.version.to_string() != resource_version {
            return Err(LockError::Conflict(format!(
                "fake lease is at version {}, not {resource_version}",
                s.version
            )));
        }
        s.record = Some(record.clone());
        s.version += 1;
        Ok(s.version.to_string())
    }

    fn describe(&self) -> String {
        "fake/lease".to_owned()
    }
}
