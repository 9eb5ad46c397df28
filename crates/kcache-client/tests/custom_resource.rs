//! A kube-rs `CustomResource` type through a kcache informer against the embedded server:
//! the CustomResourceDefinition is created over HTTP, custom resources are listed, watched,
//! updated and deleted, and the cache follows.

use std::time::Duration;

use anyhow::{Context, Result};
use kcache::{InformerFrom, SharedInformerFactory, factory};
use kcache_apiserver::ApiServer;
use kcache_client::Client;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The spec of a `Widget` (`example.com/v1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    schema = "disabled"
)]
pub struct WidgetSpec {
    size: i64,
}

/// The status of a `Widget`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct WidgetStatus {
    ready: bool,
}

/// A guard against a hung wait; not a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(30);

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) -> Result<()> {
    tokio::time::timeout(HANG_GUARD, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .with_context(|| format!("waiting for {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_custom_resource_type_syncs_through_a_kcache_informer() -> Result<()> {
    let server = ApiServer::builder().build().start().await?;
    let h = server.handle().clone();
    h.create(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}
        }),
    )
    .map_err(|e| anyhow::anyhow!("creating the CRD: {e}"))?;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let first = Widget::new("a", WidgetSpec { size: 1 });
    h.create(widgets, serde_json::to_value(&first)?)
        .map_err(|e| anyhow::anyhow!("creating a widget: {e}"))?;

    let client = Client::from_url(&server.url())?;
    let factory = SharedInformerFactory::new(factory::Config::default());
    let informer = factory.informer_builder::<Widget>(&client).build()?;
    factory.start();
    factory.wait_for_cache_sync().await;
    let cached = informer
        .lister()
        .namespaced("default")
        .get("a")
        .context("a is cached")?;
    // The default informer keeps each Widget as its bytes; the typed view decodes it.
    assert_eq!(cached.typed()?.spec, WidgetSpec { size: 1 });

    // Created, updated (spec: generation 2), its status written, another deleted: the cache
    // follows each.
    h.create(
        widgets,
        serde_json::to_value(Widget::new("b", WidgetSpec { size: 2 }))?,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut a = h
        .get(&format!("{widgets}/a"))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    a["spec"]["size"] = json!(5);
    let mut a = h
        .update(&format!("{widgets}/a"), a)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    a["status"] = json!({"ready": true});
    h.update(&format!("{widgets}/a/status"), a)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let lister = informer.lister().namespaced("default");
    eventually("a updated and ready, b added", || {
        lister
            .get("a")
            .and_then(|a| a.typed().ok())
            .is_some_and(|a| a.spec.size == 5 && a.status.as_ref().is_some_and(|s| s.ready))
            && lister.get("b").is_some()
    })
    .await?;
    assert_eq!(
        lister.get("a").unwrap().metadata().generation,
        Some(2),
        "the spec change bumped the generation, the status write did not"
    );
    h.delete(&format!("{widgets}/b"))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    eventually("b deleted", || lister.get("b").is_none()).await?;

    factory.shutdown().await;
    server.shutdown().await;
    Ok(())
}
