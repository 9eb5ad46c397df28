//! The Manager on the embedded server: every family and the probes over HTTP, warm standby
//! between two replicas, a lost lease and its return without a restart, the drain deadline,
//! and the finalizer's conflict safety.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::{Result, anyhow};
use common::{HANG_GUARD, NS, eventually, get, metrics, sample};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache::leaderelection::LeaderState;
use kcache_apiserver::RunningServer;
use kcache_client::Client;
use kcache_runtime::{Action, Context, FinalizerEvent, Manager, api, manager};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const LEASE: &str = "runtime-test";

fn configmap(server: &RunningServer, name: &str) -> Result<()> {
    server
        .handle()
        .create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": name}}),
        )
        .map(drop)
        .map_err(|e| anyhow!("creating configmap {name}: {e}"))
}

/// A short election, for tests: a standby takes over 4 s after the last renewal it saw, or at
/// its next attempt (every 200 ms) after a release; a leader that cannot renew steps down
/// after 3 s (long enough not to flap on a loaded machine).
fn election() -> manager::LeaderElection {
    manager::LeaderElection::new(LEASE).timings(
        Duration::from_secs(4),
        Duration::from_secs(3),
        Duration::from_millis(200),
    )
}

/// A manager whose one controller logs `IDENTITY KEY` per reconcile.
fn replica(
    server: &RunningServer,
    identity: &str,
    log: &Arc<Mutex<Vec<String>>>,
) -> Result<Manager> {
    let config = manager::Config::new("runtime-test")
        .namespace(NS)
        .identity(identity)
        .leader_election(election())
        .metrics_addr("127.0.0.1:0".parse()?);
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let (log, identity) = (Arc::clone(log), identity.to_owned());
    manager
        .controller::<ConfigMap>()
        .build(move |_cm, ctx: Context<ConfigMap>| {
            let (log, identity) = (Arc::clone(&log), identity.clone());
            async move {
                log.lock().push(format!("{identity} {}", ctx.key()));
                Ok::<_, api::Error>(Action::Done)
            }
        })?;
    Ok(manager)
}

/// Writes the lease's holder and duration (retrying while the elector's writes conflict).
fn set_holder(server: &RunningServer, holder: &str, seconds: i64) -> Result<()> {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}");
    let h = server.handle();
    for _ in 0..100 {
        let mut lease = h.get(&path).map_err(|e| anyhow!("{e}"))?;
        lease["spec"]["holderIdentity"] = json!(holder);
        lease["spec"]["leaseDurationSeconds"] = json!(seconds);
        match h.update(&path, lease) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 => continue,
            Err(e) => return Err(anyhow!("{e}")),
        }
    }
    Err(anyhow!("the lease kept changing"))
}

async fn wait_leading(state: &mut watch::Receiver<LeaderState>, leading: bool) -> Result<()> {
    tokio::time::timeout(HANG_GUARD, state.wait_for(|s| s.is_leading() == leading))
        .await
        .map_err(|_| anyhow!("never {}", if leading { "leading" } else { "standby" }))??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_and_the_probes_are_served_over_http() -> Result<()> {
    let server = common::server().await?;
    configmap(&server, "a")?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let manager = replica(&server, "only", &log)?;
    let addr = manager.metrics_addr().expect("bound");
    let mut state = manager.leader_state().expect("elected");
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    wait_leading(&mut state, true).await?;
    eventually("the reconcile", || !log.lock().is_empty()).await?;
    let (code, body) = get(addr, "/readyz").await?;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("[+]informer configmaps in namespace apps ok"),
        "{body}"
    );
    let (code, body) = get(addr, "/healthz").await?;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]leaderElection ok"), "{body}");

    let m = metrics(addr).await?;
    let q = "controller=configmaps,name=configmaps";
    for family in [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_retries_total",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_queue_duration_seconds_count",
        "workqueue_work_duration_seconds_count",
    ] {
        sample(&m, &format!("{family}{{{q}}}"))?;
    }
    assert!(sample(&m, &format!("workqueue_adds_total{{{q}}}"))? >= 1.0);
    let c = "controller=configmaps";
    // At least once: a relist (or a lost and regained lease, on a loaded machine) may
    // queue the key again.
    assert!(
        sample(
            &m,
            &format!("controller_runtime_reconcile_total{{{c},result=success}}")
        )? >= 1.0
    );
    for family in [
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_max_concurrent_reconciles",
        "controller_runtime_active_workers",
        "controller_runtime_reconcile_time_seconds_count",
        "kcache_controller_retries_total",
        "kcache_controller_cache_waits_total",
        "kcache_controller_cache_wait_timeouts_total",
        "kcache_controller_pending_writes",
    ] {
        sample(&m, &format!("{family}{{{c}}}"))?;
    }
    assert_eq!(
        sample(
            &m,
            &format!("leader_election_master_status{{name={LEASE}}}")
        )?,
        1.0
    );
    // Informer series: resource and namespace as labels of their own.
    let r = "namespace=apps,resource=configmaps";
    assert_eq!(sample(&m, &format!("kcache_informer_objects{{{r}}}"))?, 1.0);
    assert_eq!(sample(&m, &format!("kcache_informer_synced{{{r}}}"))?, 1.0);
    sample(
        &m,
        &format!("kcache_reflector_watch_events_total{{{r},type=ADDED}}"),
    )?;
    sample(
        &m,
        &format!("kcache_informer_handler_buffer_depth{{handler=controller configmaps,{r}}}"),
    )?;
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_standby_is_synced_and_takes_over_at_once_when_the_leader_shuts_down() -> Result<()>
{
    let server = common::server().await?;
    configmap(&server, "a")?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let first = replica(&server, "first", &log)?;
    let mut first_state = first.leader_state().expect("elected");
    let stop_first = CancellationToken::new();
    let run_first = tokio::spawn(first.run_until(stop_first.clone()));
    wait_leading(&mut first_state, true).await?;
    eventually("the leader's reconcile", || !log.lock().is_empty()).await?;

    let second = replica(&server, "second", &log)?;
    let second_addr = second.metrics_addr().expect("bound");
    let mut second_state = second.leader_state().expect("elected");
    let stop_second = CancellationToken::new();
    let run_second = tokio::spawn(second.run_until(stop_second.clone()));
    // The standby syncs its caches (ready) but reconciles nothing.
    tokio::time::timeout(HANG_GUARD, async {
        while get(second_addr, "/readyz").await.map(|r| r.0).unwrap_or(0) != 200 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    configmap(&server, "b")?;
    eventually("the leader reconciles b", || {
        log.lock().contains(&format!("first {NS}/b"))
    })
    .await?;
    assert!(!second_state.borrow().is_leading());
    // The standby's cache follows the server on its own watch: it holds b once that watch
    // delivered it, which may be after the leader reconciled b (its watch is opened after its
    // list, so a create between the two arrives a little later).
    let objects = "kcache_informer_objects{namespace=apps,resource=configmaps}";
    let m = tokio::time::timeout(HANG_GUARD, async {
        loop {
            let m = metrics(second_addr).await?;
            if sample(&m, objects)? == 2.0 {
                return anyhow::Ok(m);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .map_err(|_| anyhow!("the standby's cache is not warm: it never held a and b"))??;
    assert_eq!(
        sample(
            &m,
            &format!("leader_election_master_status{{name={LEASE}}}")
        )?,
        0.0
    );
    assert!(
        log.lock().iter().all(|l| l.starts_with("first ")),
        "{:?}",
        log.lock()
    );

    // The leader shuts down: it drains, releases the lease, and the standby leads and
    // reconciles what its cache holds, without waiting for the lease to expire.
    stop_first.cancel();
    run_first.await??;
    wait_leading(&mut second_state, true).await?;
    eventually("the new leader reconciles a and b", || {
        let log = log.lock();
        log.contains(&format!("second {NS}/a")) && log.contains(&format!("second {NS}/b"))
    })
    .await?;
    stop_second.cancel();
    run_second.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_returns_to_standby_and_leads_again_without_a_restart() -> Result<()> {
    let server = common::server().await?;
    configmap(&server, "a")?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let manager = replica(&server, "me", &log)?;
    let mut state = manager.leader_state().expect("elected");
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    wait_leading(&mut state, true).await?;
    eventually("the reconcile of a", || !log.lock().is_empty()).await?;

    // Someone else takes the lease for an hour: renewals fail, and the replica steps down.
    set_holder(&server, "intruder", 3600)?;
    wait_leading(&mut state, false).await?;

    // Standby: changes are cached, not reconciled.
    let reconciled = log.lock().len();
    configmap(&server, "b")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log_now = log.lock().clone();
    assert_eq!(log_now.len(), reconciled, "{log_now:?}");

    // The intruder releases the lease: the same run leads again and catches up.
    set_holder(&server, "", 1)?;
    wait_leading(&mut state, true).await?;
    eventually("b reconciled after the return", || {
        log.lock().contains(&format!("me {NS}/b"))
    })
    .await?;
    assert!(!run.is_finished(), "the manager never stopped");
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_still_running_at_the_drain_deadline_is_aborted_and_reported() -> Result<()> {
    let server = common::server().await?;
    configmap(&server, "stuck")?;
    let config = manager::Config::new("runtime-test")
        .namespace(NS)
        .identity("me")
        .leader_election(election())
        .graceful_shutdown_timeout(Duration::from_millis(300));
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let started = Arc::new(AtomicUsize::new(0));
    manager.controller::<ConfigMap>().build({
        let started = Arc::clone(&started);
        move |_cm, _ctx: Context<ConfigMap>| {
            let started = Arc::clone(&started);
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok::<_, api::Error>(Action::Done)
            }
        }
    })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("the stuck reconcile", || {
        started.load(Ordering::SeqCst) == 1
    })
    .await?;
    cancel.cancel();
    let err = tokio::time::timeout(HANG_GUARD, run)
        .await??
        .expect_err("the drain times out");
    assert!(
        matches!(&err, manager::Error::DrainTimeout { controllers, .. } if controllers == &["configmaps"]),
        "{err}"
    );
    // Aborted, then the lease released for a standby.
    let lease = server
        .handle()
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}"
        ))
        .map_err(|e| anyhow!("{e}"))?;
    assert_eq!(lease["spec"]["holderIdentity"], json!(""), "{lease}");
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_finalizer_conflicts_instead_of_dropping_one_written_meanwhile() -> Result<()> {
    const OURS: &str = "runtime.kcache.dev/cleanup";
    const THEIRS: &str = "other.example.com/keep";
    let server = common::server().await?;
    configmap(&server, "app")?;
    let path = format!("/api/v1/namespaces/{NS}/configmaps/app");
    let config = manager::Config::new("runtime-test").namespace(NS);
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let handle = server.handle().clone();
    let outcomes = Arc::new(Mutex::new(Vec::<String>::new()));
    manager.controller::<ConfigMap>().owns::<Secret>().build({
        let outcomes = Arc::clone(&outcomes);
        move |_cm, ctx: Context<ConfigMap>| {
            let (outcomes, handle, path) = (Arc::clone(&outcomes), handle.clone(), path.clone());
            async move {
                if outcomes.lock().is_empty() {
                    // Another controller adds its finalizer after our cache read.
                    let mut cm = handle.get(&path).expect("get");
                    cm["metadata"]["finalizers"] = json!([THEIRS]);
                    handle.update(&path, cm).expect("update");
                }
                let result: Result<Action, api::Error> = ctx
                    .finalizer(OURS, |event| async move {
                        match event {
                            FinalizerEvent::Apply(_) => Ok(Action::Done),
                            FinalizerEvent::Cleanup(_) => Ok(Action::Done),
                        }
                    })
                    .await;
                outcomes.lock().push(match &result {
                    Ok(_) => "applied".to_owned(),
                    Err(e) if e.is_conflict() => "conflict".to_owned(),
                    Err(e) => e.to_string(),
                });
                result
            }
        }
    })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("the retry after the conflict", || {
        outcomes.lock().contains(&"applied".to_owned())
    })
    .await?;
    // The first attempt conflicts (a retry may too, until the cache shows their write).
    let outcomes = outcomes.lock().clone();
    assert_eq!(outcomes[0], "conflict", "{outcomes:?}");
    assert!(
        outcomes.iter().all(|o| o == "conflict" || o == "applied"),
        "{outcomes:?}"
    );
    let cm = server
        .handle()
        .get(&format!("/api/v1/namespaces/{NS}/configmaps/app"))
        .map_err(|e| anyhow!("{e}"))?;
    assert_eq!(cm["metadata"]["finalizers"], json!([THEIRS, OURS]), "{cm}");
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn two_controllers_of_one_name_are_refused() -> Result<()> {
    let manager = Manager::new(
        Client::from_url("http://127.0.0.1:1")?,
        manager::Config::new("runtime-test"),
    )?;
    let reconcile = |_cm, _ctx: Context<ConfigMap>| async { Ok::<_, api::Error>(Action::Done) };
    manager.controller::<ConfigMap>().build(reconcile)?;
    let err = manager
        .controller::<ConfigMap>()
        .build(reconcile)
        .expect_err("a second controller named configmaps");
    assert!(
        matches!(err, manager::Error::DuplicateController { .. }),
        "{err}"
    );
    manager
        .controller::<ConfigMap>()
        .name("configmaps-2")
        .build(reconcile)?;
    Ok(())
}
