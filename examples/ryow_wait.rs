//! How long reconciles wait to read their own writes, under a steady write rate.
//!
//! A Manager runs one controller of ConfigMaps that owns Secrets. Each reconcile of
//! ConfigMap `app-N` takes a slot of a shared pacer (`--rate` writes per second in all),
//! applies its Secret `app-N` with new data, and asks to run again at once
//! (`Action::Requeue`). So every next reconcile of the key comes right after its write, when
//! the Secrets' cache has usually not shown it yet: it waits (read-your-own-writes) until the
//! cache does. After `--duration` the program reads the manager's own `/metrics` and prints
//! the write rate reached, how many reconciles waited, and the median and p99 of the wait
//! from the `kcache_controller_cache_wait_seconds` histogram (interpolated in its bucket, as
//! PromQL's `histogram_quantile`; the bucket's bounds are printed too).
//!
//! ```text
//! cargo run --release -p kcache-examples --example ryow_wait                 # embedded server
//! cargo run --release -p kcache-examples --example ryow_wait -- --kubeconfig K  # a cluster
//! ```
use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache_client::Client;
use kcache_runtime::{Action, Context, Manager, api, manager};
use kube_client::{Api, api::PostParams};
use tokio::{sync::Mutex, time::MissedTickBehavior};
use tokio_util::sync::CancellationToken;

const CONTROLLER: &str = "configmaps";

/// Command line.
#[derive(Debug, Parser)]
#[command(about = "Read-your-own-writes waits under a steady write rate (kcache example)")]
struct Args {
    /// A cluster's kubeconfig; default: an embedded API server in this process.
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// The namespace the ConfigMaps and Secrets are written in (created if missing).
    #[arg(long, default_value = "ryow-bench")]
    namespace: String,
    /// Writes per second, over all keys.
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// Seconds of writing.
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// ConfigMaps reconciled (each writes its own Secret).
    #[arg(long, default_value_t = 16)]
    keys: usize,
    /// Reconcile workers: at least `--keys`, so that a key's next reconcile starts as soon
    /// as its write returns (with fewer, it queues behind the others and the cache has long
    /// caught up).
    #[arg(long, default_value_t = 16)]
    workers: usize,
}

/// The quantile `q` of a cumulative histogram `(upper bound, count)` (ascending bounds), by
/// linear interpolation inside its bucket, with the bucket's bounds.
fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<(f64, f64, f64)> {
    let total = buckets.last()?.1;
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank && total > 0.0 {
            if le.is_infinite() {
                return Some((lower.0, lower.0, le));
            }
            let share = (rank - lower.1) / (count - lower.1).max(f64::MIN_POSITIVE);
            return Some((lower.0 + (le - lower.0) * share, lower.0, le));
        }
        lower = (le, count);
    }
    None
}

/// The manager's `/metrics` text.
async fn scrape(addr: std::net::SocketAddr) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .await?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).await?;
    Ok(raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}

/// The controller's cumulative wait histogram: `(upper bound, count)`, ascending.
fn buckets(text: &str) -> Vec<(f64, f64)> {
    let label = format!("controller=\"{CONTROLLER}\"");
    text.lines()
        .filter(|l| {
            l.starts_with("kcache_controller_cache_wait_seconds_bucket{") && l.contains(&label)
        })
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect()
}

/// The value of the sample named `name` with this controller's label.
fn value(text: &str, name: &str) -> f64 {
    let prefix = format!("{name}{{controller=\"{CONTROLLER}\"");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let embedded = match &args.kubeconfig {
        Some(_) => None,
        None => Some(
            kcache_apiserver::ApiServer::builder()
                .build()
                .start()
                .await?,
        ),
    };
    let client = match (&args.kubeconfig, &embedded) {
        (Some(path), _) => Client::from_kubeconfig(path).await?,
        (None, Some(server)) => Client::from_url(&server.url())?,
        (None, None) => bail!("no server"),
    };
    let ns = args.namespace.clone();
    let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.kube().clone());
    if let Err(e) = namespaces.create(&PostParams::default(), &namespace).await {
        eprintln!("namespace {ns}: {e} (using it as it is)");
    }
    let configmaps = Api::<ConfigMap>::namespaced(client.kube().clone(), &ns);
    for i in 0..args.keys {
        let cm =
            serde_json::from_value(serde_json::json!({"metadata": {"name": format!("app-{i}")}}))?;
        if let Err(e) = configmaps.create(&PostParams::default(), &cm).await {
            eprintln!("app-{i}: {e} (using it as it is)");
        }
    }

    let config = manager::Config::new("ryow-bench")
        .namespace(ns)
        .metrics_addr("127.0.0.1:0".parse()?);
    let manager = Manager::new(client, config)?;
    let addr = manager.metrics_addr().context("metrics bound")?;
    let mut pacer = tokio::time::interval(Duration::from_secs(1) / args.rate.max(1));
    pacer.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let pacer = Arc::new(Mutex::new(pacer));
    let writes = Arc::new(AtomicU64::new(0));
    let stop = CancellationToken::new();
    let (pace, seq, writing) = (Arc::clone(&pacer), Arc::clone(&writes), stop.clone());
    manager
        .controller::<ConfigMap>()
        .name(CONTROLLER)
        .owns::<Secret>()
        .workers(args.workers)
        .build(move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let (pace, seq, writing) = (Arc::clone(&pace), Arc::clone(&seq), writing.clone());
            async move {
                if writing.is_cancelled() {
                    return Ok::<_, api::Error>(Action::Done);
                }
                pace.lock().await.tick().await;
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let mut secret = Secret::default();
                secret.metadata.name = cm.metadata.name.clone();
                secret.string_data = Some([("n".to_owned(), n.to_string())].into());
                ctx.apply_owned(secret).await?;
                Ok(Action::Requeue)
            }
        })?;
    let run = tokio::spawn(manager.run_until(stop.clone()));

    // Writing starts once the caches are synced.
    let start = Instant::now();
    while writes.load(Ordering::Relaxed) == 0 {
        if start.elapsed() > Duration::from_secs(60) {
            bail!("no write after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (from, began) = (writes.load(Ordering::Relaxed), Instant::now());
    let before = scrape(addr).await?;
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    let after = scrape(addr).await?;
    let (to, elapsed) = (writes.load(Ordering::Relaxed), began.elapsed());
    stop.cancel();
    run.await??;
    if let Some(server) = embedded {
        server.shutdown().await;
    }

    let delta = |name: &str| value(&after, name) - value(&before, name);
    let (early, late) = (buckets(&before), buckets(&after));
    let buckets: Vec<(f64, f64)> = late
        .iter()
        .map(|&(le, n)| {
            (
                le,
                n - early.iter().find(|b| b.0 == le).map_or(0.0, |b| b.1),
            )
        })
        .collect();
    let rate = (to - from) as f64 / elapsed.as_secs_f64();
    println!(
        "writes: {} in {elapsed:.1?} = {rate:.0}/s (target {}/s), {} keys, {} workers",
        to - from,
        args.rate,
        args.keys,
        args.workers
    );
    println!(
        "reconciles: {}, of which waited for the cache: {}, timed out: {}",
        delta("controller_runtime_reconcile_total"),
        delta("kcache_controller_cache_waits_total"),
        delta("kcache_controller_cache_wait_timeouts_total")
    );
    // Over every reconcile after a write (one that found its write cached waited 0), and
    // over those that waited.
    let (all, waited) = (
        delta("controller_runtime_reconcile_total"),
        delta("kcache_controller_cache_waits_total"),
    );
    for (label, q) in [("median", 0.5), ("p99", 0.99)] {
        let rank = q * all;
        let over_all = if rank <= all - waited {
            "0 ms".to_owned()
        } else {
            quantile(&buckets, (rank - (all - waited)) / waited)
                .map_or("?".to_owned(), |(v, _, _)| format!("{:.2} ms", v * 1e3))
        };
        let of_waits = quantile(&buckets, q).map_or("none waited".to_owned(), |(v, lo, hi)| {
            format!(
                "{:.2} ms (bucket {:.1}..{:.1} ms)",
                v * 1e3,
                lo * 1e3,
                hi * 1e3
            )
        });
        println!("wait {label}: {over_all} over all reconciles; {of_waits} over those that waited");
    }
    Ok(())
}
