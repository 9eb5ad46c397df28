//! The finalizer helper on the embedded server, with a cleanup that writes the object it
//! finalizes (as kube-runtime users write one): the finalizer is removed from the newest
//! version the controller knows, so the cleanup runs once and the object goes.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};
use common::{ConflictCounter, NS, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_client::Client;
use kcache_runtime::{Action, Context, FinalizerEvent, Manager, api, manager};
use kube_core::params::Patch;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const FINALIZER: &str = "runtime.kcache.dev/cleanup";

/// How long the object is given to go: a livelocked helper never deletes it.
const WINDOW: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_that_writes_the_object_runs_once_and_the_object_goes() -> Result<()> {
    let server = common::server().await?;
    let path = format!("/api/v1/namespaces/{NS}/configmaps/app");
    server
        .handle()
        .create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": "app", "finalizers": [FINALIZER]}}),
        )
        .map_err(|e| anyhow!("{e}"))?;
    let proxy = ConflictCounter::start(server.addr()).await?;
    let config = manager::Config::new("finalizer-test").namespace(NS);
    let manager = Manager::new(Client::from_url(&proxy.url())?, config)?;
    let applies = Arc::new(AtomicUsize::new(0));
    let cleanups = Arc::new(AtomicUsize::new(0));
    manager.controller::<ConfigMap>().build({
        let (applies, cleanups) = (Arc::clone(&applies), Arc::clone(&cleanups));
        move |_cm, ctx: Context<ConfigMap>| {
            let (applies, cleanups) = (Arc::clone(&applies), Arc::clone(&cleanups));
            async move {
                let result: Result<Action, api::Error> = ctx
                    .finalizer(FINALIZER, |event| async {
                        match event {
                            FinalizerEvent::Apply(_) => {
                                applies.fetch_add(1, Ordering::SeqCst);
                                Ok(Action::Done)
                            }
                            FinalizerEvent::Cleanup(cm) => {
                                // A value that changes on every write: every cleanup moves the
                                // object's resourceVersion.
                                let n = cleanups.fetch_add(1, Ordering::SeqCst) + 1;
                                let note = json!({"metadata": {"annotations": {
                                "runtime.kcache.dev/cleaned": format!("{n}")}}});
                                let name = cm.metadata.name.clone().unwrap_or_default();
                                ctx.api::<ConfigMap>()
                                    .patch(&name, &Patch::Merge(&note))
                                    .await?;
                                Ok(Action::Done)
                            }
                        }
                    })
                    .await;
                result
            }
        }
    })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("the first reconcile", || applies.load(Ordering::SeqCst) > 0).await?;

    server.handle().delete(&path).map_err(|e| anyhow!("{e}"))?;
    let started = Instant::now();
    let gone = loop {
        match server.handle().get(&path) {
            Err(e) if e.to_string().contains("not found") => break true,
            _ if started.elapsed() > WINDOW => break false,
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    let (cleanups, conflicts) = (cleanups.load(Ordering::SeqCst), proxy.conflicts());
    eprintln!(
        "deleted: {gone} after {:?}; cleanups {cleanups}, 409 answers {conflicts}",
        started.elapsed()
    );
    assert!(
        gone,
        "still there after {WINDOW:?}: {cleanups} cleanups, {conflicts} conflicts"
    );
    assert_eq!(cleanups, 1, "the cleanup runs once ({conflicts} conflicts)");
    assert!(conflicts <= 1, "{conflicts} conflicts");
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}
