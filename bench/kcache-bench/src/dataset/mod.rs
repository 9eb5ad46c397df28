//! The benchmark's datasets: realistic pods (~8 KB of JSON each as the server returns them,
//! `managedFields` included), loaded at high concurrency into a fresh namespace, and an updater
//! that changes every pod once (a merge patch of one annotation) so that each peer's update
//! phase sees exactly one event per pod. The custom-resource dataset ([`Dataset::Widgets`],
//! see [`widgets`](mod@crate::widgets)) is loaded, updated and deleted the same way. The pod
//! template is `pod.rs`; deletion `delete.rs`.

use std::path::Path;

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

pub use crate::labels::{APP_LABEL, APPS, app};
pub use crate::peer::Dataset;
use crate::widgets::{self, Widget};

mod delete;
mod pod;

pub use delete::{DELETE_IN_FLIGHT, delete, delete_objects};
pub use pod::{pod, pod_name};

/// The field manager the loader and updater write as.
pub const FIELD_MANAGER: &str = "kcache-bench";

/// The annotation the updater sets.
pub const TOUCH_ANNOTATION: &str = "bench.kcache.io/touched";

/// Loading or updating failed.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A request to the server failed. Shown once: a refusal as the server's words, reason and
    /// code (kube-client's own text repeats the Status and its debug form).
    #[error("{what}: {}", api_words(error))]
    Api {
        /// What was being done.
        what: String,
        /// The client's error.
        error: kube_client::Error,
    },
    /// An object template did not convert to its typed form (a bug in the template).
    #[error("object template: {0}")]
    Template(#[from] serde_json::Error),
    /// The widgets CRD was not served within a minute of its creation.
    #[error("CustomResourceDefinition {0} was not Established and served within 60 s")]
    NotServed(String),
}

/// A client error in a line: a refusal as `message (reason, code)`, anything else as the
/// client gives it.
fn api_words(error: &kube_client::Error) -> String {
    match error {
        kube_client::Error::Api(status) => {
            format!("{} ({}, {})", status.message, status.reason, status.code)
        }
        other => other.to_string(),
    }
}

/// A kube-client [`Client`] for the kubeconfig at `path` (its current context).
///
/// # Errors
/// [`DatasetError::Kubeconfig`] when the file cannot be read or describes no usable cluster.
pub async fn client(path: &Path) -> Result<Client, DatasetError> {
    let err = |source: Box<dyn std::error::Error + Send + Sync>| DatasetError::Kubeconfig {
        path: path.display().to_string(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| err(e.into()))?;
    let config =
        kube_client::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| err(e.into()))?;
    Client::try_from(config).map_err(|e| err(e.into()))
}

/// Creates `namespace` (an existing one is reused) and objects `0..n` of `dataset` in it
/// (for [`Dataset::Widgets`], after installing the CRD and waiting until it is served),
/// `concurrency` requests in flight, then waits until a list at resourceVersion "0" returns
/// them all.
///
/// # Errors
/// [`DatasetError::Api`] for the first failed request.
pub async fn load(
    client: &Client,
    dataset: Dataset,
    namespace: &str,
    n: usize,
    concurrency: usize,
) -> Result<(), DatasetError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    match namespaces.create(&post_params(), &ns).await {
        Ok(_) => {}
        Err(kube_client::Error::Api(s)) if s.code == 409 => {}
        Err(source) => {
            return Err(DatasetError::Api {
                what: format!("create namespace {namespace}"),
                error: source,
            });
        }
    }
    match dataset {
        Dataset::Pods => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            create_all(&pods, n, concurrency, |i| pod(namespace, i)).await?;
            cached(&pods, namespace, n).await
        }
        Dataset::Widgets => {
            install_crd(client).await?;
            let widgets: Api<Widget> = Api::namespaced(client.clone(), namespace);
            create_all(&widgets, n, concurrency, |i| widgets::widget(namespace, i)).await?;
            cached(&widgets, namespace, n).await
        }
    }
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    }
}

/// Creates objects `0..n` made by `make`, `concurrency` requests in flight.
async fn create_all<K>(
    api: &Api<K>,
    n: usize,
    concurrency: usize,
    make: impl Fn(usize) -> Value,
) -> Result<(), DatasetError>
where
    K: Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let params = post_params();
    let make = &make;
    stream::iter(0..n)
        .map(|i| {
            let (api, params) = (api.clone(), &params);
            async move {
                let value = make(i);
                let what = format!("create {}", value["metadata"]["name"]);
                let object: K = serde_json::from_value(value)?;
                api.create(params, &object)
                    .await
                    .map(drop)
                    .map_err(|source| DatasetError::Api {
                        what,
                        error: source,
                    })
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// Creates the widgets CRD (an existing one is kept) and waits (up to 60 s) until it is
/// Established and its resource answers a list.
async fn install_crd(client: &Client) -> Result<(), DatasetError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = widgets::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    match crds.create(&post_params(), &crd).await {
        Ok(_) => {}
        Err(kube_client::Error::Api(s)) if s.code == 409 => {}
        Err(source) => {
            return Err(DatasetError::Api {
                what: format!("create CustomResourceDefinition {name}"),
                error: source,
            });
        }
    }
    let all: Api<Widget> = Api::all(client.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let established = crds.get(&name).await.ok().is_some_and(|crd| {
            crd.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        let listed = all
            .list(&kube_client::api::ListParams::default().limit(1))
            .await;
        match listed {
            Ok(_) if established => return Ok(()),
            Err(source) if std::time::Instant::now() >= deadline => {
                return Err(DatasetError::Api {
                    what: format!("list widgets after installing {name}"),
                    error: source,
                });
            }
            _ if std::time::Instant::now() >= deadline => {
                return Err(DatasetError::NotServed(name));
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
}

/// Waits (up to 60 s) until kube-apiserver's watch cache serves all `n` objects, so that the
/// first peer's initial list at resourceVersion "0" (served from that cache, which may lag the
/// last writes by a moment) sees the whole dataset like every later peer.
async fn cached<K>(api: &Api<K>, namespace: &str, n: usize) -> Result<(), DatasetError>
where
    K: kube_core::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    // Metadata only (`PartialObjectMetadataList`), and its items counted, not decoded: a
    // typed list of 100,000 pods held the driver's memory at several GB, and decoded
    // metadata (managedFields as JSON trees) still 50 KB a pod.
    let params = kube_client::api::ListParams::default().match_any();
    let what = || format!("list {namespace} from the watch cache");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let request = kube_core::Request::new(api.resource_url())
            .list_metadata(&params)
            .map_err(|e| DatasetError::Api {
                what: what(),
                error: kube_client::Error::BuildRequest(e),
            })?;
        let body = api
            .clone()
            .into_client()
            .request_text(request)
            .await
            .map_err(|source| DatasetError::Api {
                what: what(),
                error: source,
            })?;
        let listed = count_items(&body).map_err(|e| DatasetError::Api {
            what: what(),
            error: kube_client::Error::SerdeError(e),
        })?;
        drop(body);
        if listed >= n || std::time::Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The number of items of a JSON list body, its items checked and skipped, not decoded.
fn count_items(body: &str) -> Result<usize, serde_json::Error> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    struct List;
    impl<'de> Visitor<'de> for List {
        type Value = usize;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
            let mut count = 0;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "items" {
                    count = map.next_value::<Option<Items>>()?.map_or(0, |i| i.0);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(count)
        }
    }
    struct Items(usize);
    impl<'de> serde::Deserialize<'de> for Items {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Count;
            impl<'de> Visitor<'de> for Count {
                type Value = usize;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("items")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
                    let mut n = 0;
                    while seq.next_element::<IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok(n)
                }
            }
            d.deserialize_seq(Count).map(Items)
        }
    }
    let mut de = serde_json::Deserializer::from_str(body);
    let n = de.deserialize_map(List)?;
    de.end()?;
    Ok(n)
}

/// The size of object 0 of `dataset` as the server returns it (JSON bytes, re-encoded from
/// the typed object), and the part of it that is `metadata.managedFields`.
///
/// # Errors
/// [`DatasetError::Api`] when the object cannot be read.
pub async fn sample_size(
    client: &Client,
    dataset: Dataset,
    namespace: &str,
) -> Result<(usize, usize), DatasetError> {
    async fn size<K>(api: Api<K>, name: &str) -> Result<(usize, usize), DatasetError>
    where
        K: kube_core::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    {
        let object = api.get(name).await.map_err(|source| DatasetError::Api {
            what: format!("get {name}"),
            error: source,
        })?;
        let total = serde_json::to_vec(&object)?.len();
        let managed = serde_json::to_vec(&object.meta().managed_fields)?.len();
        Ok((total, managed))
    }
    match dataset {
        Dataset::Pods => {
            size(
                Api::<Pod>::namespaced(client.clone(), namespace),
                &pod_name(0),
            )
            .await
        }
        Dataset::Widgets => {
            let api = Api::<Widget>::namespaced(client.clone(), namespace);
            size(api, &widgets::name(0)).await
        }
    }
}

/// Changes objects `0..n` of `dataset` in `namespace` once each (merge patch of
/// [`TOUCH_ANNOTATION`] to `tag`), `concurrency` requests in flight; with `rate`, the i-th
/// patch is not sent before i / `rate` seconds (a steady event rate, as far as the server
/// keeps up).
///
/// # Errors
/// [`DatasetError::Api`] for the first failed request.
pub async fn touch_all(
    client: &Client,
    dataset: Dataset,
    namespace: &str,
    n: usize,
    tag: &str,
    concurrency: usize,
    rate: Option<f64>,
) -> Result<(), DatasetError> {
    let pace = Pace::new(rate);
    match dataset {
        Dataset::Pods => {
            let api = Api::<Pod>::namespaced(client.clone(), namespace);
            touch(api, n, tag, concurrency, pace, pod_name).await
        }
        Dataset::Widgets => {
            let api = Api::<Widget>::namespaced(client.clone(), namespace);
            touch(api, n, tag, concurrency, pace, widgets::name).await
        }
    }
}

/// When the i-th request of a paced series may start.
#[derive(Clone, Copy)]
struct Pace {
    start: tokio::time::Instant,
    interval: Option<std::time::Duration>,
}

impl Pace {
    fn new(rate: Option<f64>) -> Self {
        Self {
            start: tokio::time::Instant::now(),
            interval: rate
                .filter(|r| r.is_finite() && *r > 0.0)
                .map(|r| std::time::Duration::from_secs_f64(1.0 / r)),
        }
    }

    async fn wait(self, i: usize) {
        if let Some(interval) = self.interval {
            let offset = interval.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
            tokio::time::sleep_until(self.start + offset).await;
        }
    }
}

async fn touch<K>(
    api: Api<K>,
    n: usize,
    tag: &str,
    concurrency: usize,
    pace: Pace,
    name: fn(usize) -> String,
) -> Result<(), DatasetError>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {"annotations": {TOUCH_ANNOTATION: tag}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    stream::iter(0..n)
        .map(|i| {
            let (api, patch, params) = (api.clone(), &patch, &params);
            async move {
                pace.wait(i).await;
                api.patch(&name(i), params, &Patch::Merge(patch))
                    .await
                    .map(drop)
                    .map_err(|source| DatasetError::Api {
                        what: format!("patch {}", name(i)),
                        error: source,
                    })
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

#[cfg(test)]
mod tests {
    use super::delete::retry_expired;
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube_client::Error {
        kube_client::Error::Api(Box::new(kube_core::Status {
            code,
            reason: reason.to_owned(),
            ..kube_core::Status::default()
        }))
    }

    #[tokio::test]
    async fn an_expired_delete_collection_is_asked_again_until_it_succeeds() {
        let calls = std::cell::Cell::new(0);
        let result = retry_expired(5, || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 3 {
                    Err(api_error(410, "Expired"))
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(calls.get(), 3);
    }

    #[tokio::test]
    async fn retries_after_410_are_bounded_and_other_errors_are_not_retried() {
        let calls = std::cell::Cell::new(0);
        let result = retry_expired(4, || {
            calls.set(calls.get() + 1);
            async { Err(api_error(410, "Expired")) }
        })
        .await;
        assert!(matches!(result, Err(kube_client::Error::Api(s)) if s.code == 410));
        assert_eq!(calls.get(), 4);

        calls.set(0);
        let result = retry_expired(4, || {
            calls.set(calls.get() + 1);
            async { Err(api_error(500, "InternalError")) }
        })
        .await;
        assert!(matches!(result, Err(kube_client::Error::Api(s)) if s.code == 500));
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn list_items_are_counted_and_a_malformed_list_is_an_error() {
        let body = r#"{"kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"9"},
            "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b","x":[1,{"items":[]}]}}]}"#;
        assert_eq!(count_items(body).unwrap(), 2);
        assert_eq!(count_items(r#"{"items":null}"#).unwrap(), 0);
        assert_eq!(count_items(r#"{"kind":"List"}"#).unwrap(), 0);
        assert!(count_items(r#"{"items":[{"a":1},"#).is_err());
        assert!(count_items(r#"{"items":[]} x"#).is_err());
    }

    #[test]
    fn pod_template_is_a_valid_typed_pod_of_the_intended_size() {
        let value = pod("bench", 7);
        let size = value.to_string().len();
        assert!((3_000..5_000).contains(&size), "{size} bytes");
        let typed: Pod = serde_json::from_value(value).unwrap();
        assert_eq!(typed.metadata.name.as_deref(), Some("bench-000007"));
        let spec = typed.spec.unwrap();
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(spec.containers[0].env.as_ref().unwrap().len(), 6);
        assert_eq!(spec.volumes.unwrap().len(), 5);
    }

    #[test]
    fn every_object_is_in_one_part_of_the_delete() {
        let parts: Vec<String> = (0..APPS).map(app).collect();
        for i in 0..1_000 {
            let pod = pod("bench", i);
            let widget = crate::widgets::widget("bench", i);
            for labels in [&pod["metadata"]["labels"], &widget["metadata"]["labels"]] {
                let value = labels[APP_LABEL].as_str().unwrap();
                assert_eq!(
                    parts.iter().filter(|p| *p == value).count(),
                    1,
                    "{i}: {value}"
                );
            }
        }
    }

    #[test]
    fn pods_differ_by_index() {
        assert_ne!(pod("bench", 1), pod("bench", 2));
        assert_eq!(pod_name(42), "bench-000042");
    }
}
