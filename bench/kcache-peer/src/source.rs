//! The peer's [`ListerWatcher`]: kube-client's `Api<Pod>` (its transport and its serde
//! decoding), adapted to kcache's source contract.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kcache::ListerWatcher;
use kcache::lister_watcher::{Error, ListParams, ObjectList, WatchParams, WatchStream};
use kube_client::{Api, Client};

/// Pods of one namespace through kube-client.
pub struct KubeClientSource {
    api: Api<Pod>,
}

impl KubeClientSource {
    /// The pods of `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
        }
    }
}

fn convert(err: kube_client::Error) -> Error {
    match err {
        kube_client::Error::Api(status) => Error::api(*status, None),
        kube_client::Error::SerdeError(e) => Error::decode(e),
        other => Error::transport(other),
    }
}

impl ListerWatcher<Pod> for KubeClientSource {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, Error> {
        self.api.list(params).await.map_err(convert)
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<Pod>, Error> {
        let stream = self
            .api
            .watch(params, resource_version)
            .await
            .map_err(convert)?;
        Ok(stream.map_err(convert).boxed())
    }
}
