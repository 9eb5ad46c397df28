//! The Rust peers of `kcache bench-operator`: the Team operator on kcache-runtime
//! (`--runtime kcache`, its Manager with its default lean caches) or on kube-runtime 5
//! (`--runtime kube-rs`), the same logic as `harness/controller-runtime-peer`.
//!
//! A `Team` (CRD `teams.bench.kcache.io`, namespaced, spec `{members}`) owns one ConfigMap of
//! its name holding `pods: "<count>"`, the number of Pods of its namespace. Pods are watched
//! cluster-wide and each Pod event maps to the Teams of its namespace; a reconcile counts the
//! namespace's Pods from the cache (an index by namespace) and applies the ConfigMap
//! (server-side apply) only when the count changed.
//!
//! It prints one JSON line on stdout (the fields of `harness/controller-runtime-peer`):
//! `full_reconcile_ms` from the start until every Team's ConfigMap holds its namespace's count
//! (namespace k of `--namespaces M` holds `n / M` Pods, plus one for k below `n mod M`), CPU and
//! memory then; with `--updates U` it creates `--ready-file` and waits for U Pod update events
//! and for the reconciles they cause to end (1 s without one); the update window runs from the
//! first update event to the last reconcile. Requests are counted on the HTTP client (kcache's
//! response observer; a tower layer on kube's client), and `watches_update` the watches among
//! the update phase's requests. Exit 1 on a timeout.

mod kcache_rt;
mod kube_rt;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_bench::{metrics, peer::parse_duration};
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The label on the ConfigMaps the operator writes (the ConfigMap caches select it).
pub(crate) const TEAM_LABEL: &str = "bench.kcache.io/team";
/// The field manager of the operator's applies.
pub(crate) const FIELD_MANAGER: &str = "team-operator";

/// A team: its ConfigMap counts the Pods of its namespace.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[kube(
    group = "bench.kcache.io",
    version = "v1",
    kind = "Team",
    namespaced,
    schema = "disabled"
)]
pub(crate) struct TeamSpec {
    pub(crate) members: i64,
}

/// Which runtime runs the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Runtime {
    /// kcache-runtime's Manager.
    Kcache,
    /// kube-runtime's Controller.
    KubeRs,
}

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "operator-peer", about)]
pub(crate) struct Args {
    /// Which runtime runs the operator.
    #[arg(long, value_enum)]
    runtime: Runtime,
    /// Kubeconfig of the server.
    #[arg(long)]
    pub(crate) kubeconfig: PathBuf,
    /// Namespace prefix: the Teams and Pods are in PREFIX-0 .. PREFIX-(M-1).
    #[arg(long, default_value = "op-bench")]
    namespace: String,
    /// The number of namespaces M.
    #[arg(long, default_value_t = 100)]
    namespaces: usize,
    /// The number of Pods, over all namespaces.
    #[arg(long)]
    n: usize,
    /// The number of Teams.
    #[arg(long)]
    teams: usize,
    /// After the full reconcile, wait for this many Pod update events.
    #[arg(long, default_value_t = 0)]
    updates: u64,
    /// Created after the full reconcile (the driver then sends the updates).
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Give up after this long, e.g. `300s` or `5m`.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    timeout: Duration,
    /// Concurrent reconciles.
    #[arg(long, default_value_t = 2)]
    pub(crate) workers: usize,
}

/// What the reconciles and the Pod mapping report, shared with the measuring loop.
#[derive(Debug)]
pub(crate) struct Tracker {
    base: Instant,
    expected: HashMap<String, usize>,
    seen: parking_lot::Mutex<(HashMap<String, usize>, usize)>,
    reconciles: AtomicU64,
    last_reconcile_ns: AtomicU64,
    events: AtomicU64,
    first_event_ns: AtomicU64,
    ready: AtomicBool,
    /// Requests sent to the server.
    pub(crate) requests: Arc<AtomicU64>,
    /// The watch requests among them.
    pub(crate) watches: Arc<AtomicU64>,
}

impl Tracker {
    fn new(args: &Args) -> Self {
        let expected = (0..args.namespaces)
            .map(|k| {
                let extra = usize::from(k < args.n % args.namespaces);
                (
                    format!("{}-{k}", args.namespace),
                    args.n / args.namespaces + extra,
                )
            })
            .collect();
        Self {
            base: Instant::now(),
            expected,
            seen: parking_lot::Mutex::default(),
            reconciles: AtomicU64::new(0),
            last_reconcile_ns: AtomicU64::new(0),
            events: AtomicU64::new(0),
            first_event_ns: AtomicU64::new(0),
            ready: AtomicBool::new(false),
            requests: Arc::default(),
            watches: Arc::default(),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A reconcile of Team `namespace/name` left its ConfigMap holding `count`.
    pub(crate) fn record(&self, namespace: &str, name: &str, count: usize) {
        let want = self.expected.get(namespace).copied();
        let mut seen = self.seen.lock();
        let (teams, correct) = &mut *seen;
        if let Some(old) = teams.insert(format!("{namespace}/{name}"), count)
            && Some(old) == want
        {
            *correct -= 1;
        }
        if Some(count) == want {
            *correct += 1;
        }
        drop(seen);
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        self.last_reconcile_ns
            .store(self.now_ns(), Ordering::Relaxed);
    }

    /// A Pod event reached the mapping to Teams.
    pub(crate) fn pod_event(&self) {
        if self.ready.load(Ordering::Relaxed) && self.events.fetch_add(1, Ordering::Relaxed) == 0 {
            self.first_event_ns.store(self.now_ns(), Ordering::Relaxed);
        }
    }

    fn correct(&self) -> usize {
        self.seen.lock().1
    }
}

/// The ConfigMap of Team `name` holding `count` (namespace and owner reference are added by
/// each runtime).
pub(crate) fn config_map(name: &str, count: usize) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {TEAM_LABEL: name}},
        "data": {"pods": count.to_string()},
    }))
    .expect("a valid ConfigMap")
}

/// Whether a request is a watch (`watch=true` in its query), as client-go's and kube-rs's
/// counting layers see requests.
pub(crate) fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    })
}

/// Whether a response is a watch stream (kube-apiserver's `;stream=watch` content type), as
/// kcache-client's response observer sees responses.
pub(crate) fn is_watch_response(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("stream=watch"))
}

/// The count a ConfigMap holds.
pub(crate) fn held(cm: Option<&ConfigMap>) -> Option<&str> {
    cm?.data.as_ref()?.get("pods").map(String::as_str)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let tracker = Arc::new(Tracker::new(&args));
    let start = Instant::now();
    let cpu0 = metrics::cpu_time();
    let deadline = tokio::time::Instant::now() + args.timeout;
    let (name, version, operator) = match args.runtime {
        Runtime::Kcache => (
            "kcache-runtime",
            env!("CARGO_PKG_VERSION"),
            tokio::spawn(kcache_rt::run(
                args.kubeconfig.clone(),
                args.workers,
                tracker.clone(),
            )),
        ),
        Runtime::KubeRs => (
            "kube-runtime",
            "5",
            tokio::spawn(kube_rt::run(
                args.kubeconfig.clone(),
                args.workers,
                tracker.clone(),
            )),
        ),
    };
    let tick = Duration::from_millis(10);
    while tracker.correct() < args.teams {
        if operator.is_finished() {
            bail!("the operator stopped: {:?}", operator.await?);
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "timeout: {} of {} Teams reconciled with the right count",
                tracker.correct(),
                args.teams
            );
        }
        tokio::time::sleep(tick).await;
    }
    let wall = start.elapsed();
    let cpu1 = metrics::cpu_time();
    let mem = metrics::memory()?;
    let requests_sync = tracker.requests.load(Ordering::Relaxed);
    let reconciles_sync = tracker.reconciles.load(Ordering::Relaxed);
    let watches_sync = tracker.watches.load(Ordering::Relaxed);
    let mut line = json!({
        "peer": name, "version": version, "n": args.n, "teams": args.teams,
        "namespaces": args.namespaces, "full_reconcile_ms": wall.as_secs_f64() * 1e3,
        "sync_cpu_s": (cpu1 - cpu0).as_secs_f64(), "rss_after_sync_bytes": mem.rss_bytes,
        "vmhwm_bytes": mem.hwm_bytes, "requests_sync": requests_sync,
        "reconciles_sync": reconciles_sync, "updates": args.updates,
    });
    tracker.ready.store(true, Ordering::Relaxed);
    if let Some(path) = &args.ready_file {
        std::fs::write(path, b"").with_context(|| format!("writing {}", path.display()))?;
    }
    if args.updates > 0 {
        loop {
            if operator.is_finished() {
                bail!("the operator stopped: {:?}", operator.await?);
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "timeout: {} of {} update events",
                    tracker.events.load(Ordering::Relaxed),
                    args.updates
                );
            }
            tokio::time::sleep(tick).await;
            let idle = tracker
                .now_ns()
                .saturating_sub(tracker.last_reconcile_ns.load(Ordering::Relaxed));
            if tracker.events.load(Ordering::Relaxed) >= args.updates && idle > 1_000_000_000 {
                break;
            }
        }
        let cpu = metrics::cpu_time() - cpu1;
        let window_ns = tracker
            .last_reconcile_ns
            .load(Ordering::Relaxed)
            .saturating_sub(tracker.first_event_ns.load(Ordering::Relaxed));
        let window = Duration::from_nanos(window_ns).as_secs_f64();
        let reconciles = tracker.reconciles.load(Ordering::Relaxed) - reconciles_sync;
        let extra = json!({
            "update_events": tracker.events.load(Ordering::Relaxed),
            "update_s": window, "update_cpu_s": cpu.as_secs_f64(),
            "cpu_per_update_us": cpu.as_secs_f64() / args.updates as f64 * 1e6,
            "reconciles_update": reconciles,
            "reconciles_per_s": (window > 0.0).then(|| reconciles as f64 / window),
            "requests_update": tracker.requests.load(Ordering::Relaxed) - requests_sync,
            "watches_update": tracker.watches.load(Ordering::Relaxed) - watches_sync,
        });
        if let (Some(line), serde_json::Value::Object(extra)) = (line.as_object_mut(), extra) {
            line.extend(extra);
        }
    }
    line["vmhwm_end_bytes"] = metrics::memory()?.hwm_bytes.into();
    println!("{line}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_told_from_other_requests_and_responses() {
        let watch: http::Uri = "/api/v1/pods?allowWatchBookmarks=true&watch=true"
            .parse()
            .unwrap();
        let list: http::Uri = "/api/v1/pods?limit=500&resourceVersion=0".parse().unwrap();
        let named: http::Uri = "/api/v1/namespaces/watch=true/pods".parse().unwrap();
        assert!(is_watch(&watch));
        assert!(!is_watch(&list));
        assert!(!is_watch(&named));
        let mut headers = http::HeaderMap::new();
        assert!(!is_watch_response(&headers));
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/vnd.kubernetes.protobuf;stream=watch"
                .parse()
                .unwrap(),
        );
        assert!(is_watch_response(&headers));
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/json".parse().unwrap(),
        );
        assert!(!is_watch_response(&headers));
    }
}
