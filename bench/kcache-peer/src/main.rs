//! kcache peer of `kcache bench`: a kcache [`SharedIndexInformer`](kcache::SharedIndexInformer)
//! (through [`SharedInformerFactory`]) of the pods of one namespace, fed by kcache-client's
//! [`HttpListerWatcher`].
//!
//! It prints one JSON line on stdout with the fields and the measuring windows of
//! `harness/client-go-peer`, plus `storage` (how objects are kept) and the reflector's request
//! counters. Sync is from the factory's start to `wait_for_cache_sync` with `--n` pods cached;
//! with `--updates N` it then creates `--ready-file` and times the first to the N-th update
//! notification of an event handler. Exit 1 (reason on stderr) on a timeout, a wrong pod
//! count, or a mode the reflector did not use.
//!
//! `--list-storages` prints the storage modes this build offers, for `kcache bench`.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use anyhow::bail;
use clap::{Parser, ValueEnum};
use k8s_openapi::api::core::v1::Pod;
use kcache::{
    FactoryOptions, HandlerFns, ListerWatcher, SharedInformerFactory, informer::InformerConfig,
    reflector,
};
use kcache_bench::{
    PeerLine, metrics,
    peer::{Mode, PeerArgs, SyncTimer, UpdateWindow},
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
    /// `FactoryOptions::strip_managed_fields`).
    Stripped,
    /// `PartialObjectMeta<Pod>` (metadata-only requests), without `managedFields`.
    Metadata,
    /// `Compact<Pod>`: each object's JSON bytes (without `managedFields`) plus parsed metadata.
    Compact,
}

impl Storage {
    fn as_str(self) -> &'static str {
        match self {
            Storage::Typed => "typed",
            Storage::Stripped => "stripped",
            Storage::Metadata => "metadata",
            Storage::Compact => "compact",
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
    /// How objects are kept.
    #[arg(long, value_enum, default_value_t = Storage::Typed)]
    storage: Storage,
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
    let Some(peer) = cli.peer else {
        bail!("--kubeconfig and --n are required");
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let client = Client::from_kubeconfig(&peer.kubeconfig).await?;
        let ns = peer.namespace.clone();
        match cli.storage {
            Storage::Typed => {
                let lw = HttpListerWatcher::<Pod>::namespaced(client, &ns);
                run(peer, Storage::Typed, lw).await
            }
            Storage::Stripped => {
                let lw = HttpListerWatcher::<Pod>::namespaced(client, &ns)
                    .with_decoder(Typed::new().strip_managed_fields(true));
                run(peer, Storage::Stripped, lw).await
            }
            Storage::Metadata => {
                let lw = HttpListerWatcher::<PartialObjectMeta<Pod>>::namespaced(client, &ns)
                    .with_decoder(Typed::new().strip_managed_fields(true));
                run(peer, Storage::Metadata, lw).await
            }
            Storage::Compact => {
                let lw = HttpListerWatcher::<Compact<Pod>>::namespaced(client, &ns)
                    .with_decoder(CompactDecoder::new().strip_managed_fields(true));
                run(peer, Storage::Compact, lw).await
            }
        }
    })
}

async fn run<K, L>(args: PeerArgs, storage: Storage, lw: L) -> anyhow::Result<()>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    let reflector = reflector::Config {
        use_watch_list: args.mode == Mode::Streaming,
        ..reflector::Config::default()
    };
    let options = FactoryOptions::default()
        .namespace(args.namespace.clone())
        .strip_managed_fields(storage != Storage::Typed)
        .informer_config(InformerConfig::default().reflector(reflector));
    let factory = SharedInformerFactory::new(options);
    let informer = factory.informer_for::<K, _, _>(|_opts| lw);

    let synced = Arc::new(AtomicBool::new(false));
    let window = Arc::new(Mutex::new(UpdateWindow::new(args.updates)));
    let done = Arc::new(Notify::new());
    {
        let (synced, window, done) = (synced.clone(), window.clone(), done.clone());
        informer.add_event_handler(HandlerFns::new().on_update(move |_old, _new| {
            if synced.load(Ordering::Acquire) && window.lock().record() {
                done.notify_one();
            }
        }))?;
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
    check(&args, &line, &window.lock())
}

/// The exit status: the count, the updates and the initial-list mode really used.
fn check(args: &PeerArgs, line: &PeerLine, window: &UpdateWindow) -> anyhow::Result<()> {
    if line.n != args.n {
        bail!(
            "synced {} pods in namespace {:?}, expected --n={}",
            line.n,
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
