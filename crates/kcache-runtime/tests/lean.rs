//! Lean caches on the embedded server: every manager cache stores lean objects unless its
//! type or the manager asks for typed ones, reconciles still read typed objects, and the
//! memory held drops; metadata-only caches.

mod common;

use std::sync::Arc;

use anyhow::{Result, anyhow};
use common::{NS, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kcache::{memory::MemoryUsage, store::LabelSelector};
use kcache_apiserver::ServerHandle;
use kcache_client::Client;
use kcache_runtime::{Action, Context, Manager, api, manager};
use kube_core::metadata::PartialObjectMeta;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Objects per kind in the memory comparison.
const N: usize = 200;

fn seed(h: &ServerHandle) -> Result<()> {
    for i in 0..N {
        let data: serde_json::Map<String, serde_json::Value> = (0..8)
            .map(|k| {
                (
                    format!("key-{k}"),
                    json!(format!("value {k} of configmap {i}")),
                )
            })
            .collect();
        h.create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": format!("cm-{i}"), "labels": {"app": "web"},
                "annotations": {"note": "seeded"}}, "data": data}),
        )
        .map_err(|e| anyhow!("{e}"))?;
        h.create(
            &format!("/api/v1/namespaces/{NS}/pods"),
            json!({"metadata": {"name": format!("pod-{i}"), "labels": {"app": "web"}},
                "spec": {"nodeName": "node-a", "containers": [{"name": "web",
                    "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                    "env": [{"name": "MODE", "value": "production"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}),
        )
        .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

/// The memory held by a manager's caches of ConfigMaps and Pods, with `config`'s storage.
async fn held(url: &str, config: manager::Config) -> Result<(MemoryUsage, MemoryUsage, bool)> {
    let manager = Manager::new(Client::from_url(url)?, config)?;
    let cms = manager.cache::<ConfigMap>(manager::Cache::new().account_memory())?;
    let pods = manager.cache::<Pod>(manager::Cache::new().account_memory())?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("the caches", || cms.len() == N && pods.len() == N).await?;
    // Reads are typed whatever the storage.
    let cm = cms
        .lister()
        .namespaced(NS)
        .get("cm-7")
        .ok_or_else(|| anyhow!("cm-7 cached"))?;
    assert_eq!(
        cm.data.as_ref().map(|d| d["key-1"].as_str()),
        Some("value 1 of configmap 7")
    );
    let lean = cms.is_lean() && pods.is_lean();
    let memory = (cms.memory(), pods.memory());
    cancel.cancel();
    run.await??;
    match memory {
        (Some(cms), Some(pods)) => Ok((cms, pods, lean)),
        _ => Err(anyhow!("memory accounting is on")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_caches_are_lean_by_default_and_hold_less_than_typed_ones() -> Result<()> {
    let server = common::server().await?;
    seed(server.handle())?;
    let url = server.url();
    let config = || manager::Config::new("lean").namespace(NS);
    let (lean_cms, lean_pods, lean) = held(&url, config()).await?;
    let typed = config().storage(manager::Storage::Typed);
    let (typed_cms, typed_pods, typed_lean) = held(&url, typed).await?;
    eprintln!(
        "{N} ConfigMaps: lean {} B, typed {} B; {N} Pods: lean {} B, typed {} B",
        lean_cms.bytes, typed_cms.bytes, lean_pods.bytes, typed_pods.bytes
    );
    assert!(lean, "the default storage is lean");
    assert!(!typed_lean, "Config::storage(Typed) stores typed objects");
    assert_eq!((lean_cms.objects, lean_pods.objects), (N, N));
    assert!(
        lean_cms.bytes < typed_cms.bytes,
        "ConfigMaps: lean {lean_cms:?}, typed {typed_cms:?}"
    );
    assert!(
        lean_pods.bytes * 2 < typed_pods.bytes,
        "Pods: lean {lean_pods:?}, typed {typed_pods:?}"
    );
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_read_typed_objects_from_lean_caches_and_a_type_may_ask_for_typed() -> Result<()>
{
    let server = common::server().await?;
    let h = server.handle();
    h.create(
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        json!({"metadata": {"name": "app"}, "data": {"mode": "blue"}}),
    )
    .map_err(|e| anyhow!("{e}"))?;
    h.create(
        &format!("/api/v1/namespaces/{NS}/secrets"),
        json!({"metadata": {"name": "token", "labels": {"app": "web"}},
            "data": {"token": "czNjcmV0"}}),
    )
    .map_err(|e| anyhow!("{e}"))?;
    let manager = Manager::new(
        Client::from_url(&server.url())?,
        manager::Config::new("lean-reads").namespace(NS),
    )?;
    let secrets = manager.cache::<Secret>(manager::Cache::new().typed())?;
    assert!(!secrets.is_lean(), "Cache::typed");
    assert!(secrets.typed_informer().is_some());
    let seen = Arc::new(Mutex::new(None));
    manager
        .controller::<ConfigMap>()
        .watches::<Secret>(|_| Vec::new())
        .build({
            let seen = Arc::clone(&seen);
            move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
                let seen = Arc::clone(&seen);
                async move {
                    let mode = cm.data.as_ref().map(|d| d["mode"].clone());
                    let again = ctx.read::<ConfigMap>("app")?;
                    let listed = ctx.lister::<ConfigMap>().list(&LabelSelector::default());
                    let token = ctx.get::<Secret>("token").and_then(|s| s.data.clone());
                    *seen.lock() = Some((mode, again.data.clone(), listed.len(), token));
                    Ok::<_, api::Error>(Action::Done)
                }
            }
        })?;
    let primary = manager.informer::<ConfigMap>();
    assert!(primary.is_lean(), "the primary cache is lean by default");
    assert!(primary.lean_informer().is_some());
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("a reconcile", || seen.lock().is_some()).await?;
    let (mode, again, listed, token) = seen.lock().take().expect("seen");
    assert_eq!(
        mode.as_deref(),
        Some("blue"),
        "the reconciled object is decoded"
    );
    assert_eq!(again.map(|d| d["mode"].clone()).as_deref(), Some("blue"));
    assert_eq!(listed, 1);
    let token = token.ok_or_else(|| anyhow!("the secret is cached"))?;
    assert_eq!(token["token"].0, b"s3cret".to_vec());
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_cache_holds_metadata_only_and_reconciles_read_it() -> Result<()> {
    let server = common::server().await?;
    let h = server.handle();
    h.create(
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        json!({"metadata": {"name": "app"}}),
    )
    .map_err(|e| anyhow!("{e}"))?;
    h.create(
        &format!("/api/v1/namespaces/{NS}/secrets"),
        json!({"metadata": {"name": "token", "labels": {"app": "web"}},
            "data": {"token": "czNjcmV0"}}),
    )
    .map_err(|e| anyhow!("{e}"))?;
    let manager = Manager::new(
        Client::from_url(&server.url())?,
        manager::Config::new("metadata").namespace(NS),
    )?;
    let secrets = manager.metadata_cache::<Secret>();
    let seen = Arc::new(Mutex::new(None));
    manager.controller::<ConfigMap>().build({
        let seen = Arc::clone(&seen);
        move |_cm, ctx: Context<ConfigMap>| {
            let seen = Arc::clone(&seen);
            async move {
                let token = ctx.read::<PartialObjectMeta<Secret>>("token")?;
                *seen.lock() = Some(token.metadata.labels.clone());
                Ok::<_, api::Error>(Action::Done)
            }
        }
    })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("a reconcile", || seen.lock().is_some()).await?;
    let labels = seen.lock().take().expect("seen");
    assert_eq!(labels.map(|l| l["app"].clone()).as_deref(), Some("web"));
    let cached = secrets.list();
    assert_eq!(cached.len(), 1);
    // What the server sent: PartialObjectMetadata, not Secrets.
    let types = cached[0].types.as_ref().map(|t| t.kind.as_str());
    assert_eq!(types, Some("PartialObjectMetadata"));
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}
