//! `sharded_controller` processes (examples/sharded_controller.rs) sharing 12 shards of 3,000
//! ConfigMaps: on the upstream kube-apiserver with the `ShardedListAndWatch` gate on (a
//! server this test starts) and off (the suite's server), and on the embedded server (which
//! ignores `shardSelector`: the client-side filter does the work).
//!
//! 3 replicas split the shards 4/4/4 and every labelled ConfigMap ends up annotated by the
//! replica holding its shard; a 4th joins → 3/3/3/3; one is SIGKILLed → its shards are taken
//! over within lease duration + 2 × retry period + 1 s (4 s + 0.8 s + 1 s; the stated bound
//! allows the survivors' observation and acquisition rounds and a loaded 2-core machine) and
//! ConfigMaps created meanwhile are reconciled; ConfigMaps are created, updated and deleted
//! throughout. No key is ever reconciled by two replicas at once (the replicas print each
//! reconcile's interval). At the end (SIGTERM) every replica's cache equals the server's
//! ConfigMaps of its shards (count and digest of keys) and it exits 0. The whole scenario is
//! bounded by `SCENARIO_BOUND`.

#[path = "../common/mod.rs"]
mod common;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, ensure};
use common::TestServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    ListerWatcher,
    lister_watcher::ListParams,
    sharding::{Field, Layout, Selection, fnv1a64},
};
use kcache_client::HttpListerWatcher;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// How often the scenario re-reads the server and the replicas' lines while it waits.
const POLL: Duration = Duration::from_millis(200);
const SHARDS: u32 = 12;
const OBJECTS: usize = 3_000;
const LEASE_S: f64 = 4.0;
const RENEW_S: f64 = 2.0;
const RETRY_S: f64 = 0.4;
const SCENARIO_BOUND: Duration = Duration::from_secs(240);

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_on_the_embedded_server() -> Result<()> {
    let s = TestServer::embedded().await?;
    let dir = temp_dir("embedded")?;
    let kubeconfig = dir.join("kubeconfig");
    s.embedded_server()
        .context("embedded")?
        .write_kubeconfig(&kubeconfig)?;
    let r = scenario(&s, &kubeconfig, None, dir.clone()).await;
    if r.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_on_kube_apiserver_without_the_feature_gate() -> Result<()> {
    let Some(s) = TestServer::upstream().await? else {
        return common::upstream_missing();
    };
    let kubeconfig = s.upstream_info().context("upstream")?.kubeconfig.clone();
    let dir = temp_dir("gate-off")?;
    let r = scenario(&s, &kubeconfig, Some(false), dir.clone()).await;
    if r.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_on_kube_apiserver_with_sharded_list_and_watch() -> Result<()> {
    let Some((s, _server)) = TestServer::own_upstream("ShardedListAndWatch=true").await? else {
        return common::upstream_missing();
    };
    let kubeconfig = s.upstream_info().context("upstream")?.kubeconfig.clone();
    let dir = temp_dir("gate-on")?;
    let r = scenario(&s, &kubeconfig, Some(true), dir.clone()).await;
    if r.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    r
}

mod fleet;
mod scenario;

use fleet::*;
use scenario::*;
