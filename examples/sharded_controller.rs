//! A sharded controller: run several replicas, each reconciles (and caches) its own shards.
//!
//! The ConfigMaps of one namespace are cut into `--shards N` shards by the FNV-1a hash of
//! their uid. The replicas share the shards through one Lease per shard (and one membership
//! Lease each): each takes ⌈N / replicas⌉, hands shards over when a replica joins, takes over
//! those of a replica that died. Each replica's informer lists and watches only its shards
//! (KEP-5866 `shardSelector`, with the client-side filter when the server's
//! `ShardedListAndWatch` gate is off). For each ConfigMap labelled `kcache.dev/demo=true` the
//! replica holding its shard writes the annotation `kcache.dev/reconciled-by=<identity>` with
//! server-side apply — the `ha_controller` example's work, spread over replicas.
//!
//! stdout carries only these lines (flushed as they happen), for scripts and tests:
//!
//! ```text
//! SYNCED <identity> <unix-ms>                      the cache holds the initial list
//! SHARDS <identity> <unix-ms> <n,n,…|->            the shards open here changed
//! RECONCILE <identity> <start-ms> <end-ms> <key>   one reconcile of an existing ConfigMap
//! OBJECTS <identity> <unix-ms> <count>             the cache's size changed (checked each second)
//! FINAL <identity> <unix-ms> <n,n,…|-> <count> <digest> <lists-applied> <lists-ignored> <list-bytes>
//! ```
//!
//! `FINAL` is printed on SIGTERM/SIGINT, before the shards are handed back: the open shards,
//! the cache's size and an order-free digest of its keys (XOR of their FNV-1a hashes, hex),
//! how many list answers the server filtered (echoed `shardInfo`) and ignored, and the list
//! bytes received. Then the workers drain, the shard Leases are released and the process exits
//! 0. Logs go to stderr (`RUST_LOG`).
//!
//! ```text
//! cargo run -p kcache-examples --example sharded_controller -- \
//!     --kubeconfig /tmp/kcache.kubeconfig --identity replica-0 --shards 12
//! ```
use std::{
    collections::BTreeSet,
    io::Write as _,
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::Context as _;
use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    SharedIndexInformer,
    controller::{self, Action, Controller},
    informer,
    sharding::{self, ShardManager, fnv1a64},
};
use kcache_client::{Client, HttpListerWatcher, HttpShardLeases};
use kube_client::{
    Api,
    api::{Patch, PatchParams},
};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

const LABEL: &str = "kcache.dev/demo";
const ANNOTATION: &str = "kcache.dev/reconciled-by";
const FIELD_MANAGER: &str = "kcache-sharded-controller";

/// Command line.
#[derive(Debug, Parser)]
#[command(about = "A sharded ConfigMap controller (kcache example)")]
struct Args {
    /// The kubeconfig to use (`kcache serve --write-kubeconfig PATH` writes one).
    #[arg(long)]
    kubeconfig: std::path::PathBuf,
    /// The namespace whose ConfigMaps are reconciled, and where the Leases live.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// The shard group's name: its Leases are `<name>-shard-<i>` and `<name>-member-<id>`.
    #[arg(long, default_value = "kcache-sharded-controller")]
    lease_name: String,
    /// This replica's identity (unique among the replicas; a DNS label); default
    /// `<hostname>-<pid>`.
    #[arg(long)]
    identity: Option<String>,
    /// The number of shards (the same on every replica).
    #[arg(long, default_value_t = 12)]
    shards: u32,
    /// Seconds a shard Lease stays valid without being seen renewed.
    #[arg(long, default_value_t = 15.0)]
    lease_duration: f64,
    /// Seconds a replica keeps reconciling a shard whose Lease it cannot renew.
    #[arg(long, default_value_t = 10.0)]
    renew_deadline: f64,
    /// Seconds between Lease rounds.
    #[arg(long, default_value_t = 2.0)]
    retry_period: f64,
    /// Sync with LIST + WATCH instead of streaming lists (`sendInitialEvents`), so that list
    /// answers (and the server's `shardInfo` echo) can be observed.
    #[arg(long)]
    list_watch: bool,
    /// Serve Prometheus metrics (objects held per informer, reconciles), `/healthz` and
    /// `/readyz` on this address (off by default).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Prints one status line on stdout and flushes it.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn shard_list(shards: &BTreeSet<u32>) -> String {
    if shards.is_empty() {
        return "-".to_owned();
    }
    shards
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
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
        format!("{}-{}", host.trim().to_lowercase(), std::process::id())
    });
    let client = Client::from_kubeconfig(&args.kubeconfig)
        .await
        .with_context(|| format!("loading {}", args.kubeconfig.display()))?;
    let ns = args.namespace.clone();

    let config = sharding::Config::new(args.lease_name.clone(), identity.clone())
        .shards(args.shards)
        .lease_duration(Duration::from_secs_f64(args.lease_duration))
        .renew_deadline(Duration::from_secs_f64(args.renew_deadline))
        .retry_period(Duration::from_secs_f64(args.retry_period));
    let leases = HttpShardLeases::new(client.clone(), &ns, &args.lease_name);
    let manager = ShardManager::new(config, leases)?;

    // The informer holds only this replica's shards.
    let lw = HttpListerWatcher::<ConfigMap>::namespaced(client.clone(), &ns)
        .shards(manager.selection().clone());
    let wire = lw.wire_stats();
    let mut informer_config = informer::Config::default();
    informer_config.reflector = informer_config.reflector.initial_list(if args.list_watch {
        kcache::reflector::InitialList::List
    } else {
        kcache::reflector::InitialList::Stream
    });
    let informer = SharedIndexInformer::new(lw, informer_config);
    let controller = Controller::new(
        informer.clone(),
        controller::Config::default()
            .name("sharded-configmaps")
            .workers(2)
            // Below lease duration − renew deadline (by one retry period, for a loaded
            // machine's timers): a replica cut off from the API server stops its reconciles
            // before another one may take its shards over.
            .reconcile_timeout(
                Duration::from_secs_f64(
                    (args.lease_duration - args.renew_deadline - args.retry_period).max(0.1),
                )
                .min(Duration::from_secs(5)),
            ),
    );
    let stop_side_tasks = CancellationToken::new();
    if let Some(addr) = args.metrics_addr {
        let mut registry = prometheus_client::registry::Registry::default();
        let informers = kcache_metrics::InformerMetrics::new(&mut registry);
        informers.register(&informer);
        let controllers = kcache_metrics::ControllerMetrics::new(&mut registry);
        controllers.register_controller("sharded-configmaps", 2, controller.metrics());
        let checks = kcache_metrics::Checks::new().with_informers(informers);
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!("metrics on http://{}/metrics", listener.local_addr()?);
        tokio::spawn(kcache_metrics::serve(
            listener,
            Arc::new(registry),
            checks,
            stop_side_tasks.clone(),
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
            say(&format!("SYNCED {id} {}", unix_ms()));
        }
    });
    // SHARDS on every change of the open shards.
    tokio::spawn({
        let (mut open, id) = (manager.watch(), identity.clone());
        async move {
            loop {
                let now = open.borrow_and_update().clone();
                say(&format!("SHARDS {id} {} {}", unix_ms(), shard_list(&now)));
                if open.changed().await.is_err() {
                    return;
                }
            }
        }
    });
    // OBJECTS when the cache's size changed.
    tokio::spawn({
        let (i, id, stop) = (informer.clone(), identity.clone(), stop_side_tasks.clone());
        async move {
            let mut last = usize::MAX;
            loop {
                let n = i.indexer().len();
                if n != last {
                    say(&format!("OBJECTS {id} {} {n}", unix_ms()));
                    last = n;
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    });

    let cancel = CancellationToken::new();
    tokio::spawn({
        let (cancel, informer, gate, id) = (
            cancel.clone(),
            informer.clone(),
            manager.gate().clone(),
            identity.clone(),
        );
        let selection = manager.selection().clone();
        async move {
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: stopping"),
            }
            let keys = informer.indexer().list_keys();
            let digest = keys
                .iter()
                .fold(0u64, |d, k| d ^ fnv1a64(k.as_str().as_bytes()));
            say(&format!(
                "FINAL {id} {} {} {} {digest:016x} {} {} {}",
                unix_ms(),
                shard_list(&gate.active()),
                keys.len(),
                selection.lists_applied(),
                selection.lists_ignored(),
                wire.list_bytes(),
            ));
            cancel.cancel();
        }
    });

    let api: Api<ConfigMap> = Api::namespaced(client.kube().clone(), &ns);
    let reconcile = {
        let identity = identity.clone();
        move |key: kcache::store::ObjectKey, cm: Option<Arc<ConfigMap>>| {
            let (api, identity) = (api.clone(), identity.clone());
            async move {
                let Some(cm) = cm else {
                    return Ok(Action::Done);
                };
                let (start_ms, start) = (unix_ms(), Instant::now());
                let result = annotate(&api, &cm, &identity).await;
                // The end is taken from the start's clock reading plus the elapsed monotonic
                // time, so that the interval never runs backwards.
                let end_ms = start_ms + start.elapsed().as_millis();
                say(&format!("RECONCILE {identity} {start_ms} {end_ms} {key}"));
                result.map(|()| Action::Done)
            }
        }
    };
    let result = controller.run_sharded(&manager, reconcile, cancel).await;
    stop_informer.cancel();
    stop_side_tasks.cancel();
    let _ = informer_task.await;
    result?;
    Ok(())
}

/// Writes the annotation when the ConfigMap is labelled and does not carry it yet.
async fn annotate(api: &Api<ConfigMap>, cm: &ConfigMap, identity: &str) -> Result<(), String> {
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
        .is_some_and(|v| v == identity);
    if !labelled || done {
        return Ok(());
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
    tracing::debug!(%name, "annotated");
    Ok(())
}
