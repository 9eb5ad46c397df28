//! kcache's Reflector end to end over HTTP: HttpListerWatcher → Reflector → store, against the
//! embedded server (with faults) and the upstream kube-apiserver (without).

mod common;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::{Context, Result, ensure};
use common::TestServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    ListerWatcher,
    lister_watcher::ListParams,
    reflector::{Config, Reflector, ReflectorHandle},
    store::ObjectKey,
    testing::{RecordingStore, StoreOp},
};
use kcache_apiserver::{ApiServer, InjectedFailure};
use kcache_client::HttpListerWatcher;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A guard against a hung reflector; not a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(90);

struct Running {
    store: Arc<RecordingStore<ConfigMap>>,
    wire: kcache_client::WireStats,
    handle: ReflectorHandle,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(s: &TestServer, config: Config) -> Self {
        let lw = HttpListerWatcher::<ConfigMap>::namespaced(s.client.clone(), &s.ns);
        let wire = lw.wire_stats();
        let store = Arc::new(RecordingStore::<ConfigMap>::new());
        let reflector = Reflector::new(lw, store.clone(), config);
        let handle = reflector.handle();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(reflector.run(cancel.clone()));
        Self {
            store,
            wire,
            handle,
            cancel,
            task,
        }
    }

    async fn wait_ops(&self, pred: impl FnMut(&[StoreOp]) -> bool) -> Result<()> {
        tokio::time::timeout(HANG_GUARD, self.store.wait_for(pred))
            .await
            .context("reflector hung")
    }

    /// Waits until the store holds exactly the server's current objects and RVs.
    async fn converge(&self, s: &TestServer) -> Result<()> {
        let want = server_state(s).await?;
        self.converge_to(s, want).await
    }

    /// Waits until the store holds exactly `want`.
    async fn converge_to(&self, s: &TestServer, want: BTreeMap<ObjectKey, String>) -> Result<()> {
        let result = tokio::time::timeout(HANG_GUARD, async {
            loop {
                let seen = self.store.ops().len();
                if self.store.snapshot() == want {
                    return;
                }
                self.store.wait_for(|ops| ops.len() > seen).await;
            }
        })
        .await;
        result.with_context(|| {
            format!(
                "{}: store {:?} != server {want:?}",
                s.name,
                self.store.snapshot()
            )
        })
    }

    async fn stop(self) -> Result<()> {
        self.cancel.cancel();
        self.task.await?;
        Ok(())
    }
}

async fn server_state(s: &TestServer) -> Result<BTreeMap<ObjectKey, String>> {
    let lw = HttpListerWatcher::<ConfigMap>::namespaced(s.client.clone(), &s.ns);
    let list = lw
        .list(&ListParams {
            resource_version: Some(String::new()),
            ..ListParams::default()
        })
        .await?;
    Ok(list
        .items
        .iter()
        .map(|c| {
            (
                ObjectKey::new(
                    c.metadata.namespace.as_deref(),
                    c.metadata.name.as_deref().unwrap(),
                ),
                c.metadata.resource_version.clone().unwrap(),
            )
        })
        .collect())
}

async fn churn(s: &TestServer, round: usize) -> Result<()> {
    for i in 0..6 {
        s.create_cm(&format!("r{round}-{i}"), json!({}), json!({"v": "0"}))
            .await?;
    }
    for i in 0..3 {
        s.update_cm(&format!("r{round}-{i}"), json!({"v": "1"}))
            .await?;
    }
    s.delete_cm(&format!("r{round}-5")).await?;
    Ok(())
}

fn replaced(ops: &[StoreOp]) -> bool {
    ops.iter().any(|o| matches!(o, StoreOp::Replace(..)))
}

#[tokio::test]
async fn reflector_lists_then_follows_churn_to_the_servers_state() -> Result<()> {
    for watch_list in [false, true] {
        // A fresh namespace (and embedded server) per mode.
        for s in TestServer::all().await? {
            churn(&s, 0).await?;
            let r = Running::start(
                &s,
                Config::default().page_size(2).initial_list(if watch_list {
                    kcache::reflector::InitialList::Stream
                } else {
                    kcache::reflector::InitialList::List
                }),
            );
            r.wait_ops(replaced).await?;
            r.converge(&s).await?;
            churn(&s, 1).await?;
            r.converge(&s).await?;
            // Protobuf from the upstream server, JSON from the embedded one.
            s.ensure_wire(&r.wire)?;
            let m = r.handle.metrics();
            ensure!(
                m.relists == 0,
                "{} (watch list {watch_list}): {m:?}",
                s.name
            );
            if watch_list {
                ensure!(
                    m.watch_lists == 1 && m.lists == 0,
                    "{} streaming list: {m:?}",
                    s.name
                );
            } else {
                // The first list is at RV=0 with limit=2: served from the watch cache, one page.
                ensure!(m.lists == 1 && m.watch_lists == 0, "{} LIST: {m:?}", s.name);
            }
            r.stop().await?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn watch_error_410_after_compaction_relists_and_converges() -> Result<()> {
    let s = TestServer::embedded().await?;
    churn(&s, 0).await?;
    let r = Running::start(
        &s,
        Config::default().initial_list(kcache::reflector::InitialList::List),
    );
    r.wait_ops(replaced).await?;
    r.converge(&s).await?;
    let faults = s.faults().unwrap();
    // Hold the watch back, write, compact past the reflector's RV, then drop the watch: the
    // re-watch from the old RV gets an ERROR 410 and the reflector relists.
    faults.stall_watches(true);
    churn(&s, 1).await?;
    faults.compact();
    faults.drop_watches();
    faults.stall_watches(false);
    r.converge(&s).await?;
    r.wait_ops(|ops| {
        ops.iter()
            .filter(|o| matches!(o, StoreOp::Replace(..)))
            .count()
            >= 2
    })
    .await?;
    ensure!(r.handle.metrics().relists >= 1, "{:?}", r.handle.metrics());
    r.stop().await
}

#[tokio::test]
async fn too_many_requests_on_rewatch_backs_off_and_rewatches_without_relisting() -> Result<()> {
    let s = TestServer::embedded().await?;
    churn(&s, 0).await?;
    let r = Running::start(
        &s,
        Config::default().initial_list(kcache::reflector::InitialList::List),
    );
    r.wait_ops(replaced).await?;
    r.converge(&s).await?;
    // One event first, so that the dropped watch is not a "very short watch" (which relists).
    s.create_cm("first", json!({}), json!({})).await?;
    r.converge(&s).await?;
    let faults = s.faults().unwrap();
    faults.fail_next(1, InjectedFailure::TooManyRequests { retry_after: 1 });
    faults.drop_watches();
    // Wait until the server has really closed the open watch, so that the writes below cannot
    // slip through it. The fault handle has no awaitable hook for this, only a counter.
    tokio::time::timeout(HANG_GUARD, async {
        while faults.dropped_watches() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .context("the watch was not dropped")?;
    // Writes go in-process (no HTTP request that could take the injected 429): the re-watch is
    // the only request, so it gets the 429.
    let handle = s.embedded_server().unwrap().handle();
    for i in 0..3 {
        handle
            .create(
                &s.configmaps(),
                json!({"metadata": {"name": format!("direct-{i}")}}),
            )
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    handle
        .delete(&format!("{}/first", s.configmaps()))
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let (objects, _) = handle
        .list(&s.configmaps())
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let want = objects
        .iter()
        .map(|o| {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            let rv = o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            (ObjectKey::new(Some(&s.ns), name), rv.to_owned())
        })
        .collect();
    r.converge_to(&s, want).await?;
    let m = r.handle.metrics();
    ensure!(m.relists == 0, "{m:?}");
    ensure!(m.watches >= 2, "{m:?}");
    // The injected 429 was taken by the reflector's re-watch: this list is not refused.
    server_state(&s).await?;
    r.stop().await
}

#[tokio::test]
async fn truncated_stream_rewatches_from_the_last_rv_without_relisting() -> Result<()> {
    let s = TestServer::embedded().await?;
    churn(&s, 0).await?;
    let r = Running::start(
        &s,
        Config::default().initial_list(kcache::reflector::InitialList::List),
    );
    r.wait_ops(replaced).await?;
    r.converge(&s).await?;
    // One complete event first: a watch that breaks before any event is relisted (client-go's
    // "closed in under 1 s with no events" rule), which is not what this test is about.
    s.create_cm("first", json!({}), json!({})).await?;
    r.converge(&s).await?;
    s.faults().unwrap().truncate_next_watch_events(1);
    churn(&s, 1).await?;
    r.converge(&s).await?;
    let m = r.handle.metrics();
    ensure!(m.relists == 0, "{m:?}");
    ensure!(
        m.watches >= 2,
        "the truncated watch was not replaced: {m:?}"
    );
    r.stop().await
}

#[tokio::test]
async fn bookmarks_advance_the_resource_version() -> Result<()> {
    let s = TestServer::embedded_with(
        ApiServer::builder().bookmark_interval(Duration::from_millis(100)),
    )
    .await?;
    s.create_cm("a", json!({}), json!({})).await?;
    let r = Running::start(
        &s,
        Config::default().initial_list(kcache::reflector::InitialList::List),
    );
    r.wait_ops(replaced).await?;
    // A write in another namespace moves the global RV; our watch only learns it by bookmark.
    let other_ns = format!("{}-other", s.ns);
    s.request(
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other_ns}})),
    )
    .await?;
    let other = s
        .request(
            "POST",
            &format!("/api/v1/namespaces/{other_ns}/configmaps"),
            Some(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "elsewhere"}}),
            ),
        )
        .await?;
    let target: u64 = other["metadata"]["resourceVersion"]
        .as_str()
        .context("rv")?
        .parse()?;
    r.wait_ops(|ops| {
        ops.iter().any(
            |o| matches!(o, StoreOp::Bookmark(rv) if rv.parse::<u64>().is_ok_and(|v| v >= target)),
        )
    })
    .await?;
    let last: u64 = r.handle.last_sync_resource_version().parse()?;
    ensure!(last >= target, "last sync RV {last} < {target}");
    ensure!(r.store.snapshot().len() == 1);
    r.stop().await
}

/// A running reflector of `K` over `lw`, feeding a recording store.
struct Spawned<K> {
    store: Arc<RecordingStore<K>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn spawn_reflector<K, L>(lw: L) -> Spawned<K>
where
    K: kube_core::Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    let store = Arc::new(RecordingStore::<K>::new());
    let reflector = Reflector::new(lw, store.clone(), Config::default());
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    Spawned {
        store,
        cancel,
        task,
    }
}

impl<K: kube_core::Resource + Send + Sync + 'static> Spawned<K> {
    /// Waits until the store equals `want` (key → RV), then stops the reflector.
    async fn converge_and_stop(self, want: &BTreeMap<ObjectKey, String>) -> Result<()> {
        let store = self.store.clone();
        let result = tokio::time::timeout(HANG_GUARD, async {
            loop {
                let seen = store.ops().len();
                if &store.snapshot() == want {
                    return;
                }
                store.wait_for(|ops| ops.len() > seen).await;
            }
        })
        .await;
        self.cancel.cancel();
        self.task.await?;
        result.with_context(|| format!("store {:?} != {want:?}", store.snapshot()))
    }
}

#[tokio::test]
async fn typed_dynamic_metadata_only_and_compact_reflectors_converge_under_churn_and_faults()
-> Result<()> {
    use kcache_client::compact::{Compact, CompactDecoder};
    use kube_core::{DynamicObject, GroupVersionKind, PartialObjectMeta};

    let s = TestServer::embedded().await?;
    churn(&s, 0).await?;
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let typed = spawn_reflector::<ConfigMap, _>(HttpListerWatcher::<ConfigMap>::namespaced(
        s.client.clone(),
        &s.ns,
    ));
    let dynamic = spawn_reflector::<DynamicObject, _>(
        kcache_client::dynamic::lister_watcher(s.client.clone(), &gvk, Some(&s.ns)).await?,
    );
    let meta = spawn_reflector::<PartialObjectMeta<ConfigMap>, _>(HttpListerWatcher::<
        PartialObjectMeta<ConfigMap>,
    >::namespaced(
        s.client.clone(), &s.ns
    ));
    let compact = spawn_reflector::<Compact<ConfigMap>, _>(
        HttpListerWatcher::<Compact<ConfigMap>>::namespaced(s.client.clone(), &s.ns)
            .with_decoder(CompactDecoder::new().strip_managed_fields(true)),
    );
    // Churn while they run, with dropped watches and a compaction in between.
    let faults = s.faults().unwrap();
    churn(&s, 1).await?;
    faults.drop_watches();
    churn(&s, 2).await?;
    faults.compact();
    faults.drop_watches();
    churn(&s, 3).await?;
    let want = server_state(&s).await?;
    ensure!(want.len() == 20, "{want:?}");
    let (a, b, c, d) = tokio::join!(
        typed.converge_and_stop(&want),
        dynamic.converge_and_stop(&want),
        meta.converge_and_stop(&want),
        compact.converge_and_stop(&want),
    );
    a.context("typed")?;
    b.context("dynamic")?;
    c.context("metadata only")?;
    d.context("compact")?;
    Ok(())
}

/// `InitialList::Auto`, the default, on each server: the client reads `/version` (the
/// upstream server's is the release it was built from), and the reflector streams on
/// kube-apiserver 1.37+ (a gzip-compressed streaming list) and over protobuf from 1.34, and
/// lists elsewhere.
#[tokio::test]
async fn auto_initial_list_follows_the_servers_version() -> Result<()> {
    for s in TestServer::all().await? {
        churn(&s, 0).await?;
        let version = s
            .client
            .server_version()
            .await
            .with_context(|| format!("{}: /version", s.name))?;
        if s.name == "upstream" {
            let built = std::env::var("KCACHE_UPSTREAM_VERSION").unwrap_or_default();
            ensure!(
                built.starts_with(&format!("v{version}.")),
                "upstream /version says {version}, the harness built {built}"
            );
        }
        let r = Running::start(&s, Config::default());
        r.wait_ops(replaced).await?;
        r.converge(&s).await?;
        churn(&s, 1).await?;
        r.converge(&s).await?;
        let m = r.handle.metrics();
        let protobuf =
            HttpListerWatcher::<ConfigMap>::namespaced(s.client.clone(), &s.ns).asks_for_protobuf();
        let streams = kcache::reflector::auto_initial_list(Some(&version), protobuf)
            == kcache::reflector::InitialList::Stream;
        if streams {
            ensure!(
                m.watch_lists == 1 && m.lists == 0,
                "{} {version}: one streaming list: {m:?}",
                s.name
            );
        } else {
            ensure!(
                m.lists == 1 && m.watch_lists == 0,
                "{} {version}: one LIST: {m:?}",
                s.name
            );
        }
        r.stop().await?;
    }
    Ok(())
}
