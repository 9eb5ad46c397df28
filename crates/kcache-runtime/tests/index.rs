//! Indexes on the manager's caches (controller-runtime's `FieldIndexer.IndexField` and
//! `MatchingFields`), on the embedded server: a metadata index and an index over the typed
//! object, read by value across every informer of a namespace set, in lean and typed storage;
//! an index the cache does not have is an error, not an empty answer.

mod common;

use std::collections::BTreeSet;

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::store::NAMESPACE_INDEX;
use kcache_client::Client;
use kcache_runtime::{Manager, manager};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The names (`namespace/name`) of `keys`, sorted.
fn names(keys: impl IntoIterator<Item = impl ToString>) -> BTreeSet<String> {
    keys.into_iter().map(|k| k.to_string()).collect()
}

async fn indexes_are_read_across_a_namespace_set(storage: manager::Storage) -> Result<()> {
    let server = common::server().await?;
    let h = server.handle();
    for ns in ["a", "b", "c"] {
        h.create("/api/v1/namespaces", json!({"metadata": {"name": ns}}))
            .map_err(|e| anyhow!("{e}"))?;
        for (name, team, size) in [
            ("web", "red", "1"),
            ("db", "blue", "22"),
            ("ops", "red", "22"),
        ] {
            h.create(
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                json!({"metadata": {"name": name, "labels": {"team": team}},
                       "data": {"size": size}}),
            )
            .map_err(|e| anyhow!("{e}"))?;
        }
    }
    let manager = Manager::new(
        Client::from_url(&server.url())?,
        manager::Config::new("index").namespaces(["a", "b"]),
    )?;
    let cms = manager.cache::<ConfigMap>(
        manager::Cache::new()
            .storage(storage)
            .meta_index("team", |meta| {
                let labels = meta.labels.iter().flatten();
                labels
                    .filter(|(k, _)| *k == "team")
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .index("size", |cm: &ConfigMap| {
                let data = cm.data.iter().flatten();
                data.filter(|(k, _)| *k == "size")
                    .map(|(_, v)| v.clone())
                    .collect()
            }),
    )?;
    assert_eq!(cms.is_lean(), storage == manager::Storage::Lean);
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    cms.wait_for_sync().await;

    let red = BTreeSet::from([
        "a/ops".into(),
        "a/web".into(),
        "b/ops".into(),
        "b/web".into(),
    ]);
    assert_eq!(names(cms.index_keys("team", "red")?), red);
    let objects = cms.by_index("team", "red")?;
    assert_eq!(
        names(objects.iter().map(|cm| format!(
            "{}/{}",
            cm.metadata.namespace.as_deref().unwrap_or(""),
            cm.metadata.name.as_deref().unwrap_or("")
        ))),
        red,
        "the objects are decoded from whatever storage"
    );
    let big = BTreeSet::from(["a/db".into(), "a/ops".into(), "b/db".into(), "b/ops".into()]);
    assert_eq!(names(cms.index_keys("size", "22")?), big);
    assert!(cms.index_keys("team", "green")?.is_empty());
    // The namespace index every cache has, across the set; c is outside it.
    assert_eq!(cms.index_keys(NAMESPACE_INDEX, "b")?.len(), 3);
    assert!(cms.index_keys(NAMESPACE_INDEX, "c")?.is_empty());
    let missing = cms.index_keys("owner", "x").expect_err("no such index");
    assert!(missing.to_string().contains("owner"), "{missing}");

    // The index follows changes.
    h.create(
        "/api/v1/namespaces/a/configmaps",
        json!({"metadata": {"name": "new", "labels": {"team": "red"}}}),
    )
    .map_err(|e| anyhow!("{e}"))?;
    common::eventually("the new object in the index", || {
        cms.index_keys("team", "red").is_ok_and(|k| k.len() == 5)
    })
    .await?;
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lean_cache_indexes_are_read_across_a_namespace_set() -> Result<()> {
    indexes_are_read_across_a_namespace_set(manager::Storage::Lean).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_cache_indexes_are_read_across_a_namespace_set() -> Result<()> {
    indexes_are_read_across_a_namespace_set(manager::Storage::Typed).await
}
