//! Caches over a set of namespaces on the embedded server (controller-runtime's
//! `DefaultNamespaces` and `ByObject.Namespaces`): one informer per namespace, merged reads,
//! reconciles of the set's objects only, a read outside the set an error naming it, a
//! per-type set over the manager's, controllers started once every informer synced, and a
//! replica leading again reconciling every namespace of the set.

mod common;

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use anyhow::{Result, anyhow};
use common::{HANG_GUARD, NS, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kcache::store::{LabelSelector, ObjectKey};
use kcache_apiserver::RunningServer;
use kcache_client::Client;
use kcache_runtime::{Action, Context, Manager, api, manager};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Creates namespaces `a`, `b` and `c`.
fn namespaces(server: &RunningServer) -> Result<()> {
    for ns in ["a", "b", "c"] {
        server
            .handle()
            .create("/api/v1/namespaces", json!({"metadata": {"name": ns}}))
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

/// Creates `object` in the collection `plural` of namespace `ns`.
fn create(server: &RunningServer, ns: &str, plural: &str, object: Value) -> Result<Value> {
    server
        .handle()
        .create(&format!("/api/v1/namespaces/{ns}/{plural}"), object)
        .map_err(|e| anyhow!("{e}"))
}

/// What the first reconcile saw of the caches.
#[derive(Debug, Default)]
struct FirstLook {
    /// The ConfigMaps the primary cache listed.
    configmaps: usize,
    /// The Secrets the cache of Secrets listed, and whether each of its informers had synced.
    secrets: usize,
    secret_informers_synced: Vec<bool>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_over_a_namespace_set_caches_and_reconciles_those_namespaces_only() -> Result<()>
{
    let server = common::server().await?;
    namespaces(&server)?;
    let mut uids = std::collections::HashMap::new();
    for ns in ["a", "b", "c"] {
        let cm = create(
            &server,
            ns,
            "configmaps",
            json!({"metadata": {"name": "cm"}}),
        )?;
        uids.insert(ns, cm["metadata"]["uid"].as_str().unwrap_or("").to_owned());
    }
    // Many in b: a controller started before b's informer synced would see fewer.
    for i in 0..50 {
        create(
            &server,
            "b",
            "secrets",
            json!({"metadata": {"name": format!("s{i}")}}),
        )?;
    }
    for ns in ["a", "c"] {
        create(&server, ns, "secrets", json!({"metadata": {"name": "s0"}}))?;
    }
    let manager = Manager::new(
        Client::from_url(&server.url())?,
        manager::Config::new("nsset")
            .namespaces(["b", "a"])
            .metrics_addr("127.0.0.1:0".parse()?),
    )?;
    let addr = manager.metrics_addr().expect("bound");
    let reconciled = Arc::new(Mutex::new(Vec::<String>::new()));
    let first = Arc::new(Mutex::new(None::<FirstLook>));
    let secrets = manager.informer::<Secret>();
    manager.controller::<ConfigMap>().owns::<Secret>().build({
        let (reconciled, first, secrets) =
            (Arc::clone(&reconciled), Arc::clone(&first), secrets.clone());
        move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let (reconciled, first, secrets) =
                (Arc::clone(&reconciled), Arc::clone(&first), secrets.clone());
            async move {
                first.lock().get_or_insert_with(|| FirstLook {
                    configmaps: ctx
                        .lister::<ConfigMap>()
                        .list(&LabelSelector::default())
                        .len(),
                    secrets: ctx.lister::<Secret>().list(&LabelSelector::default()).len(),
                    secret_informers_synced: secrets
                        .lean_informers()
                        .iter()
                        .map(|i| i.has_synced())
                        .collect(),
                });
                let ns = cm.metadata.namespace.clone().unwrap_or_default();
                reconciled.lock().push(ns);
                Ok::<_, api::Error>(Action::Done)
            }
        }
    })?;
    let configmaps = manager.informer::<ConfigMap>();
    assert_eq!(
        configmaps.namespaces(),
        Some(&["a".to_owned(), "b".to_owned()][..]),
        "the set, sorted"
    );
    assert_eq!(configmaps.namespace(), None, "not one namespace");
    assert!(configmaps.is_lean());
    assert_eq!(configmaps.lean_informers().len(), 2, "one informer each");
    assert!(
        configmaps.lean_informer().is_none(),
        "no single informer for a set"
    );

    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("reconciles in a and b", || reconciled.lock().len() >= 2).await?;
    let look = first.lock().take().expect("a first reconcile");
    assert_eq!(look.configmaps, 2, "a's and b's, not c's");
    assert_eq!(look.secrets, 51, "a's one and b's fifty, not c's");
    assert_eq!(
        look.secret_informers_synced,
        vec![true, true],
        "every informer of the set synced before the controller started"
    );

    // Merged and routed reads of the set.
    assert_eq!(configmaps.len(), 2);
    assert_eq!(secrets.len(), 51);
    assert!(configmaps.get(&ObjectKey::new(Some("a"), "cm")).is_some());
    assert!(configmaps.get(&ObjectKey::new(Some("b"), "cm")).is_some());
    assert!(configmaps.get(&ObjectKey::new(Some("c"), "cm")).is_none());
    let lister = secrets.lister();
    assert_eq!(
        lister.namespaced("b").list(&LabelSelector::default()).len(),
        50
    );
    assert_eq!(
        lister.namespaced("a").list(&LabelSelector::default()).len(),
        1
    );
    assert!(
        lister
            .namespaced("c")
            .list(&LabelSelector::default())
            .is_empty()
    );
    assert!(lister.namespaced("c").get("s0").is_none());
    assert!(lister.namespaced("a").get("s0").is_some());

    // Each informer of the set is exported with its namespace, and readiness waits for all.
    let m = common::metrics(addr).await?;
    for (ns, objects) in [("a", 1.0), ("b", 50.0)] {
        let key = format!("kcache_informer_objects{{namespace={ns},resource=secrets}}");
        assert_eq!(common::sample(&m, &key)?, objects, "{key}");
    }
    assert_eq!(common::get(addr, "/readyz").await?.0, 200);

    // Events of the second informer queue their keys (the primary's and an owned type's).
    let before = reconciled.lock().len();
    for ns in ["b", "c"] {
        create(
            &server,
            ns,
            "secrets",
            json!({"metadata": {"name": "owned", "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": uids[ns],
                "controller": true}]}}),
        )?;
    }
    eventually("the owner in b reconciled", || {
        reconciled.lock()[before..].iter().any(|ns| ns == "b")
    })
    .await?;
    create(
        &server,
        "b",
        "configmaps",
        json!({"metadata": {"name": "new"}}),
    )?;
    create(
        &server,
        "c",
        "configmaps",
        json!({"metadata": {"name": "new"}}),
    )?;
    eventually("b's new ConfigMap reconciled", || configmaps.len() == 3).await?;
    eventually("b's new ConfigMap reconciled", || {
        reconciled.lock()[before..]
            .iter()
            .filter(|ns| *ns == "b")
            .count()
            >= 2
    })
    .await?;
    let namespaces: BTreeSet<String> = reconciled.lock().iter().cloned().collect();
    assert_eq!(
        namespaces,
        BTreeSet::from(["a".to_owned(), "b".to_owned()]),
        "nothing in c is reconciled"
    );
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_types_namespace_set_overrides_the_managers_and_a_read_outside_a_set_names_it()
-> Result<()> {
    let server = common::server().await?;
    namespaces(&server)?;
    for ns in ["a", "c"] {
        create(
            &server,
            ns,
            "configmaps",
            json!({"metadata": {"name": "cm"}}),
        )?;
        create(
            &server,
            ns,
            "serviceaccounts",
            json!({"metadata": {"name": "builder"}}),
        )?;
        create(
            &server,
            ns,
            "secrets",
            json!({"metadata": {"name": "token"}}),
        )?;
    }
    let manager = Manager::new(
        Client::from_url(&server.url())?,
        manager::Config::new("override").namespaces(["a", "b"]),
    )?;
    let configmaps =
        manager.cache::<ConfigMap>(manager::Cache::new().namespaces(["a", "b", "c"]).typed())?;
    assert_eq!(configmaps.typed_informers().len(), 3);
    assert!(configmaps.lean_informers().is_empty());
    // One namespace stays one informer.
    let secrets = manager.cache::<Secret>(manager::Cache::new().namespaces(["c"]))?;
    assert_eq!(secrets.namespace(), Some("c"));
    assert_eq!(secrets.namespaces(), Some(&["c".to_owned()][..]));
    assert!(secrets.lean_informer().is_some());
    assert_eq!(secrets.lean_informers().len(), 1);
    let accounts = manager.informer::<ServiceAccount>();
    assert_eq!(accounts.lean_informers().len(), 2, "the manager's set");

    let seen = Arc::new(Mutex::new(Vec::new()));
    manager.controller::<ConfigMap>().build({
        let seen = Arc::clone(&seen);
        move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let seen = Arc::clone(&seen);
            async move {
                let account = ctx.read::<ServiceAccount>("builder").map(drop);
                let token = ctx.read::<Secret>("token").map(drop);
                seen.lock().push((
                    cm.metadata.namespace.clone().unwrap_or_default(),
                    account,
                    token,
                ));
                Ok::<_, api::Error>(Action::Done)
            }
        }
    })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("reconciles in a and c", || seen.lock().len() >= 2).await?;
    let mut seen = std::mem::take(&mut *seen.lock());
    seen.sort_by(|x, y| x.0.cmp(&y.0));
    let (a, c) = (&seen[0], &seen[1]);
    assert_eq!((a.0.as_str(), c.0.as_str()), ("a", "c"), "{seen:?}");
    assert!(a.1.is_ok(), "a is in the manager's set: {:?}", a.1);
    let outside = c.1.as_ref().expect_err("c is outside the manager's set");
    assert!(outside.is_not_cached());
    assert_eq!(
        outside.to_string(),
        r#"serviceaccounts c/builder is not in the manager's cache of serviceaccounts (namespaces ["a", "b"]): it does not exist, or the cache's selectors leave it out"#
    );
    assert!(c.2.is_ok(), "the Secrets are c's: {:?}", c.2);
    assert_eq!(
        a.2.as_ref().expect_err("a is outside c").to_string(),
        r#"secrets a/token is not in the manager's cache of secrets (namespace "c"): it does not exist, or the cache's selectors leave it out"#
    );
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

/// Writes the lease's holder and duration (retrying while the elector's writes conflict).
fn set_holder(server: &RunningServer, lease: &str, holder: &str, seconds: i64) -> Result<()> {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{lease}");
    let h = server.handle();
    for _ in 0..100 {
        let mut object = h.get(&path).map_err(|e| anyhow!("{e}"))?;
        object["spec"]["holderIdentity"] = json!(holder);
        object["spec"]["leaseDurationSeconds"] = json!(seconds);
        match h.update(&path, object) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 => continue,
            Err(e) => return Err(anyhow!("{e}")),
        }
    }
    Err(anyhow!("the lease kept changing"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_leading_again_reconciles_every_namespace_of_the_set() -> Result<()> {
    const LEASE: &str = "nsset-test";
    let server = common::server().await?;
    namespaces(&server)?;
    for ns in ["a", "b"] {
        create(
            &server,
            ns,
            "configmaps",
            json!({"metadata": {"name": "cm"}}),
        )?;
    }
    // A short election: a leader that cannot renew steps down after 3 s.
    let election = manager::LeaderElection::new(LEASE)
        .lease_namespace(NS)
        .timings(
            Duration::from_secs(4),
            Duration::from_secs(3),
            Duration::from_millis(200),
        );
    let config = manager::Config::new("nsset-election")
        .namespaces(["a", "b"])
        .identity("me")
        .leader_election(election);
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    manager.controller::<ConfigMap>().build({
        let log = Arc::clone(&log);
        move |_cm, ctx: Context<ConfigMap>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().push(ctx.key().to_string());
                Ok::<_, api::Error>(Action::Done)
            }
        }
    })?;
    let mut state = manager.leader_state().expect("elected");
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    let both = |log: &Arc<Mutex<Vec<String>>>| {
        let log = log.lock();
        log.iter().any(|k| k == "a/cm") && log.iter().any(|k| k == "b/cm")
    };
    eventually("a/cm and b/cm reconciled", || both(&log)).await?;

    // Someone else takes the lease: the replica steps down.
    set_holder(&server, LEASE, "intruder", 3600)?;
    tokio::time::timeout(HANG_GUARD, state.wait_for(|s| !s.is_leading())).await??;
    log.lock().clear();
    // Released: the same run leads again and queues every cached primary object, of each
    // namespace of the set.
    set_holder(&server, LEASE, "", 1)?;
    tokio::time::timeout(HANG_GUARD, state.wait_for(|s| s.is_leading())).await??;
    eventually("a/cm and b/cm reconciled again", || both(&log)).await?;
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}
