//! `kcache demo`: the whole pipeline on the embedded API server, through HTTP, under churn and
//! injected faults, verified at the end.
//!
//! 1. Start `kcache-apiserver` in-process on 127.0.0.1 and seed realistic pods (through its
//!    Rust handle).
//! 2. A `SharedInformerFactory` informer for pods over `kcache-client`'s HTTP lister-watcher,
//!    with a namespace index and a `spec.nodeName` index, and three handlers: one counting, one
//!    slow (a sleep per notification, coalescing buffer) and a `Controller`'s (a rate-limited
//!    work queue drained by two reconcile workers).
//! 3. A progress bar during the initial sync, then a status line while churn and faults run.
//! 4. Verification: the cache, the node index and each handler's rebuilt state equal a fresh
//!    LIST from the server.

mod churn;
mod handlers;
mod pods;
mod report;
mod verify;

use std::{
    convert::Infallible,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use k8s_openapi::api::core::v1::Pod;
use kcache::{
    InformerFrom, SharedInformerFactory,
    controller::{self, Action, Controller},
    factory,
    factory::Stored,
    informer::{self, BufferMode},
    reflector::BackoffConfig,
    workqueue::Interface as _,
};
use kcache_apiserver::ApiServer;
use kcache_client::{Client, Compact, HttpListerWatcher};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::counting::{Counting, Received};

use self::{
    churn::{ChurnConfig, ChurnReport},
    handlers::{Rebuilt, Recording},
    report::Summary,
    verify::{NODE_INDEX, Observer},
};

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// Arguments of `kcache demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Pods to seed before the informer starts.
    #[arg(long, default_value_t = 10_000)]
    pub objects: usize,
    /// Seconds of churn (and faults) after the initial sync.
    #[arg(long, default_value_t = 30)]
    pub duration: u64,
    /// Writes per second during churn (60 % updates, 20 % creates, 20 % deletes).
    #[arg(long, default_value_t = 200)]
    pub churn: u32,
    /// Inject faults during churn: dropped watches, compaction (410 → relist), 500s, 429s,
    /// truncated watch streams.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub faults: OnOff,
    /// Print one JSON object instead of the progress display and the table.
    #[arg(long)]
    pub json: bool,
    /// Serve Prometheus metrics, /healthz and /readyz on this address while the demo runs
    /// (e.g. 127.0.0.1:9090; off by default).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Test only: the counting handler drops one event, which the verification must catch.
    #[arg(long, hide = true, env = "KCACHE_DEMO_INJECT_DIVERGENCE")]
    pub inject_divergence: bool,
}

/// The slow handler's delay per notification.
const SLOW_HANDLER_DELAY: Duration = Duration::from_micros(250);

/// Runs the demo; returns its summary (check [`Summary::consistent`]).
///
/// # Errors
/// When the server cannot start, seeding fails or the verification LIST fails.
pub(crate) async fn run(args: DemoArgs) -> anyhow::Result<Summary> {
    let ui = Ui::new(args.json);
    // Bookmarks every second let the verification see the informer reach the final RV.
    // 2,000 history events (≈ 10 s of default churn) keep the server's memory down (it keeps
    // every version in its window) while a re-watch after an injected fault still usually
    // resumes instead of relisting.
    // The demo's pods are owned by ReplicaSets it does not create: with the garbage collector
    // on, they would be collected as dependents of absent owners (as kube-controller-manager
    // does), which is not what the demo checks.
    let server = ApiServer::builder()
        .bookmark_interval(Duration::from_secs(1))
        .history_events(2_000)
        .garbage_collector(false)
        .build()
        .start()
        .await
        .context("starting the embedded API server")?;
    let handle = server.handle().clone();
    for i in 0..pods::NAMESPACES {
        handle
            .create(
                "/api/v1/namespaces",
                json!({"metadata": {"name": pods::namespace(i)}}),
            )
            .map_err(|e| anyhow::anyhow!("creating namespace {}: {e}", pods::namespace(i)))?;
    }
    seed(&ui, &handle, args.objects).await?;
    let server_rss = report::rss_bytes();

    let client = Client::from_url(&server.url()).context("building the HTTP client")?;
    let received = Arc::new(Received::default());
    let factory = SharedInformerFactory::new(demo_factory_options());
    // The default lean informer (`factory.informer::<Pod>(&client)`'s lister-watcher and
    // storage: wire bytes plus parsed metadata), with a node index that decodes each pod once
    // when it is stored; the handlers and the controller read metadata only.
    let by_node = <Compact<Pod> as Stored<Pod>>::index_fn(Arc::new(|pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .into_iter()
            .collect()
    }));
    let source = |_: Option<&str>| {
        let lw = <Client as factory::Source<Pod>>::lister_watcher(&client, None);
        Counting::new(lw, Arc::clone(&received))
    };
    // The lean cache is sized by its bytes and parsed metadata.
    let informer = factory
        .informer_builder::<Compact<Pod>>(&source)
        .indexer(NODE_INDEX, move |pod: &Compact<Pod>| by_node(pod))
        .memory_sizer(kcache_client::Compact::<Pod>::heap_size)
        .build()
        .context("making the pod informer")?;
    let counting = Arc::new(Rebuilt::new(args.inject_divergence));
    let metrics_stop = tokio_util::sync::CancellationToken::new();
    let metrics_server = match args.metrics_addr {
        Some(addr) => Some(serve_metrics(addr, &informer, metrics_stop.clone()).await?),
        None => None,
    };
    let counting_reg = informer.add_event_handler(Recording {
        state: Arc::clone(&counting),
        delay: Duration::ZERO,
    })?;
    let slow = Arc::new(Rebuilt::new(false));
    let slow_reg = informer.add_event_handler_with_config(
        Recording {
            state: Arc::clone(&slow),
            delay: SLOW_HANDLER_DELAY,
        },
        informer::HandlerConfig::default().buffer(BufferMode::Coalescing),
    )?;
    let reconciled = Arc::new(Rebuilt::new(false));
    let controller = Controller::new(
        informer.clone(),
        controller::Config::default().name("demo").workers(2),
    );
    let workqueue = controller.queue().clone();
    let stop_controller = CancellationToken::new();
    let controller_task = tokio::spawn({
        let reconciled = Arc::clone(&reconciled);
        let cancel = stop_controller.clone();
        controller.run(
            move |key, pod: Option<Arc<Compact<Pod>>>| {
                let reconciled = Arc::clone(&reconciled);
                async move {
                    reconciled.set(
                        key,
                        pod.map(|p| p.metadata().resource_version.clone().unwrap_or_default()),
                    );
                    Ok::<_, Infallible>(Action::Done)
                }
            },
            cancel,
        )
    });

    // Initial sync, with a progress bar fed by what the lister-watcher received.
    let sync_start = Instant::now();
    factory.start();
    let bar = ui.bar(args.objects as u64, "initial sync");
    let synced = {
        let wait = factory.wait_for_cache_sync();
        tokio::pin!(wait);
        loop {
            tokio::select! {
                s = &mut wait => break s,
                () = tokio::time::sleep(Duration::from_millis(50)) => {
                    let total = received.announced_total.load(Ordering::Relaxed);
                    if total > 0 { bar.set_length(total); }
                    bar.set_position(received.objects.load(Ordering::Relaxed).min(bar.length().unwrap_or(u64::MAX)));
                }
            }
        }
    };
    let sync = sync_start.elapsed();
    let rss_after_sync = report::rss_bytes();
    bar.set_position(bar.length().unwrap_or(0));
    bar.finish_and_clear();
    anyhow::ensure!(
        synced.values().all(|s| *s),
        "the informer did not sync: {synced:?}"
    );
    ui.line(format!(
        "synced {} pods in {} ms over HTTP; churning {} writes/s for {} s with faults {}",
        informer.indexer().len(),
        sync.as_millis(),
        args.churn,
        args.duration,
        if args.faults == OnOff::On {
            "on"
        } else {
            "off"
        }
    ));

    // Churn and faults, with a live status line.
    let live_at_sync = counting.live.load(Ordering::Relaxed);
    let status = ui.status();
    let status_line = {
        let status = status.clone();
        let (informer, counting, slow_reg, counting_reg, workqueue) = (
            informer.clone(),
            Arc::clone(&counting),
            slow_reg.clone(),
            counting_reg.clone(),
            workqueue.clone(),
        );
        let mut last = (Instant::now(), counting.live.load(Ordering::Relaxed));
        move |report: &ChurnReport| {
            if last.0.elapsed() < Duration::from_millis(500) {
                return;
            }
            let live = counting.live.load(Ordering::Relaxed);
            let rate = (live - last.1) as f64 / last.0.elapsed().as_secs_f64();
            last = (Instant::now(), live);
            let m = informer.reflector_metrics().unwrap_or_default();
            status.set_message(format!(
                "events/s {rate:>6.0} | writes {} | relists {} | watch restarts {} | faults {} | fifo {} | workqueue {} | handler buffers: counting {}, slow {}",
                report.writes(),
                m.relists,
                m.watches.saturating_sub(1),
                report.faults_injected(),
                informer.queue_len(),
                workqueue.len(),
                counting_reg.pending(),
                slow_reg.pending(),
            ));
        }
    };
    let churn_start = Instant::now();
    let report = churn::run(
        handle.clone(),
        server.faults().clone(),
        ChurnConfig {
            ops_per_sec: args.churn,
            duration: Duration::from_secs(args.duration),
            faults: args.faults == OnOff::On,
            seeded: args.objects,
        },
        status_line,
        CancellationToken::new(),
    )
    .await;
    let churn_secs = churn_start.elapsed().as_secs_f64();
    status.finish_and_clear();

    // Verification against a fresh LIST over HTTP.
    ui.line("churn stopped; verifying the cache and the handlers against a fresh LIST".to_owned());
    let truth = verify::list_truth(&HttpListerWatcher::<Pod>::all(client.clone()))
        .await
        .context("listing pods for the verification")?;
    let observers = [
        Observer {
            name: "counting handler",
            state: Arc::clone(&counting),
            backlog: Box::new({
                let r = counting_reg.clone();
                move || r.pending()
            }),
        },
        Observer {
            name: "slow handler",
            state: Arc::clone(&slow),
            backlog: Box::new({
                let r = slow_reg.clone();
                move || r.pending()
            }),
        },
        Observer {
            name: "controller",
            state: Arc::clone(&reconciled),
            backlog: Box::new({
                let q = workqueue.clone();
                move || q.len()
            }),
        },
    ];
    let verdict = verify::settle_and_compare(&informer, &observers, &truth).await;
    let metrics = informer.reflector_metrics().unwrap_or_default();
    let memory = informer.memory().unwrap_or_default();

    stop_controller.cancel();
    metrics_stop.cancel();
    if let Some(server) = metrics_server {
        server.await.context("the metrics server task")??;
    }
    let _ = controller_task.await;
    factory.shutdown().await;
    server.shutdown().await;

    let events = counting
        .live
        .load(Ordering::Relaxed)
        .saturating_sub(live_at_sync);
    Ok(Summary {
        objects: truth.pods.len(),
        seeded: args.objects,
        events,
        events_per_sec: if churn_secs > 0.0 {
            events as f64 / churn_secs
        } else {
            0.0
        },
        sync_ms: u64::try_from(sync.as_millis()).unwrap_or(u64::MAX),
        sync_objects_per_sec: args.objects as f64 / sync.as_secs_f64().max(1e-3),
        relists: metrics.relists,
        watch_restarts: metrics.watches.saturating_sub(1),
        reflector_errors: metrics.errors,
        faults_injected: report.faults_injected(),
        faults: report.faults.clone(),
        writes: report.writes(),
        duration_secs: churn_secs,
        handled: vec![
            ("counting", counting.handled.load(Ordering::Relaxed)),
            ("slow", slow.handled.load(Ordering::Relaxed)),
            ("controller", reconciled.handled.load(Ordering::Relaxed)),
        ],
        settle_ms: u64::try_from(verdict.settle.as_millis()).unwrap_or(u64::MAX),
        peak_rss_bytes: report::peak_rss_bytes(),
        server_rss_bytes: server_rss,
        rss_after_sync_bytes: rss_after_sync,
        cache_bytes: memory.bytes as u64,
        cache_bytes_per_object: report::per_object(memory.bytes as u64, memory.objects),
        consistent: verdict.consistent && report.write_errors == 0,
        difference_count: verdict.difference_count,
        differences: verdict.differences,
    })
}

/// The factory's options: managedFields stripped before objects are stored, and a reflector
/// backoff capped at 2 s (client-go's: 800 ms doubling to 30 s, plus up to 100 % jitter, reset
/// after 2 min healthy), because the demo injects a fault every 1–3 s: with client-go's cap,
/// the backoff would keep growing through the run and the last fault could keep the informer
/// away for up to a minute.
fn demo_factory_options() -> factory::Config {
    let mut options = factory::Config::default().strip_managed_fields(true);
    options.informer.reflector.backoff =
        BackoffConfig::new(BackoffConfig::default().initial, Duration::from_secs(2))
            .reset_after(Duration::from_secs(10));
    options
}

/// Creates `n` pods through the server's Rust handle, on the blocking pool.
async fn seed(ui: &Ui, handle: &kcache_apiserver::ServerHandle, n: usize) -> anyhow::Result<()> {
    let bar = ui.bar(n as u64, "seeding pods");
    let start = Instant::now();
    let task = {
        let (handle, bar) = (handle.clone(), bar.clone());
        tokio::task::spawn_blocking(move || {
            for i in 0..n {
                let pod = pods::pod("seed", i);
                handle
                    .create(&pods::collection(&pods::namespace(i)), pod)
                    .map_err(|e| anyhow::anyhow!("seeding pod {i}: {e}"))?;
                if i.is_multiple_of(256) {
                    bar.set_position(i as u64);
                }
            }
            Ok::<_, anyhow::Error>(())
        })
    };
    task.await.context("the seeding task panicked")??;
    bar.finish_and_clear();
    ui.line(format!(
        "seeded {n} pods in {} ms",
        start.elapsed().as_millis()
    ));
    Ok(())
}

/// The progress display on stderr (hidden for `--json`; indicatif hides it when stderr is not
/// a terminal).
/// Starts `/metrics`, `/healthz` and `/readyz` on `addr` for `informer`.
async fn serve_metrics(
    addr: std::net::SocketAddr,
    informer: &kcache::SharedIndexInformer<Compact<Pod>>,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<std::io::Result<()>>> {
    let mut registry = prometheus_client::registry::Registry::default();
    let informers = kcache_metrics::InformerMetrics::new(&mut registry);
    informers.register(informer);
    let checks = kcache_metrics::Checks::new().with_informers(informers);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))?;
    eprintln!(
        "metrics on http://{}/metrics (and /healthz, /readyz)",
        listener.local_addr()?
    );
    Ok(tokio::spawn(kcache_metrics::serve(
        listener,
        std::sync::Arc::new(registry),
        checks,
        stop,
    )))
}

struct Ui {
    quiet: bool,
}

impl Ui {
    fn new(quiet: bool) -> Self {
        Self { quiet }
    }

    fn target(&self) -> ProgressDrawTarget {
        if self.quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        }
    }

    fn bar(&self, len: u64, what: &'static str) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(Some(len), self.target());
        let style = ProgressStyle::with_template(
            "{msg:>13} [{bar:32}] {pos}/{len} objects  {rate}  ETA {eta}",
        )
        .map(|s| {
            s.progress_chars("=> ").with_key(
                "rate",
                |st: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0}/s", st.per_sec());
                },
            )
        })
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_message(what);
        bar
    }

    fn status(&self) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(None, self.target());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        bar.set_message("churn starting");
        bar
    }

    /// A phase line on stderr (not with `--json`).
    fn line(&self, msg: String) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }
}
