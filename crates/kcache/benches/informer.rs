//! Informer benchmark (not a test): `cargo bench -p kcache --bench informer`.
//!
//! A source that builds realistic Pods on demand (as a decoder would) feeds a
//! `SharedIndexInformer` with two indexes and three handlers. Prints medians of:
//! - time from start to synced for N objects (default 100k; `KCACHE_BENCH_N`),
//! - steady-state update events/s through FIFO → indexer → 3 handlers, and the cost per event,
//! - handler fan-out in notifications/s,
//! - peak live heap during a relist relative to the steady state (a counting global allocator
//!   gives exact live and peak bytes; RSS would hide the peak behind memory the allocator reuses),
//! - time to drop the whole cache.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ListMeta};
use kcache::{
    HandlerFns, ListerWatcher,
    informer::{self, SharedIndexInformer},
    lister_watcher::{self, ListParams, ObjectList, WatchEvent, WatchParams, WatchStream},
    reflector,
    store::{IndexFunc, namespace_indexers},
};
use kube_core::{ObjectMeta, Status, TypeMeta};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

fn pod(i: usize, rv: u64) -> Pod {
    let labels: BTreeMap<String, String> = [
        ("app".to_owned(), format!("app-{}", i % 50)),
        ("tier".to_owned(), "backend".to_owned()),
        ("pod-template-hash".to_owned(), format!("{:010x}", i * 7919)),
    ]
    .into();
    let env = (0..8)
        .map(|e| EnvVar {
            name: format!("ENV_{e}"),
            value: Some(format!("value-{e}-{i}")),
            ..EnvVar::default()
        })
        .collect::<Vec<_>>();
    let resources = ResourceRequirements {
        limits: Some(
            [
                ("cpu".to_owned(), Quantity("500m".into())),
                ("memory".to_owned(), Quantity("256Mi".into())),
            ]
            .into(),
        ),
        requests: Some(
            [
                ("cpu".to_owned(), Quantity("100m".into())),
                ("memory".to_owned(), Quantity("128Mi".into())),
            ]
            .into(),
        ),
        ..ResourceRequirements::default()
    };
    let container = |n: &str| Container {
        name: n.to_owned(),
        image: Some(format!("registry.example/{n}:1.{}", i % 10)),
        env: Some(env.clone()),
        resources: Some(resources.clone()),
        ..Container::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{i:06}")),
            namespace: Some(format!("ns-{}", i % 20)),
            uid: Some(format!("00000000-0000-0000-0000-{i:012}")),
            resource_version: Some(rv.to_string()),
            labels: Some(labels),
            annotations: Some([("kubernetes.io/description".to_owned(), "x".repeat(200))].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(format!("node-{}", i % 100)),
            containers: vec![container("app"), container("sidecar")],
            ..PodSpec::default()
        }),
        status: None,
    }
}

type EventRx = mpsc::UnboundedReceiver<Result<WatchEvent<Pod>, lister_watcher::Error>>;

/// Builds list pages on demand and forwards watch events from a channel.
#[derive(Clone)]
struct GenSource {
    n: usize,
    rv: Arc<AtomicU64>,
    watch_rx: Arc<Mutex<Option<EventRx>>>,
    lists: Arc<AtomicU64>,
    /// The resourceVersion each pod has on the "server".
    rvs: Arc<Mutex<Vec<u64>>>,
}

impl ListerWatcher<Pod> for GenSource {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, lister_watcher::Error> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        let start: usize = params
            .continue_token
            .as_deref()
            .map_or(0, |c| c.parse().unwrap());
        let limit = params.limit.map_or(self.n, |l| l as usize);
        let end = (start + limit).min(self.n);
        let rv = self.rv.load(Ordering::SeqCst);
        let rvs = self.rvs.lock().clone();
        let items = (start..end).map(|i| pod(i, rvs[i])).collect();
        let metadata = ListMeta {
            resource_version: Some(rv.to_string()),
            continue_: (end < self.n).then(|| end.to_string()),
            ..ListMeta::default()
        };
        Ok(ObjectList {
            types: TypeMeta::default(),
            metadata,
            items,
        })
    }

    async fn watch(
        &self,
        _params: &WatchParams,
        _rv: &str,
    ) -> Result<WatchStream<Pod>, lister_watcher::Error> {
        match self.watch_rx.lock().take() {
            Some(rx) => Ok(UnboundedReceiverStream::new(rx).boxed()),
            None => Ok(futures::stream::pending().boxed()),
        }
    }
}

/// Counts live heap bytes and their high-water mark, so that a relist's peak is exact (RSS
/// hides it: the allocator reuses memory freed earlier).
#[global_allocator]
static ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

fn live_kib() -> u64 {
    ALLOC.current_usage() as u64 / 1024
}

fn reset_peak() {
    ALLOC.reset_peak_usage();
}

fn peak_kib() -> u64 {
    ALLOC.peak_usage() as u64 / 1024
}

/// The process's CPU time (user + system) in seconds, from `/proc/self/stat`.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks as f64 / 100.0
}

#[allow(
    dead_code,
    reason = "kept for comparing with the process's RSS by hand"
)]
fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

struct Run {
    sync_s: f64,
    cpu_per_event_us: f64,
    drop_per_event_us: f64,
    events_per_s: f64,
    notifications_per_s: f64,
    steady_kib: u64,
    relist_peak_kib: u64,
    relist_changed_peak_kib: u64,
    baseline_kib: u64,
    drop_s: f64,
}

async fn one_run(n: usize, updates: usize) -> Run {
    let baseline_kib = live_kib();
    let (tx, rx) = mpsc::unbounded_channel();
    let src = GenSource {
        n,
        rv: Arc::new(AtomicU64::new(1)),
        watch_rx: Arc::new(Mutex::new(Some(rx))),
        lists: Arc::default(),
        rvs: Arc::new(Mutex::new(vec![1; n])),
    };
    let mut indexers = namespace_indexers::<Pod>();
    let node: IndexFunc<Pod> = Arc::new(|p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .into_iter()
            .collect()
    });
    indexers.insert("node".to_owned(), node);
    let config = informer::Config::default()
        .reflector(reflector::Config::default().initial_list(kcache::reflector::InitialList::List));
    let informer = SharedIndexInformer::builder(src.clone())
        .config(config)
        .indexers(indexers)
        .build();
    let counters: Vec<Arc<AtomicU64>> = (0..3).map(|_| Arc::new(AtomicU64::new(0))).collect();
    for c in &counters {
        let (a, u, d) = (Arc::clone(c), Arc::clone(c), Arc::clone(c));
        informer
            .add_event_handler_with_config(
                HandlerFns::new()
                    .on_add(move |_, _| {
                        a.fetch_add(1, Ordering::Relaxed);
                    })
                    .on_update(move |_, _| {
                        u.fetch_add(1, Ordering::Relaxed);
                    })
                    .on_delete(move |_| {
                        d.fetch_add(1, Ordering::Relaxed);
                    }),
                informer::HandlerConfig::default().delivery(informer::Delivery::Inline),
            )
            .unwrap();
    }
    let cancel = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    informer.wait_for_sync().await;
    let sync_s = started.elapsed().as_secs_f64();
    while counters
        .iter()
        .any(|c| c.load(Ordering::Relaxed) < n as u64)
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    // Steady state: `updates` MODIFIED events, objects built ahead of time (decode excluded).
    let events: Vec<Pod> = (0..updates).map(|i| pod(i % n, 2 + i as u64)).collect();
    {
        let mut rvs = src.rvs.lock();
        for i in 0..updates {
            rvs[i % n] = 2 + i as u64;
        }
    }
    src.rv.store(2 + updates as u64, Ordering::SeqCst);
    let t = Instant::now();
    let cpu0 = cpu_s();
    for p in events {
        tx.send(Ok(WatchEvent::Modified(p))).unwrap();
    }
    let want = (n + updates) as u64;
    while counters.iter().any(|c| c.load(Ordering::Relaxed) < want) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let dt = t.elapsed().as_secs_f64();
    let cpu_per_event_us = (cpu_s() - cpu0) * 1e6 / updates as f64;
    // Each update frees the object it replaces: measure that cost alone, to report the
    // pipeline's own cost beside the total.
    let doomed: Vec<Pod> = (0..updates).map(|i| pod(i % n, 1)).collect();
    let c = cpu_s();
    drop(doomed);
    let drop_per_event_us = (cpu_s() - c) * 1e6 / updates as f64;
    let events_per_s = updates as f64 / dt;
    let notifications_per_s = (3 * updates) as f64 / dt;

    // Relist after a 410 (an ERROR event ends the watch; the reflector lists all n again):
    // first with every object unchanged, then with every object changed on the server.
    let steady_kib = live_kib();
    let mut tx = tx;
    let relist_peak_kib = relist(&src, &informer, &mut tx, false).await;
    let relist_changed_peak_kib = relist(&src, &informer, &mut tx, true).await;
    cancel.cancel();
    task.await.unwrap();
    let t = Instant::now();
    drop(informer);
    let drop_s = t.elapsed().as_secs_f64();
    Run {
        sync_s,
        cpu_per_event_us,
        drop_per_event_us,
        events_per_s,
        notifications_per_s,
        steady_kib,
        relist_peak_kib,
        relist_changed_peak_kib,
        baseline_kib,
        drop_s,
    }
}

type Tx = mpsc::UnboundedSender<Result<WatchEvent<Pod>, lister_watcher::Error>>;

/// Forces a relist and returns the peak RSS (KiB) while it ran. With `changed`, every object
/// gets a new resourceVersion on the server first.
async fn relist(
    src: &GenSource,
    informer: &SharedIndexInformer<Pod>,
    tx: &mut Tx,
    changed: bool,
) -> u64 {
    let target_rv = if changed {
        let rv = src.rv.fetch_add(1, Ordering::SeqCst) + 1;
        src.rvs.lock().iter_mut().for_each(|r| *r = rv);
        Some(rv.to_string())
    } else {
        None
    };
    reset_peak();
    let lists_before = src.lists.load(Ordering::SeqCst);
    let syncs_before = informer.reflector_metrics().map_or(0, |m| m.lists);
    let status: Status = serde_json::from_value(serde_json::json!({"status":"Failure","message":"too old resource version","reason":"Expired","code":410})).unwrap();
    // The reflector re-watches with a fresh stream after the relist: hand it a new channel.
    let (new_tx, new_rx) = mpsc::unbounded_channel();
    *src.watch_rx.lock() = Some(new_rx);
    tx.send(Ok(WatchEvent::Error(Box::new(status)))).unwrap();
    *tx = new_tx;
    while src.lists.load(Ordering::SeqCst) == lists_before {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let last = format!("ns-{}/pod-{:06}", (src.n - 1) % 20, src.n - 1);
    loop {
        let done = match &target_rv {
            Some(rv) => {
                informer
                    .indexer()
                    .get_by_key(last.as_str())
                    .and_then(|p| p.metadata.resource_version.clone())
                    .as_ref()
                    == Some(rv)
            }
            None => {
                informer
                    .reflector_metrics()
                    .is_some_and(|m| m.lists > syncs_before)
                    && informer.queue_len() == 0
            }
        };
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    peak_kib()
}

fn main() {
    let n: usize = std::env::var("KCACHE_BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let runs: usize = std::env::var("KCACHE_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for the list of benchmarks
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut all = Vec::new();
    for _ in 0..runs {
        all.push(rt.block_on(one_run(n, n)));
    }
    let m = |f: &dyn Fn(&Run) -> f64| median(all.iter().map(f).collect());
    let steady = m(&|r| (r.steady_kib - r.baseline_kib) as f64);
    let peak = m(&|r| (r.relist_peak_kib.saturating_sub(r.baseline_kib)) as f64);
    let peak_changed = m(&|r| (r.relist_changed_peak_kib.saturating_sub(r.baseline_kib)) as f64);
    println!("informer bench: n = {n}, runs = {runs} (medians)");
    println!(
        "  sync {n} pods (list in pages of 500, 2 indexes, 3 handlers): {:.3} s",
        m(&|r| r.sync_s)
    );
    println!(
        "  steady updates through FIFO → indexer → 3 handlers: {:.0} events/s ({:.2} µs/event)",
        m(&|r| r.events_per_s),
        1e6 / m(&|r| r.events_per_s)
    );
    println!(
        "  CPU per update event (whole process, user+sys): {:.2} µs; for scale, freeing one such Pod alone: {:.2} µs",
        m(&|r| r.cpu_per_event_us),
        m(&|r| r.drop_per_event_us),
    );
    println!(
        "  handler fan-out: {:.0} notifications/s",
        m(&|r| r.notifications_per_s)
    );
    println!(
        "  live heap above baseline: steady {:.1} MiB ({:.1} KiB/pod)",
        steady / 1024.0,
        steady / n as f64
    );
    println!(
        "  relist, objects unchanged: peak {:.1} MiB = {:.2}x steady",
        peak / 1024.0,
        peak / steady
    );
    println!(
        "  relist, every object changed: peak {:.1} MiB = {:.2}x steady",
        peak_changed / 1024.0,
        peak_changed / steady
    );
    println!("  drop the {n}-object cache: {:.3} s", m(&|r| r.drop_s));
}
