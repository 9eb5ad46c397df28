//! A Lease client for leader election: get, create and update `coordination.k8s.io/v1` Leases
//! with optimistic concurrency.
//!
//! `spec.acquireTime` and `spec.renewTime` are `MicroTime`s, which the API server only accepts
//! with exactly six fractional digits (`2030-01-01T00:00:00.000000Z`; no fraction, three or nine
//! digits are rejected with 400). k8s-openapi's `MicroTime` serialises that way; [`micro_now`]
//! gives the current time truncated to microseconds so that what we send is what the server
//! stores.

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube_core::{
    ObjectMeta, Resource,
    params::{GetParams, PostParams},
};

use crate::{
    Client,
    decode::{Typed, decode_object},
    error::{Error, Result},
};

/// The current time as a `MicroTime`, truncated to whole microseconds.
pub fn micro_now() -> MicroTime {
    let now = Timestamp::now();
    let micros = now.as_microsecond();
    MicroTime(Timestamp::from_microsecond(micros).unwrap_or(now))
}

/// Gets, creates and updates one named Lease.
///
/// Updates are optimistic: [`LeaseClient::update`] sends the Lease's `metadata.resourceVersion`
/// and the server answers 409 Conflict ([`Error::is_conflict`]) if someone else wrote it since.
#[derive(Clone, Debug)]
pub struct LeaseClient {
    client: Client,
    request: kube_core::Request,
    namespace: String,
    name: String,
}

impl LeaseClient {
    /// A client for the Lease `name` in `namespace`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self {
            client,
            request: kube_core::Request::new(Lease::url_path(&(), Some(namespace))),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The Lease's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Lease, or `None` when it does not exist.
    ///
    /// # Errors
    /// Transport and API errors other than 404.
    pub async fn get(&self) -> Result<Option<Lease>> {
        let req = self
            .request
            .get(&self.name, &GetParams::default())
            .map_err(|e| Error::Encode(e.to_string()))?;
        match self.client.send_collect(req, "get").await {
            Ok(body) => decode_object(&body, &Typed::new())
                .map(Some)
                .map_err(Error::Decode),
            Err(e) if e.code() == Some(404) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates the Lease with `spec`.
    ///
    /// # Errors
    /// 409 AlreadyExists ([`Error::is_already_exists`]) when another candidate created it first;
    /// 400 / 422 for an invalid spec; transport errors.
    pub async fn create(&self, spec: LeaseSpec) -> Result<Lease> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        let body = serde_json::to_vec(&lease).map_err(|e| Error::Encode(e.to_string()))?;
        let req = self
            .request
            .create(&PostParams::default(), body)
            .map_err(|e| Error::Encode(e.to_string()))?;
        let body = self.client.send_collect(req, "create").await?;
        decode_object(&body, &Typed::new()).map_err(Error::Decode)
    }

    /// Replaces the Lease with `lease`, which must carry the `metadata.resourceVersion` it was
    /// read at.
    ///
    /// # Errors
    /// 409 Conflict ([`Error::is_conflict`]) when the Lease changed since it was read; 404 when
    /// it was deleted; transport errors.
    pub async fn update(&self, lease: &Lease) -> Result<Lease> {
        if lease.metadata.resource_version.is_none() {
            return Err(Error::Encode(
                "a Lease update needs the metadata.resourceVersion it was read at".to_owned(),
            ));
        }
        let body = serde_json::to_vec(lease).map_err(|e| Error::Encode(e.to_string()))?;
        let req = self
            .request
            .replace(&self.name, &PostParams::default(), body)
            .map_err(|e| Error::Encode(e.to_string()))?;
        let body = self.client.send_collect(req, "update").await?;
        decode_object(&body, &Typed::new()).map_err(Error::Decode)
    }
}

impl Error {
    /// 409 Conflict: the object changed since it was read (optimistic concurrency lost).
    pub fn is_conflict(&self) -> bool {
        self.status_reason() == Some("Conflict")
    }

    /// 409 AlreadyExists: the object was created by someone else first.
    pub fn is_already_exists(&self) -> bool {
        self.status_reason() == Some("AlreadyExists")
    }

    /// 404 NotFound.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    fn status_reason(&self) -> Option<&str> {
        match self {
            Error::Request(e) => e.status().map(|s| s.reason.as_str()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_time_serialises_with_exactly_six_fractional_digits() {
        let t = MicroTime("2030-01-01T00:00:00.123456789Z".parse().unwrap());
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#""2030-01-01T00:00:00.123456Z""#
        );
        let whole = MicroTime("2030-01-01T00:00:00Z".parse().unwrap());
        assert_eq!(
            serde_json::to_string(&whole).unwrap(),
            r#""2030-01-01T00:00:00.000000Z""#
        );
        let now = serde_json::to_string(&micro_now()).unwrap();
        let frac = now.trim_matches('"').split('.').nth(1).unwrap();
        assert_eq!(frac.len(), "123456Z".len(), "{now}");
    }

    #[test]
    fn micro_now_round_trips_through_the_wire_format() {
        let t = micro_now();
        let back: MicroTime = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
