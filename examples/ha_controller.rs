//! A highly available controller on kcache-runtime's `Manager`: run several replicas, one
//! reconciles at a time.
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
use kcache_client::Client;
use kcache_runtime::{
    Action, Context, Manager, api,
    manager::{self, LeaderElection},
};
use parking_lot::Mutex;

const LABEL: &str = "kcache.dev/demo";
const ANNOTATION: &str = "kcache.dev/reconciled-by";

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
    /// This replica's identity (unique among the replicas); default `<hostname>_<uuid>`.
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
    /// Serve Prometheus metrics (every family of the manager), `/healthz` and `/readyz` on
    /// this address (off by default).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
}

/// Prints one status line on stdout and flushes it.
fn say(what: &str, identity: &str) {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{what} {identity} {ms}");
    let _ = out.flush();
}

/// Annotates a labelled ConfigMap with this replica's identity (server-side apply).
async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<ConfigMap>) -> Result<Action, api::Error> {
    let identity = ctx
        .recorder()
        .reporter()
        .instance
        .clone()
        .unwrap_or_default();
    let meta = &cm.metadata;
    let labelled = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL))
        .is_some_and(|v| v == "true");
    let done = meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION)) == Some(&identity);
    if !labelled || done {
        return Ok(Action::Done);
    }
    let mut patch = ConfigMap::default();
    patch.metadata.name = meta.name.clone();
    patch.metadata.annotations = Some([(ANNOTATION.to_owned(), identity)].into());
    ctx.api::<ConfigMap>().apply(&patch).await?;
    tracing::info!(name = ?meta.name, "annotated");
    Ok(Action::Done)
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
    let client = Client::from_kubeconfig(&args.kubeconfig)
        .await
        .with_context(|| format!("loading {}", args.kubeconfig.display()))?;
    let secs = Duration::try_from_secs_f64;
    let election = LeaderElection::new(&args.lease_name).timings(
        secs(args.lease_duration)?,
        secs(args.renew_deadline)?,
        secs(args.retry_period)?,
    );
    let mut config = manager::Config::new("kcache-ha-controller")
        .namespace(&args.namespace)
        .leader_election(election);
    if let Some(identity) = &args.identity {
        config = config.identity(identity);
    }
    if let Some(addr) = args.metrics_addr {
        config = config.metrics_addr(addr);
    }
    let manager = Manager::new(client, config)?;
    if let Some(addr) = manager.metrics_addr() {
        eprintln!("metrics on http://{addr}/metrics");
    }
    let identity = manager.identity().to_owned();
    // The informer runs on every replica, leading or not: SYNCED once its cache is.
    let informer = manager.informer::<ConfigMap>();
    let id = identity.clone();
    tokio::spawn(async move {
        informer.wait_for_sync().await;
        say("SYNCED", &id);
    });
    // LEADING / STOPPED on every transition (once each), and STOPPED when the run ends.
    let leading = Arc::new(Mutex::new(false));
    let report = move |now: bool| {
        let mut leading = leading.lock();
        if *leading != now {
            *leading = now;
            say(if now { "LEADING" } else { "STOPPED" }, &identity);
        }
    };
    let mut state = manager.leader_state().context("leader election is on")?;
    let follow = tokio::spawn({
        let report = report.clone();
        async move {
            loop {
                report(state.borrow_and_update().is_leading());
                if state.changed().await.is_err() {
                    return;
                }
            }
        }
    });
    manager
        .controller::<ConfigMap>()
        .name("ha-configmaps")
        .workers(2)
        .build(reconcile)?;
    // Until SIGTERM or SIGINT: the workers drain, the lease is released, then it returns.
    let result = manager.run().await;
    follow.abort();
    let _ = follow.await;
    report(false);
    result?;
    Ok(())
}
