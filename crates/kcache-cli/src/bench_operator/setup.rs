//! The benchmark's objects: the Team CRD, the namespaces' Pods and Teams, the Teams'
//! ConfigMaps (deleted before each run, checked after it) and the update phase's patches.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcache_bench::{dataset, peer::Dataset};
use kube_client::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams, PostParams},
    core::{ApiResource, GroupVersionKind},
};
use serde_json::json;

use super::BenchOperatorArgs;

/// The label on the ConfigMaps the peers write.
const TEAM_LABEL: &str = "bench.kcache.io/team";

/// The CRD `teams.bench.kcache.io`.
fn crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "teams.bench.kcache.io"},
        "spec": {"group": "bench.kcache.io", "scope": "Namespaced",
            "names": {"plural": "teams", "singular": "team", "kind": "Team", "listKind": "TeamList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"members": {"type": "integer"}}}}}}}]}
    })
}

fn teams_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.kcache.io", "v1", "Team"),
        "teams",
    )
}

/// Installs the CRD and waits until Teams are served.
async fn install_crd(client: &Client) -> anyhow::Result<()> {
    let crds = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &crds);
    let object: DynamicObject = serde_json::from_value(crd())?;
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(kube_client::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e).context("creating the CRD teams.bench.kcache.io"),
    }
    let teams: Api<DynamicObject> = Api::all_with(client.clone(), &teams_resource());
    let deadline = Instant::now() + Duration::from_secs(60);
    while teams.list(&ListParams::default().limit(1)).await.is_err() {
        if Instant::now() > deadline {
            bail!("the CRD teams.bench.kcache.io was not served within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Loads what is missing: the CRD, each namespace's Pods (a namespace already holding its
/// count is kept) and the Teams.
///
/// # Errors
/// The first failed request, or a namespace holding another number of Pods.
pub(super) async fn load(client: &Client, args: &BenchOperatorArgs) -> anyhow::Result<()> {
    install_crd(client).await?;
    let per_ns = (args.concurrency / args.namespaces.min(args.concurrency).max(1)).max(1);
    let parallel = args.namespaces.min(args.concurrency).max(1);
    stream::iter(0..args.namespaces)
        .map(|k| async move {
            let ns = args.ns(k);
            let want = args.pods_in(k);
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let have = pods
                .list_metadata(&ListParams::default())
                .await?
                .items
                .len();
            if have == want {
                return Ok(());
            }
            if have != 0 {
                bail!("namespace {ns} holds {have} pods, not {want}: delete it first");
            }
            dataset::load(client, Dataset::Pods, &ns, want, per_ns)
                .await
                .with_context(|| format!("loading the pods of {ns}"))
        })
        .buffer_unordered(parallel)
        .try_collect::<()>()
        .await?;
    let resource = teams_resource();
    stream::iter(0..args.teams)
        .map(|j| {
            let resource = &resource;
            async move {
                let ns = args.ns(j % args.namespaces);
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, resource);
                let team: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "bench.kcache.io/v1", "kind": "Team",
                    "metadata": {"name": team_name(j), "namespace": ns},
                    "spec": {"members": j % 7 + 1}}))?;
                match api.create(&PostParams::default(), &team).await {
                    Ok(_) => Ok(()),
                    Err(kube_client::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(e).context(format!("creating team {}", team_name(j))),
                }
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// Team `j`'s name.
fn team_name(j: usize) -> String {
    format!("team-{j:05}")
}

/// Deletes the Teams' ConfigMaps and waits until none is left, so that each run starts from
/// no ConfigMap.
///
/// # Errors
/// A failed request, or ConfigMaps still there after 60 s.
pub(super) async fn delete_config_maps(
    client: &Client,
    args: &BenchOperatorArgs,
) -> anyhow::Result<()> {
    let selector = ListParams::default().labels(TEAM_LABEL);
    stream::iter(0..args.namespaces)
        .map(|k| {
            let selector = &selector;
            async move {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &args.ns(k));
                api.delete_collection(&DeleteParams::default(), selector)
                    .await
                    .map(drop)
                    .context("deleting the teams' configmaps")
            }
        })
        .buffer_unordered(args.concurrency.clamp(1, 16))
        .try_collect::<()>()
        .await?;
    let all: Api<ConfigMap> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    // Only the benchmark's namespaces: another run's Teams may hold ConfigMaps elsewhere.
    while all.list_metadata(&selector).await?.items.iter().any(|cm| {
        cm.metadata
            .namespace
            .as_deref()
            .is_some_and(|ns| args.owns_namespace(ns))
    }) {
        if Instant::now() > deadline {
            bail!("the teams' configmaps were still there 60 s after their deletion");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Patches `count(k)` Pods of each namespace k once (an annotation set to `tag`), at
/// `--update-rate` in all.
///
/// # Errors
/// The first failed patch.
pub(super) async fn touch(
    client: &Client,
    args: &BenchOperatorArgs,
    tag: &str,
    count: impl Fn(usize) -> usize,
) -> anyhow::Result<()> {
    let rate = args.update_rate / args.namespaces as f64;
    let per_ns = (args.concurrency / args.namespaces).max(2);
    let count = &count;
    stream::iter(0..args.namespaces)
        .map(|k| async move {
            dataset::touch_all(
                client,
                Dataset::Pods,
                &args.ns(k),
                count(k),
                tag,
                per_ns,
                Some(rate),
            )
            .await
            .with_context(|| format!("patching the pods of {}", args.ns(k)))
        })
        .buffer_unordered(args.namespaces)
        .try_collect::<()>()
        .await
}

/// The number of Teams whose ConfigMap on the server holds its namespace's Pod count and
/// points to its Team.
///
/// # Errors
/// A failed list.
pub(super) async fn verify(client: &Client, args: &BenchOperatorArgs) -> anyhow::Result<usize> {
    let all: Api<ConfigMap> = Api::all(client.clone());
    let cms = all.list(&ListParams::default().labels(TEAM_LABEL)).await?;
    let mut held = std::collections::HashMap::new();
    for cm in cms.items {
        let owned = cm
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Team" && o.controller == Some(true));
        let key = (
            cm.metadata.namespace.unwrap_or_default(),
            cm.metadata.name.unwrap_or_default(),
        );
        let count = cm.data.and_then(|d| d.get("pods").cloned());
        held.insert(key, (owned, count));
    }
    Ok((0..args.teams)
        .filter(|&j| {
            let k = j % args.namespaces;
            let want = args.pods_in(k).to_string();
            held.get(&(args.ns(k), team_name(j)))
                .is_some_and(|(owned, count)| *owned && count.as_deref() == Some(want.as_str()))
        })
        .count())
}

/// Deletes the Teams' ConfigMaps, the Teams and the Pods. The namespaces stay: a deleted one
/// stays Terminating on a server without a namespace controller (a bare kube-apiserver, the
/// embedded server) and refuses the next run's Pods.
///
/// # Errors
/// The first failed request.
pub(super) async fn cleanup(client: &Client, args: &BenchOperatorArgs) -> anyhow::Result<()> {
    delete_config_maps(client, args).await?;
    let resource = teams_resource();
    for k in 0..args.namespaces {
        let ns = args.ns(k);
        let teams: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
        teams
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .with_context(|| format!("deleting the teams of {ns}"))?;
        dataset::delete_objects(client, Dataset::Pods, &ns)
            .await
            .with_context(|| format!("deleting the pods of {ns}"))?;
    }
    Ok(())
}
