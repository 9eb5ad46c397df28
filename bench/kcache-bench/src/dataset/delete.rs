//! Removing a dataset: delete-collections by label value, several in flight, each asked again
//! while kube-apiserver's continue token expires under it.

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube_client::{Api, Client, api::DeleteParams};

use super::DatasetError;
use crate::labels::{APP_LABEL, APPS, app};
use crate::peer::Dataset;
use crate::widgets::Widget;

/// Deletes the dataset's objects and namespace (best effort: without a namespace controller
/// the namespace stays Terminating, the objects are gone, and the namespace refuses new
/// objects for ever). The widgets CRD stays.
///
/// # Errors
/// The first failed request.
pub async fn delete(
    client: &Client,
    dataset: Dataset,
    namespace: &str,
) -> Result<(), DatasetError> {
    delete_objects(client, dataset, namespace).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(namespace, &DeleteParams::default())
        .await
        .map_err(|source| DatasetError::Api {
            what: format!("delete namespace {namespace}"),
            error: source,
        })?;
    Ok(())
}

/// Deletes the dataset's objects of `namespace`; the namespace stays, to be loaded again.
///
/// One delete-collection per value of [`APP_LABEL`], [`DELETE_IN_FLIGHT`] at once, then one
/// for anything left: kube-apiserver deletes a collection with one worker (about 40 objects a
/// second here, each a write etcd commits on its own), so one request for 100,000 objects took
/// longer than the load; parts in flight together share etcd's commits.
///
/// # Errors
/// The first failed request.
pub async fn delete_objects(
    client: &Client,
    dataset: Dataset,
    namespace: &str,
) -> Result<(), DatasetError> {
    let url = match dataset {
        Dataset::Pods => Api::<Pod>::namespaced(client.clone(), namespace)
            .resource_url()
            .to_owned(),
        Dataset::Widgets => Api::<Widget>::namespaced(client.clone(), namespace)
            .resource_url()
            .to_owned(),
    };
    let parts: Vec<String> = (0..APPS).map(app).collect();
    stream::iter(&parts)
        .map(|part| delete_part(client, &url, namespace, Some(part)))
        .buffer_unordered(DELETE_IN_FLIGHT)
        .try_collect::<()>()
        .await?;
    delete_part(client, &url, namespace, None).await
}

/// Delete-collections [`delete`] keeps in flight.
pub const DELETE_IN_FLIGHT: usize = 8;

/// Deletes the objects at `url` whose [`APP_LABEL`] is `app` (all of them with `None`).
async fn delete_part(
    client: &Client,
    url: &str,
    namespace: &str,
    app: Option<&str>,
) -> Result<(), DatasetError> {
    let dp = DeleteParams::default();
    let mut lp = kube_client::api::ListParams::default();
    if let Some(app) = app {
        lp = lp.labels(&format!("{APP_LABEL}={app}"));
    }
    // The answer lists every deleted object: read and dropped, not decoded (the typed list of
    // 10,000 pods took the driver from 0.5 to 1.8 GB).
    let delete_collection = || async {
        let request = kube_core::Request::new(url)
            .delete_collection(&dp, &lp)
            .map_err(kube_client::Error::BuildRequest)?;
        let body = client.request_stream(request).await?;
        futures::io::copy(body, &mut futures::io::sink())
            .await
            .map_err(kube_client::Error::ReadEvents)?;
        Ok(())
    };
    retry_expired(DELETE_ATTEMPTS, delete_collection)
        .await
        .map_err(|source| DatasetError::Api {
            what: format!(
                "delete the objects of {namespace}{}",
                app.map(|a| format!(" with {APP_LABEL}={a}"))
                    .unwrap_or_default()
            ),
            error: source,
        })
}

/// How many times [`delete`] sends one part's delete-collection in all when the server answers
/// 410: kube-apiserver deletes a collection with one worker by default
/// (`--delete-collection-workers=1`), about 40 custom resources a second here, so each
/// attempt removes ~12,000 before its token expires (a part is 2,000 at 100,000 objects).
const DELETE_ATTEMPTS: u32 = 20;

/// Runs `attempt` again while it fails with 410 Gone (`Expired`), at most `attempts` times in
/// all. kube-apiserver deletes a collection page by page under one continue token; when that
/// takes longer than etcd's compaction interval (5 minutes: 100,000 custom resources took
/// more) the token expires and the request fails with what is left undeleted. Each attempt
/// deletes more, so asking again right away makes progress; any other error ends at once.
pub(super) async fn retry_expired<F, Fut>(
    attempts: u32,
    mut attempt: F,
) -> Result<(), kube_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube_client::Error>>,
{
    let mut left = attempts.max(1);
    loop {
        match attempt().await {
            Err(kube_client::Error::Api(status)) if status.code == 410 && left > 1 => {
                left -= 1;
                eprintln!(
                    "bench: delete-collection: 410 {} (its continue token expired); asking again, {left} attempt(s) left",
                    status.reason
                );
            }
            other => return other,
        }
    }
}
