//! A highly available controller: run several replicas, one reconciles at a time.
//!
//! Every replica watches the ConfigMaps of one namespace and keeps its cache synced (a warm
//! standby); only the replica holding the Lease reconciles. For each ConfigMap labelled
//! `kcache.dev/demo=true` the leader writes the annotation
//! `kcache.dev/reconciled-by=<identity>` with server-side apply.
//!
//! stdout carries only these lines (flushed as they happen), for scripts and tests:
//!
//! ```text
//! SYNCED <identity> <unix-ms>    the cache holds the initial list
//! LEADING <identity> <unix-ms>   this replica leads: its workers start
//! STOPPED <identity> <unix-ms>   it no longer leads: its workers have stopped taking keys
//! ```
//!
//! SIGTERM or SIGINT: the workers drain, the lease is released (so a standby takes over at
//! once), and the process exits 0. Logs go to stderr (`RUST_LOG`).
//!
//! ```text
//! cargo run -p kcache-examples --example ha_controller -- \
//!     --kubeconfig /tmp/kcache.kubeconfig --identity replica-0
//! ```
use std::{
    io::Write as _,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::Context as _;
use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    SharedIndexInformer,
    controller::{self, Action, Controller},
    informer,
    leaderelection::{Config, LeaderElector, LeaderState},
};
use kcache_client::{Client, HttpLeaseLock, HttpListerWatcher, LeaseClient};
use kube_client::{
    Api,
    api::{Patch, PatchParams},
};
use parking_lot::Mutex;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

const LABEL: &str = "kcache.dev/demo";
const ANNOTATION: &str = "kcache.dev/reconciled-by";
const FIELD_MANAGER: &str = "kcache-ha-controller";

/// Command line.
#[derive(Debug, Parser)]
#[command(about = "A leader-elected ConfigMap controller (kcache example)")]
struct Args {
    /// The kubeconfig to use (`kcache serve --write-kubeconfig PATH` writes one).
    #[arg(long)]
    kubeconfig: std::path::PathBuf,
    /// The namespace whose ConfigMaps are reconciled, and where the Lease lives.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// The Lease's name.
    #[arg(long, default_value = "kcache-ha-controller")]
    lease_name: String,
    /// This replica's identity (unique among the replicas); default `<hostname>-<pid>`.
    #[arg(long)]
    identity: Option<String>,
    /// Seconds a standby waits without seeing the lease change before taking over.
    #[arg(long, default_value_t = 15.0)]
    lease_duration: f64,
    /// Seconds the leader keeps retrying a failing renewal before stepping down.
    #[arg(long, default_value_t = 10.0)]
    renew_deadline: f64,
    /// Seconds between renewals and acquire attempts.
    #[arg(long, default_value_t = 2.0)]
    retry_period: f64,
    /// Serve Prometheus metrics (objects held per informer, reconciles, leader status),
    /// `/healthz` and `/readyz` on this address (off by default).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Prints one status line on stdout and flushes it.
fn say(what: &str, identity: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{what} {identity} {}", unix_ms());
    let _ = out.flush();
}

/// Prints LEADING / STOPPED on every transition of the elector's state (once each).
struct Reporter {
    identity: String,
    leading: Mutex<bool>,
}

impl Reporter {
    fn report(&self, state: &LeaderState) {
        let mut leading = self.leading.lock();
        if state.is_leading() != *leading {
            *leading = state.is_leading();
            say(if *leading { "LEADING" } else { "STOPPED" }, &self.identity);
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    let client = Client::from_kubeconfig(&args.kubeconfig)
        .await
        .with_context(|| format!("loading {}", args.kubeconfig.display()))?;
    let ns = args.namespace.clone();

    let mut config = Config::new(identity.clone());
    config.lease_duration = Duration::from_secs_f64(args.lease_duration);
    config.renew_deadline = Duration::from_secs_f64(args.renew_deadline);
    config.retry_period = Duration::from_secs_f64(args.retry_period);
    config.release_on_cancel = true;
    let lock = HttpLeaseLock::new(LeaseClient::new(client.clone(), &ns, &args.lease_name));
    let elector = Arc::new(LeaderElector::new(config, lock)?);

    // The informer runs on every replica, leading or not.
    let informer = SharedIndexInformer::new(
        HttpListerWatcher::<ConfigMap>::namespaced(client.clone(), &ns),
        informer::Config::default(),
    );
    let controller = Controller::new(
        informer.clone(),
        controller::Config::default()
            .name("ha-configmaps")
            .workers(2),
    );
    let stop_metrics = CancellationToken::new();
    if let Some(addr) = args.metrics_addr {
        let mut registry = prometheus_client::registry::Registry::default();
        let informers = kcache_metrics::InformerMetrics::new(&mut registry);
        informers.register(&informer);
        let controllers = kcache_metrics::ControllerMetrics::new(&mut registry);
        controllers.register_controller("ha-configmaps", 2, controller.metrics());
        let state = elector.watch();
        controllers.register_leader(args.lease_name.clone(), move || state.borrow().is_leading());
        // client-go's HealthzAdaptor: /healthz fails while this replica believes it leads but
        // has not renewed for longer than the lease duration + 20 s.
        let leader_check =
            kcache_metrics::leader_election_check(Arc::clone(&elector), Duration::from_secs(20));
        let checks = kcache_metrics::Checks::new()
            .with_informers(informers)
            .live("leaderElection", leader_check);
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!("metrics on http://{}/metrics", listener.local_addr()?);
        tokio::spawn(kcache_metrics::serve(
            listener,
            Arc::new(registry),
            checks,
            stop_metrics.clone(),
        ));
    }
    let stop_informer = CancellationToken::new();
    let informer_task = tokio::spawn({
        let (i, c) = (informer.clone(), stop_informer.clone());
        async move { i.run(c).await }
    });
    tokio::spawn({
        let (i, id) = (informer.clone(), identity.clone());
        async move {
            i.wait_for_sync().await;
            say("SYNCED", &id);
        }
    });

    let reporter = Arc::new(Reporter {
        identity: identity.clone(),
        leading: Mutex::new(false),
    });
    let mut state = elector.watch();
    tokio::spawn({
        let reporter = Arc::clone(&reporter);
        async move {
            loop {
                let current = state.borrow_and_update().clone();
                reporter.report(&current);
                if state.changed().await.is_err() {
                    return;
                }
            }
        }
    });

    let cancel = CancellationToken::new();
    tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: stopping"),
            }
            cancel.cancel();
        }
    });

    let api: Api<ConfigMap> = Api::namespaced(client.kube().clone(), &ns);
    let reconcile = {
        let identity = identity.clone();
        move |_key, cm: Option<Arc<ConfigMap>>| {
            let (api, identity) = (api.clone(), identity.clone());
            async move {
                let Some(cm) = cm else {
                    return Ok(Action::Done);
                };
                let meta = &cm.metadata;
                let labelled = meta
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL))
                    .is_some_and(|v| v == "true");
                let done = meta
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION))
                    .is_some_and(|v| *v == identity);
                if !labelled || done {
                    return Ok(Action::Done);
                }
                let name = meta.name.clone().unwrap_or_default();
                let patch = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "annotations": {ANNOTATION: identity}},
                });
                api.patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await
                .map_err(|e| format!("applying the annotation to {name}: {e}"))?;
                tracing::info!(%name, "annotated");
                Ok::<_, String>(Action::Done)
            }
        }
    };
    let result = controller
        .run_with_leader_election(&elector, reconcile, cancel)
        .await;
    // The election has ended (lease released if we held it): report the final state.
    reporter.report(&elector.watch().borrow());
    stop_informer.cancel();
    stop_metrics.cancel();
    let _ = informer_task.await;
    result?;
    Ok(())
}
