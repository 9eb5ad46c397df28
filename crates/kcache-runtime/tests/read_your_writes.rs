//! Read-your-own-writes on the embedded server: with the watches stalled right after a write,
//! the next reconcile of the key waits until the cache shows the write (no second create,
//! a delete is not seen undone), or is retried instead of running on the stale cache.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::{Result, anyhow};
use common::{HANG_GUARD, NS, eventually, metrics, sample};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache_client::Client;
use kcache_runtime::{Action, Context, Manager, api, manager};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn secret(name: &str) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.to_owned());
    s
}

/// Waits until the manager's `/metrics` has `key` at `value`.
async fn metric_reaches(addr: std::net::SocketAddr, key: &str, value: f64) -> Result<()> {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            if let Ok(m) = metrics(addr).await
                && m.get(key) == Some(&value)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .map_err(|_| anyhow!("{key} never reached {value}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_right_after_a_create_reads_it_from_the_cache_and_creates_nothing_twice()
-> Result<()> {
    let server = common::server().await?;
    server
        .handle()
        .create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": "app"}}),
        )
        .map_err(|e| anyhow!("{e}"))?;
    let config = manager::Config::new("ryow")
        .namespace(NS)
        .metrics_addr("127.0.0.1:0".parse()?)
        .cache_wait_timeout(HANG_GUARD);
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let addr = manager.metrics_addr().expect("bound");
    let faults = server.faults().clone();
    let creates = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    manager.controller::<ConfigMap>().owns::<Secret>().build({
        let (creates, log) = (Arc::clone(&creates), Arc::clone(&log));
        move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let (creates, log, faults) = (Arc::clone(&creates), Arc::clone(&log), faults.clone());
            async move {
                let name = cm.metadata.name.clone().unwrap_or_default();
                if ctx.get::<Secret>(&name).is_some() {
                    log.lock().push("sees the secret".to_owned());
                    return Ok(Action::Done);
                }
                log.lock().push("no secret".to_owned());
                // From here the watches hold every event back: the Secret's ADDED included.
                faults.stall_watches(true);
                creates.fetch_add(1, Ordering::SeqCst);
                ctx.apply_owned(secret(&name)).await?;
                // Reconcile again at once: the cache has not seen the Secret.
                Ok::<_, api::Error>(Action::Requeue)
            }
        }
    })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));

    // The second reconcile waits for the cache instead of running on it.
    metric_reaches(
        addr,
        "kcache_controller_cache_waits_total{controller=configmaps}",
        1.0,
    )
    .await?;
    assert_eq!(*log.lock(), ["no secret"]);
    let m = metrics(addr).await?;
    assert_eq!(
        sample(
            &m,
            "kcache_controller_pending_writes{controller=configmaps}"
        )?,
        1.0
    );

    // The watches resume: the cache shows the Secret, and the waiting reconcile reads it.
    server.faults().stall_watches(false);
    eventually("the second reconcile", || log.lock().len() >= 2).await?;
    assert_eq!(log.lock()[..2], ["no secret", "sees the secret"]);
    assert_eq!(creates.load(Ordering::SeqCst), 1, "created once");

    let m = metrics(addr).await?;
    for (key, value) in [
        (
            "kcache_controller_cache_waits_total{controller=configmaps}",
            1.0,
        ),
        (
            "kcache_controller_cache_wait_seconds_count{controller=configmaps}",
            1.0,
        ),
        (
            "kcache_controller_cache_wait_timeouts_total{controller=configmaps}",
            0.0,
        ),
        (
            "kcache_controller_pending_writes{controller=configmaps}",
            0.0,
        ),
        (
            "kcache_controller_writes_total{controller=configmaps,resource=secrets,verb=apply}",
            1.0,
        ),
    ] {
        assert_eq!(sample(&m, key)?, value, "{key}");
    }
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_after_a_delete_does_not_see_the_deleted_object() -> Result<()> {
    let server = common::server().await?;
    let h = server.handle();
    h.create(
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        json!({"metadata": {"name": "app"}}),
    )
    .map_err(|e| anyhow!("{e}"))?;
    h.create(
        &format!("/api/v1/namespaces/{NS}/secrets"),
        json!({"metadata": {"name": "app"}}),
    )
    .map_err(|e| anyhow!("{e}"))?;
    let config = manager::Config::new("ryow")
        .namespace(NS)
        .cache_wait_timeout(HANG_GUARD);
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let faults = server.faults().clone();
    let deletes = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::<bool>::new()));
    manager.controller::<ConfigMap>().owns::<Secret>().build({
        let (deletes, seen) = (Arc::clone(&deletes), Arc::clone(&seen));
        move |_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let (deletes, seen, faults) = (Arc::clone(&deletes), Arc::clone(&seen), faults.clone());
            async move {
                let present = ctx.get::<Secret>("app").is_some();
                seen.lock().push(present);
                if !present {
                    return Ok(Action::Done);
                }
                faults.stall_watches(true);
                deletes.fetch_add(1, Ordering::SeqCst);
                ctx.api::<Secret>().delete("app").await?;
                Ok::<_, api::Error>(Action::Requeue)
            }
        }
    })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("the first reconcile", || !seen.lock().is_empty()).await?;
    // Give a reconcile that would read the stale cache the time to do so.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        *seen.lock(),
        [true],
        "the requeued reconcile waits for the delete"
    );
    server.faults().stall_watches(false);
    eventually("the second reconcile", || seen.lock().len() == 2).await?;
    assert_eq!(*seen.lock(), [true, false]);
    assert_eq!(deletes.load(Ordering::SeqCst), 1);
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_that_stays_behind_retries_the_reconcile_instead_of_running_it_stale() -> Result<()>
{
    let server = common::server().await?;
    server
        .handle()
        .create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": "app"}}),
        )
        .map_err(|e| anyhow!("{e}"))?;
    let config = manager::Config::new("ryow")
        .namespace(NS)
        .metrics_addr("127.0.0.1:0".parse()?)
        .cache_wait_timeout(Duration::from_millis(100));
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let addr = manager.metrics_addr().expect("bound");
    let faults = server.faults().clone();
    let runs = Arc::new(Mutex::new(Vec::<bool>::new()));
    manager.controller::<ConfigMap>().owns::<Secret>().build({
        let runs = Arc::clone(&runs);
        move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let (runs, faults) = (Arc::clone(&runs), faults.clone());
            async move {
                let name = cm.metadata.name.clone().unwrap_or_default();
                let present = ctx.get::<Secret>(&name).is_some();
                runs.lock().push(present);
                if !present {
                    faults.stall_watches(true);
                    ctx.apply_owned(secret(&name)).await?;
                    return Ok(Action::Requeue);
                }
                Ok::<_, api::Error>(Action::Done)
            }
        }
    })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    // The waits time out, and the reconcile is retried without running.
    metric_reaches(
        addr,
        "kcache_controller_cache_wait_timeouts_total{controller=configmaps}",
        2.0,
    )
    .await?;
    assert_eq!(*runs.lock(), [false], "never run on the stale cache");
    let m = metrics(addr).await?;
    assert!(
        sample(
            &m,
            "controller_runtime_reconcile_errors_total{controller=configmaps}"
        )? >= 2.0
    );
    server.faults().stall_watches(false);
    eventually("a reconcile on the caught-up cache", || {
        runs.lock().contains(&true)
    })
    .await?;
    assert_eq!(runs.lock()[..2], [false, true]);
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_ends_a_wait_for_the_caches() -> Result<()> {
    let server = common::server().await?;
    server
        .handle()
        .create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": "app"}}),
        )
        .map_err(|e| anyhow!("{e}"))?;
    // The wait would outlast the drain deadline: shutting down must end it.
    let config = manager::Config::new("ryow")
        .namespace(NS)
        .metrics_addr("127.0.0.1:0".parse()?)
        .cache_wait_timeout(Duration::from_secs(3600))
        .graceful_shutdown_timeout(Duration::from_secs(5));
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let addr = manager.metrics_addr().expect("bound");
    let faults = server.faults().clone();
    manager.controller::<ConfigMap>().owns::<Secret>().build(
        move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let faults = faults.clone();
            async move {
                let name = cm.metadata.name.clone().unwrap_or_default();
                if ctx.get::<Secret>(&name).is_none() {
                    faults.stall_watches(true);
                    ctx.apply_owned(secret(&name)).await?;
                }
                Ok::<_, api::Error>(Action::Requeue)
            }
        },
    )?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    metric_reaches(
        addr,
        "kcache_controller_cache_waits_total{controller=configmaps}",
        1.0,
    )
    .await?;
    cancel.cancel();
    tokio::time::timeout(HANG_GUARD, run).await???;
    server.faults().stall_watches(false);
    server.shutdown().await;
    Ok(())
}
