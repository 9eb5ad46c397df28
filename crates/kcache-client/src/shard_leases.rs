//! [`HttpShardLeases`]: the Leases of a shard group over HTTP, for
//! [`kcache::sharding::ShardManager`].

use std::{collections::HashMap, sync::Mutex};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kcache::{
    leaderelection::{LeaseRecord, LockError, VersionedRecord},
    sharding::{GROUP_LABEL, NamedRecord, ShardLeases},
};
use kube_core::{
    ObjectMeta, Resource,
    params::{ListParams, PostParams},
};

use crate::{
    Client, Error,
    decode::{Typed, decode_list, decode_object},
    lease_lock::{record_to_spec, spec_to_record},
};

/// The `coordination.k8s.io/v1` Leases of one shard group in one namespace, labelled
/// `kcache.dev/shard-group=<group>` and listed by that label.
///
/// Updates keep what the last list showed of each Lease (labels, annotations, owner
/// references) and replace only its spec's election fields; 409 becomes
/// [`LockError::Conflict`], 404 [`LockError::NotFound`].
///
/// ```no_run
/// use kcache::sharding::{Config, ShardManager};
/// use kcache_client::{Client, HttpShardLeases};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// let client = Client::infer().await?;
/// let leases = HttpShardLeases::new(client, "default", "my-controller");
/// let manager = ShardManager::new(Config::new("my-controller", "replica-0"), leases)?;
/// println!("{:?}", manager.layout());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct HttpShardLeases {
    client: Client,
    request: kube_core::Request,
    namespace: String,
    group: String,
    last: Mutex<HashMap<String, Lease>>,
}

impl HttpShardLeases {
    /// The Leases of `group` in `namespace`.
    pub fn new(client: Client, namespace: &str, group: &str) -> Self {
        Self {
            client,
            request: kube_core::Request::new(Lease::url_path(&(), Some(namespace))),
            namespace: namespace.to_owned(),
            group: group.to_owned(),
            last: Mutex::new(HashMap::new()),
        }
    }

    fn remember(&self, lease: &Lease) -> Result<String, LockError> {
        let rv = lease.metadata.resource_version.clone().ok_or_else(|| {
            LockError::other("the API server returned a Lease without a resourceVersion")
        })?;
        if let Some(name) = &lease.metadata.name {
            self.last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(name.clone(), lease.clone());
        }
        Ok(rv)
    }

    fn fresh(&self, name: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(self.namespace.clone()),
                labels: Some([(GROUP_LABEL.to_owned(), self.group.clone())].into()),
                ..ObjectMeta::default()
            },
            spec: None,
        }
    }
}

fn encode(e: impl std::fmt::Display) -> LockError {
    LockError::other(Error::Encode(e.to_string()))
}

fn lock_error(e: Error) -> LockError {
    match e.code() {
        Some(409) => LockError::Conflict(e.to_string()),
        Some(404) => LockError::NotFound(e.to_string()),
        _ => LockError::other(e),
    }
}

impl ShardLeases for HttpShardLeases {
    async fn list(&self) -> Result<Vec<NamedRecord>, LockError> {
        let selector = format!("{GROUP_LABEL}={}", self.group);
        let req = self
            .request
            .list(&ListParams::default().labels(&selector))
            .map_err(encode)?;
        let body = self
            .client
            .send_collect(req, "list")
            .await
            .map_err(|e| lock_error(e.into()))?;
        let list = decode_list::<Lease, _>(&body, &Typed::new())
            .map_err(|e| lock_error(Error::Decode(e)))?;
        let mut out = Vec::with_capacity(list.items.len());
        for lease in list.items {
            let rv = self.remember(&lease)?;
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            out.push(NamedRecord {
                name,
                record: VersionedRecord {
                    record: lease.spec.as_ref().map(spec_to_record).unwrap_or_default(),
                    resource_version: rv,
                },
            });
        }
        Ok(out)
    }

    async fn create(&self, name: &str, record: &LeaseRecord) -> Result<String, LockError> {
        let mut lease = self.fresh(name);
        lease.spec = Some(record_to_spec(record, LeaseSpec::default()));
        let body = serde_json::to_vec(&lease).map_err(encode)?;
        let req = self
            .request
            .create(&PostParams::default(), body)
            .map_err(encode)?;
        let body = self
            .client
            .send_collect(req, "create")
            .await
            .map_err(|e| lock_error(e.into()))?;
        let created: Lease =
            decode_object(&body, &Typed::new()).map_err(|e| lock_error(Error::Decode(e)))?;
        self.remember(&created)
    }

    async fn update(
        &self,
        name: &str,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> Result<String, LockError> {
        let last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned();
        let mut lease = last.unwrap_or_else(|| self.fresh(name));
        lease.metadata.resource_version = Some(resource_version.to_owned());
        lease.metadata.managed_fields = None;
        lease.spec = Some(record_to_spec(
            record,
            lease.spec.take().unwrap_or_default(),
        ));
        let body = serde_json::to_vec(&lease).map_err(encode)?;
        let req = self
            .request
            .replace(name, &PostParams::default(), body)
            .map_err(encode)?;
        let body = self
            .client
            .send_collect(req, "update")
            .await
            .map_err(|e| lock_error(e.into()))?;
        let updated: Lease =
            decode_object(&body, &Typed::new()).map_err(|e| lock_error(Error::Decode(e)))?;
        self.remember(&updated)
    }

    fn describe(&self) -> String {
        format!("Leases {GROUP_LABEL}={} in {}", self.group, self.namespace)
    }
}
