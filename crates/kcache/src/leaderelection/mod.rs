//! Leader election over a lease, with client-go's `tools/leaderelection` semantics.
//!
//! Candidates compete for one lease record through a [`LeaseLock`] (a
//! `coordination.k8s.io/v1` Lease over HTTP in `kcache-client`; [`FakeLock`] in memory).
//! A [`LeaderElector`]:
//!
//! - acquires the lease when it is missing, free (empty holder) or expired, retrying every
//!   `retry_period` with jitter;
//! - judges expiry on its own clock, from when it last observed the record change, never
//!   from the record's timestamps (so clock skew between replicas does not matter);
//! - once leading, renews every `retry_period` and steps down when no renewal succeeds within
//!   `renew_deadline`;
//! - writes with optimistic concurrency: a conflict means someone else wrote, and the next
//!   attempt re-reads;
//! - optionally releases the lease when cancelled (`release_on_cancel`), so that a standby
//!   takes over at once instead of after `lease_duration`.
//!
//! [`LeaderElector::check`] is client-go's leader-election health check (its
//! `HealthzAdaptor`): it fails while this replica believes it leads but has not renewed for
//! longer than the lease duration plus a tolerance.
//!
//! Like client-go, this is not fencing: for a short time around a lost lease two
//! candidates may both believe they lead.
//!
//! ```
//! use kcache::leaderelection::{Config, FakeLock, LeaderElector, run_leading};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kcache::leaderelection::Error> {
//! let mut config = Config::new("replica-0");
//! config.release_on_cancel = true;
//! let elector = LeaderElector::new(config, FakeLock::new())?;
//! let cancel = CancellationToken::new();
//! // The controller runs only while this replica leads.
//! let done = run_leading(&elector, cancel, async { /* run the controller */ }).await;
//! if done.is_none() {
//!     tracing::warn!("leadership ended before the work finished");
//! }
//! # Ok(())
//! # }
//! ```

mod attempt;
mod config;
mod elector;
#[cfg(any(test, feature = "testing", doc))]
mod fake;
mod health;
mod leading;
mod lock;
mod state;
#[cfg(test)]
mod tests;

pub use config::{Config, Error, JITTER_FACTOR};
pub use elector::LeaderElector;
#[cfg(any(test, feature = "testing", doc))]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use fake::{FakeLock, LockOp};
pub use health::HealthError;
pub use leading::run_leading;
pub use lock::{LeaseLock, LeaseRecord, LockError, VersionedRecord};
pub use state::LeaderState;
