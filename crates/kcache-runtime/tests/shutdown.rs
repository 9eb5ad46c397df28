//! A clean shutdown logs no warning: a reconcile waiting for the caches when the manager
//! stops is not reported as a failed reconcile. Its own test binary: it installs the
//! process's global log subscriber to read what was logged.

mod common;

use std::{
    io::Write,
    sync::{Arc, OnceLock},
    time::Duration,
};

use anyhow::{Result, anyhow};
use common::{HANG_GUARD, NS, metrics, sample};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache_client::Client;
use kcache_runtime::{Action, Context, Manager, api, manager};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Every line logged at WARN or above, by any thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn captured() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        captured
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_while_a_reconcile_waits_for_the_caches_logs_no_warning() -> Result<()> {
    let logs = captured();
    let server = common::server().await?;
    server
        .handle()
        .create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": "app"}}),
        )
        .map_err(|e| anyhow!("{e}"))?;
    let config = manager::Config::new("shutdown")
        .namespace(NS)
        .metrics_addr("127.0.0.1:0".parse()?)
        .cache_wait_timeout(Duration::from_secs(3600));
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let addr = manager.metrics_addr().expect("bound");
    let faults = server.faults().clone();
    manager.controller::<ConfigMap>().owns::<Secret>().build(
        move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let faults = faults.clone();
            async move {
                let name = cm.metadata.name.clone().unwrap_or_default();
                if ctx.get::<Secret>(&name).is_none() {
                    // The Secret's event is held back: the next reconcile waits for it.
                    faults.stall_watches(true);
                    let mut secret = Secret::default();
                    secret.metadata.name = Some(name);
                    ctx.apply_owned(secret).await?;
                }
                Ok::<_, api::Error>(Action::Requeue)
            }
        },
    )?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    let key = "kcache_controller_cache_waits_total{controller=configmaps}";
    let mut waiting = false;
    tokio::time::timeout(HANG_GUARD, async {
        while !waiting {
            waiting = metrics(addr)
                .await
                .is_ok_and(|m| sample(&m, key).is_ok_and(|v| v >= 1.0));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    cancel.cancel();
    tokio::time::timeout(HANG_GUARD, run).await???;
    server.faults().stall_watches(false);
    server.shutdown().await;
    let logged = String::from_utf8_lossy(&logs.0.lock()).into_owned();
    assert!(!logged.contains("reconcile failed"), "{logged}");
    assert!(!logged.contains("WARN"), "{logged}");
    Ok(())
}
