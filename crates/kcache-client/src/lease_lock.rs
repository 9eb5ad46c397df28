//! [`HttpLeaseLock`]: kcache's [`LeaseLock`] over a [`LeaseClient`], for
//! [`kcache::leaderelection::LeaderElector`].

use std::{sync::Mutex, time::SystemTime};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kcache::leaderelection::{LeaseLock, LeaseRecord, LockError, VersionedRecord};
use kube_core::ObjectMeta;

use crate::{Error, LeaseClient};

/// A [`LeaseLock`] on one `coordination.k8s.io/v1` Lease.
///
/// HTTP 409 (Conflict, AlreadyExists) becomes [`LockError::Conflict`] and 404
/// [`LockError::NotFound`]; anything else is [`LockError::Other`]. Like client-go's
/// `LeaseLock`, it keeps the Lease it last read or wrote, so an update keeps the Lease's
/// labels, annotations and owner references and only replaces the election fields of its
/// spec.
///
/// ```no_run
/// use kcache::leaderelection::{Config, LeaderElector};
/// use kcache_client::{Client, HttpLeaseLock, LeaseClient};
/// use tokio_util::sync::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// let client = Client::infer().await?;
/// let lock = HttpLeaseLock::new(LeaseClient::new(client, "kube-system", "my-controller"));
/// let elector = LeaderElector::new(Config::new("replica-0"), lock)?;
/// elector.run(CancellationToken::new()).await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct HttpLeaseLock {
    client: LeaseClient,
    last: Mutex<Option<Lease>>,
}

impl HttpLeaseLock {
    /// A lock on the Lease `client` addresses.
    pub fn new(client: LeaseClient) -> Self {
        Self {
            client,
            last: Mutex::new(None),
        }
    }

    /// The underlying client.
    pub fn client(&self) -> &LeaseClient {
        &self.client
    }

    fn remember(&self, lease: &Lease) -> Result<String, LockError> {
        let rv = lease.metadata.resource_version.clone().ok_or_else(|| {
            LockError::other("the API server returned a Lease without a resourceVersion")
        })?;
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(lease.clone());
        Ok(rv)
    }
}

impl LeaseLock for HttpLeaseLock {
    async fn get(&self) -> Result<VersionedRecord, LockError> {
        let lease = self
            .client
            .get()
            .await
            .map_err(lock_error)?
            .ok_or_else(|| LockError::NotFound(self.describe()))?;
        let resource_version = self.remember(&lease)?;
        Ok(VersionedRecord {
            record: lease.spec.as_ref().map(spec_to_record).unwrap_or_default(),
            resource_version,
        })
    }

    async fn create(&self, record: &LeaseRecord) -> Result<String, LockError> {
        let lease = self
            .client
            .create(record_to_spec(record, LeaseSpec::default()))
            .await
            .map_err(lock_error)?;
        self.remember(&lease)
    }

    async fn update(
        &self,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> Result<String, LockError> {
        let last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        // Keep what we last saw of the Lease when it is the version being replaced.
        let mut lease = last
            .filter(|l| l.metadata.resource_version.as_deref() == Some(resource_version))
            .unwrap_or_else(|| Lease {
                metadata: ObjectMeta {
                    name: Some(self.client.name().to_owned()),
                    namespace: Some(self.client.namespace().to_owned()),
                    ..ObjectMeta::default()
                },
                spec: None,
            });
        lease.metadata.resource_version = Some(resource_version.to_owned());
        lease.spec = Some(record_to_spec(
            record,
            lease.spec.take().unwrap_or_default(),
        ));
        let updated = self.client.update(&lease).await.map_err(lock_error)?;
        self.remember(&updated)
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.client.namespace(), self.client.name())
    }
}

/// 409 → Conflict, 404 → NotFound, anything else → Other.
fn lock_error(e: Error) -> LockError {
    match e.code() {
        Some(409) => LockError::Conflict(e.to_string()),
        Some(404) => LockError::NotFound(e.to_string()),
        _ => LockError::other(e),
    }
}

/// The election fields of a Lease spec (absent fields read as empty / zero, as in client-go).
pub fn spec_to_record(spec: &LeaseSpec) -> LeaseRecord {
    LeaseRecord {
        holder_identity: spec.holder_identity.clone().unwrap_or_default(),
        lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
        acquire_time: spec.acquire_time.as_ref().map(|t| SystemTime::from(t.0)),
        renew_time: spec.renew_time.as_ref().map(|t| SystemTime::from(t.0)),
        leader_transitions: spec.lease_transitions.unwrap_or(0),
    }
}

/// `spec` with its election fields set from `record` (other fields, such as
/// `preferredHolder`, kept).
pub fn record_to_spec(record: &LeaseRecord, spec: LeaseSpec) -> LeaseSpec {
    let micro = |t: &Option<SystemTime>| {
        t.and_then(|t| Timestamp::try_from(t).ok())
            .map(|t| MicroTime(Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t)))
    };
    LeaseSpec {
        holder_identity: Some(record.holder_identity.clone()),
        lease_duration_seconds: Some(record.lease_duration_seconds),
        acquire_time: micro(&record.acquire_time),
        renew_time: micro(&record.renew_time),
        lease_transitions: Some(record.leader_transitions),
        ..spec
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn records_round_trip_through_lease_specs_at_microsecond_precision() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let record = LeaseRecord {
            holder_identity: "a".to_owned(),
            lease_duration_seconds: 15,
            acquire_time: Some(t),
            renew_time: None,
            leader_transitions: 3,
        };
        let spec = record_to_spec(&record, LeaseSpec::default());
        let back = spec_to_record(&spec);
        assert_eq!(
            back.acquire_time,
            Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_000))
        );
        assert_eq!(
            back,
            LeaseRecord {
                acquire_time: back.acquire_time,
                ..record
            }
        );
        assert_eq!(
            spec_to_record(&LeaseSpec::default()),
            LeaseRecord::default()
        );
    }
}
