//! kcache peer of `kcache bench`: a kcache [`SharedIndexInformer`]
//! (through [`SharedInformerFactory`]) of the pods of one namespace (or, with
//! `--dataset widgets`, the `Widget` custom resources: storages `typed`, `default` and
//! `limit`, JSON only), fed by kcache-client's [`HttpListerWatcher`].
//!
//! It prints one JSON line on stdout with the fields and the measuring windows of
//! `harness/client-go-peer`, plus `storage` (how objects are kept) and the reflector's request
//! counters. Sync is from the factory's start to `wait_for_cache_sync` with `--n` pods cached;
//! with `--updates N` it then creates `--ready-file` and times the first to the N-th update
//! notification of an event handler. Exit 1 (reason on stderr) on a timeout, a wrong pod
//! count, or a mode the reflector did not use.
//!
//! The wire format: JSON unless `--protobuf` (then protobuf for the storages whose decoder
//! takes it, see `--list-formats`). The line's `protobuf` field states what the server really
//! answered, counted by `Content-Type` over every successful response (`protobuf_responses`,
//! `json_responses`, `other_responses`); exit 1 if that differs from what was asked.
//!
//! `--storage=limit` is no informer: the server-bound limit line (see [`limit`]), the
//! reflector's first request read to the sync point with nothing decoded, no update phase.
//!
//! `--list-storages` prints the storage modes this build offers; `--list-formats` prints one
//! line per storage with the wire formats it can use (`typed json protobuf`), for
//! `kcache bench`.

mod default;
mod limit;
mod wire;

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use wire::WireCounts;

use anyhow::bail;
use clap::{Parser, ValueEnum};
use k8s_openapi::api::core::v1::Pod;
use kcache::{
    HandlerFns, InformerFrom, ListerWatcher, SharedIndexInformer, SharedInformerFactory, factory,
    informer, reflector,
};
use kcache_bench::{
    PeerLine, metrics,
    peer::{Dataset, Mode, PeerArgs, SyncTimer, UpdateWindow},
    widgets::Widget,
};
use kcache_client::{Client, Compact, CompactDecoder, HttpListerWatcher, Typed};
use kube_core::{PartialObjectMeta, Resource};
use parking_lot::Mutex;
use tokio::sync::Notify;

/// How the informer keeps objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Storage {
    /// Full typed k8s-openapi `Pod`s, `managedFields` included.
    Typed,
    /// Typed `Pod`s without `metadata.managedFields` (skipped in the parser, and
    /// `factory::Config::strip_managed_fields`).
    Stripped,
    /// `PartialObjectMeta<Pod>` (metadata-only requests), without `managedFields`.
    Metadata,
    /// `Compact<Pod>`: each object's wire bytes (JSON, or protobuf with `--protobuf`; without
    /// `managedFields`) plus parsed metadata.
    Compact,
    /// What the quick start builds: `factory.informer::<Pod>(&client)` (lean `Compact<Pod>`,
    /// `managedFields` kept), with a handler that enqueues every key into a work queue.
    Default,
    /// No informer: the reflector's first list (or streaming list) read to its end with
    /// nothing decoded — what the server alone costs (no update phase: `--updates 0`).
    Limit,
}

impl Storage {
    fn as_str(self) -> &'static str {
        match self {
            Storage::Typed => "typed",
            Storage::Stripped => "stripped",
            Storage::Metadata => "metadata",
            Storage::Compact => "compact",
            Storage::Default => "default",
            Storage::Limit => "limit",
        }
    }
}

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "kcache-peer", about)]
struct Cli {
    /// Print the storage modes this build offers and exit.
    #[arg(long, exclusive = true)]
    list_storages: bool,
    /// Print one line per storage mode with the wire formats it can use
    /// (`typed json protobuf`) and exit.
    #[arg(long, exclusive = true)]
    list_formats: bool,
    /// How objects are kept.
    #[arg(long, value_enum, default_value_t = Storage::Typed)]
    storage: Storage,
    /// Ask for protobuf (`application/vnd.kubernetes.protobuf`) instead of JSON; only for
    /// storages that list `protobuf` in `--list-formats`.
    #[arg(long)]
    protobuf: bool,
    #[command(flatten)]
    peer: Option<PeerArgs>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if cli.list_storages {
        let names: Vec<&str> = Storage::value_variants()
            .iter()
            .map(|s| s.as_str())
            .collect();
        println!("{}", names.join(" "));
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if cli.list_formats {
        return runtime.block_on(async {
            // A client that never connects: asking which format a lister-watcher would use
            // sends nothing.
            let client = Client::from_url("http://127.0.0.1:9")?;
            for &storage in Storage::value_variants() {
                let formats = if asks_for_protobuf(storage, &client) {
                    "json protobuf"
                } else {
                    "json"
                };
                println!("{} {formats}", storage.as_str());
            }
            Ok(())
        });
    }
    let Some(peer) = cli.peer else {
        bail!("--kubeconfig and --n are required");
    };
    runtime.block_on(async move {
        let counts = Arc::new(WireCounts::default());
        let client = wire::counting_client(&peer.kubeconfig, counts.clone()).await?;
        if cli.protobuf && !asks_for_protobuf(cli.storage, &client) {
            bail!(
                "--storage={} cannot use protobuf (see --list-formats)",
                cli.storage.as_str()
            );
        }
        let ns = peer.namespace.clone();
        let pb = cli.protobuf;
        let run_args = RunArgs {
            args: peer,
            storage: cli.storage,
            protobuf: pb,
            counts,
        };
        if run_args.args.dataset == Dataset::Widgets {
            return run_widgets(run_args, client, &ns).await;
        }
        match cli.storage {
            Storage::Typed => run(run_args, typed(client, &ns, pb), count_updates).await,
            Storage::Stripped => run(run_args, stripped(client, &ns, pb), count_updates).await,
            Storage::Metadata => run(run_args, metadata(client, &ns, pb), count_updates).await,
            Storage::Compact => run(run_args, compact(client, &ns, pb), count_updates).await,
            Storage::Default => {
                let lw = default::lister_watcher(&client, &ns, pb);
                run(run_args, lw, default::register_key_handler).await
            }
            // On a worker, as the informer's reflector runs: read from `block_on`'s thread,
            // every body frame would cost a cross-thread wake-up the informer does not pay.
            Storage::Limit => {
                tokio::spawn(limit::run(client, run_args.args, pb, run_args.counts)).await?
            }
        }
    })
}

/// The custom-resource dataset: `typed` (`Widget`s), `default` (lean `Compact<Widget>`, as
/// `factory.informer::<Widget>(&client)` builds) or `limit`; all over JSON.
async fn run_widgets(run_args: RunArgs, client: Client, ns: &str) -> anyhow::Result<()> {
    if run_args.protobuf {
        bail!("--dataset widgets is JSON only: custom resources have no protobuf");
    }
    match run_args.storage {
        Storage::Typed => {
            let lw = HttpListerWatcher::<Widget>::namespaced(client, ns);
            run(run_args, lw, count_updates).await
        }
        Storage::Default => {
            let lw = default::widget_lister_watcher(&client, ns);
            run(run_args, lw, default::register_key_handler).await
        }
        Storage::Limit => {
            tokio::spawn(limit::run(client, run_args.args, false, run_args.counts)).await?
        }
        other => bail!(
            "--storage={} has no custom-resource form (widgets: typed, default, limit)",
            other.as_str()
        ),
    }
}

fn typed(client: Client, ns: &str, protobuf: bool) -> HttpListerWatcher<Pod> {
    HttpListerWatcher::<Pod>::namespaced(client, ns).protobuf(protobuf)
}

fn stripped(client: Client, ns: &str, protobuf: bool) -> HttpListerWatcher<Pod, Typed> {
    HttpListerWatcher::<Pod>::namespaced(client, ns)
        .protobuf(protobuf)
        .with_decoder(Typed::new().strip_managed_fields(true))
}

fn metadata(
    client: Client,
    ns: &str,
    protobuf: bool,
) -> HttpListerWatcher<PartialObjectMeta<Pod>, Typed> {
    HttpListerWatcher::<PartialObjectMeta<Pod>>::namespaced(client, ns)
        .protobuf(protobuf)
        .with_decoder(Typed::new().strip_managed_fields(true))
}

fn compact(
    client: Client,
    ns: &str,
    protobuf: bool,
) -> HttpListerWatcher<Compact<Pod>, CompactDecoder> {
    HttpListerWatcher::<Compact<Pod>>::namespaced(client, ns)
        .protobuf(protobuf)
        .with_decoder(CompactDecoder::new().strip_managed_fields(true))
}

/// Whether `storage`'s lister-watcher asks for protobuf when allowed to.
fn asks_for_protobuf(storage: Storage, client: &Client) -> bool {
    let c = client.clone();
    match storage {
        Storage::Typed => typed(c, "default", true).asks_for_protobuf(),
        Storage::Stripped => stripped(c, "default", true).asks_for_protobuf(),
        Storage::Metadata => metadata(c, "default", true).asks_for_protobuf(),
        Storage::Compact => compact(c, "default", true).asks_for_protobuf(),
        Storage::Default => default::lister_watcher(&c, "default", true).asks_for_protobuf(),
        // The same Accept as the typed storage: protobuf for Pods.
        Storage::Limit => typed(c, "default", true).asks_for_protobuf(),
    }
}

/// What one run needs besides the lister-watcher.
struct RunArgs {
    args: PeerArgs,
    storage: Storage,
    protobuf: bool,
    counts: Arc<WireCounts>,
}

/// The other storages' handler: it only counts updates (`on_update`).
fn count_updates<K: Resource + Clone + Send + Sync + 'static>(
    informer: &SharedIndexInformer<K>,
    on_update: Box<dyn Fn() + Send + Sync>,
) -> anyhow::Result<()> {
    informer.add_event_handler(HandlerFns::new().on_update(move |_old, _new| on_update()))?;
    Ok(())
}

/// Syncs an informer over `lw` with the handler that `register` adds, which must call the
/// given function on every update; prints the line.
async fn run<K, L, R>(run: RunArgs, lw: L, register: R) -> anyhow::Result<()>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
    R: FnOnce(&SharedIndexInformer<K>, Box<dyn Fn() + Send + Sync>) -> anyhow::Result<()>,
{
    let RunArgs {
        args,
        storage,
        protobuf,
        counts,
    } = run;
    let reflector = reflector::Config::default().initial_list(if args.mode == Mode::Streaming {
        reflector::InitialList::Stream
    } else {
        reflector::InitialList::List
    });
    let options = factory::Config::default()
        .namespace(args.namespace.clone())
        .strip_managed_fields(!matches!(storage, Storage::Typed | Storage::Default))
        .informer_config(informer::Config::default().reflector(reflector));
    let factory = SharedInformerFactory::new(options);
    // The factory asks its source once, when it creates the informer.
    let lw = std::sync::Mutex::new(Some(lw));
    let informer = factory.informer::<K>(&|_: Option<&str>| {
        lw.lock()
            .expect("not poisoned")
            .take()
            .expect("the factory asks its source once")
    });

    let synced = Arc::new(AtomicBool::new(false));
    let window = Arc::new(Mutex::new(UpdateWindow::new(args.updates)));
    let done = Arc::new(Notify::new());
    {
        let (synced, window, done) = (synced.clone(), window.clone(), done.clone());
        register(
            &informer,
            Box::new(move || {
                if synced.load(Ordering::Acquire) && window.lock().record() {
                    done.notify_one();
                }
            }),
        )?;
    }

    let deadline = tokio::time::Instant::now() + args.timeout;
    let timer = SyncTimer::start();
    factory.start();
    let all_synced = tokio::time::timeout_at(deadline, factory.wait_for_cache_sync()).await;
    if !matches!(&all_synced, Ok(map) if map.values().all(|ok| *ok)) {
        bail!(
            "the informer did not sync within --timeout={:?}",
            args.timeout
        );
    }
    synced.store(true, Ordering::Release);
    let n = informer.indexer().len() as u64;
    let mut line = timer.synced("kcache", &args, n)?;
    line.extra.insert("storage".into(), storage.as_str().into());
    line.extra.insert("client".into(), "kcache-client".into());

    if args.updates > 0 && n == args.n {
        let wait = done.notified();
        if !window.lock().is_done() {
            let _ = tokio::time::timeout_at(deadline, wait).await;
        }
    }
    window.lock().fill(&mut line);
    let wire = counts.get();
    line.extra
        .insert("protobuf".into(), wire.all_protobuf().into());
    line.extra
        .insert("protobuf_responses".into(), wire.protobuf.into());
    line.extra.insert("json_responses".into(), wire.json.into());
    line.extra
        .insert("other_responses".into(), wire.other.into());
    if let Some(m) = informer.reflector_metrics() {
        line.extra.insert("list_requests".into(), m.lists.into());
        line.extra
            .insert("watch_list_requests".into(), m.watch_lists.into());
        line.extra.insert("watch_requests".into(), m.watches.into());
    }
    // Memory at the end, with the update phase's objects in the cache (for the report).
    if let Ok(mem) = metrics::memory() {
        line.extra
            .insert("rss_at_end_bytes".into(), mem.rss_bytes.into());
    }
    println!("{}", serde_json::to_string(&line)?);
    factory.shutdown().await;
    check(&args, &line, &window.lock())?;
    check_wire(protobuf, wire)
}

/// The exit status for the wire format: with `--protobuf` every successful response was
/// protobuf, without it none was.
fn check_wire(asked_protobuf: bool, wire: wire::Counts) -> anyhow::Result<()> {
    if asked_protobuf && !wire.all_protobuf() {
        bail!(
            "--protobuf but the server answered {} response(s) in protobuf, {} in JSON, {} other",
            wire.protobuf,
            wire.json,
            wire.other
        );
    }
    if !asked_protobuf && wire.protobuf > 0 {
        bail!(
            "JSON was asked for but the server answered {} response(s) in protobuf",
            wire.protobuf
        );
    }
    Ok(())
}

/// The exit status: the count, the updates and the initial-list mode really used.
fn check(args: &PeerArgs, line: &PeerLine, window: &UpdateWindow) -> anyhow::Result<()> {
    if line.n != args.n {
        bail!(
            "synced {} {} in namespace {:?}, expected --n={}",
            line.n,
            args.dataset.as_str(),
            args.namespace,
            args.n
        );
    }
    if !window.is_done() {
        bail!(
            "saw {} of {} update events before --timeout={:?}",
            window.seen(),
            args.updates,
            args.timeout
        );
    }
    let used = |key: &str| {
        line.extra
            .get(key)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    match args.mode {
        Mode::Streaming if used("watch_list_requests") == 0 => {
            bail!("--mode=streaming but the reflector sent no watch-list request")
        }
        Mode::ListWatch if used("list_requests") == 0 => {
            bail!("--mode=list-watch but the reflector sent no LIST request")
        }
        _ => Ok(()),
    }
}
