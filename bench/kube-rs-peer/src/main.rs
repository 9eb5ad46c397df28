//! kube-rs peer of `kcache bench`: kube-runtime's reflector store of the pods of one namespace
//! (or, with `--dataset widgets`, of the typed `Widget` custom resources, as a kube-rs operator
//! derives them), in its ListWatch or StreamingList initial-list strategy.
//!
//! It prints one JSON line on stdout, with the fields and the measuring windows of
//! `harness/client-go-peer`: sync is from the start of the watcher to the store being ready
//! (the `InitDone` of the first initial list) holding `--n` pods; with `--updates N` it then
//! creates `--ready-file` and times the first to the N-th `Apply` event. Exit 1 (reason on
//! stderr) on a timeout or a wrong pod count.

use anyhow::bail;
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kcache_bench::{
    dataset,
    peer::{Dataset, Mode, PeerArgs, SyncTimer, UpdateWindow},
    widgets::Widget,
};
use kube::Api;
use kube_runtime::{WatchStreamExt, reflector, watcher};

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "kube-rs-peer", about)]
struct Cli {
    #[command(flatten)]
    peer: PeerArgs,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let client = dataset::client(&cli.peer.kubeconfig).await?;
        let ns = cli.peer.namespace.clone();
        match cli.peer.dataset {
            Dataset::Pods => run(cli.peer, Api::<Pod>::namespaced(client, &ns)).await,
            Dataset::Widgets => run(cli.peer, Api::<Widget>::namespaced(client, &ns)).await,
        }
    })
}

async fn run<K>(args: PeerArgs, api: Api<K>) -> anyhow::Result<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let mut config = watcher::Config::default();
    if args.mode == Mode::Streaming {
        config = config.streaming_lists();
    }
    let (reader, writer) = reflector::store::<K>();

    let timer = SyncTimer::start();
    let events = reflector(writer, watcher(api, config).default_backoff());
    let mut events = std::pin::pin!(events);
    let deadline = tokio::time::Instant::now() + args.timeout;
    let mut line = None;
    let mut window = UpdateWindow::new(args.updates);
    loop {
        let next = tokio::time::timeout_at(deadline, events.next()).await;
        let event = match next {
            Err(_) => break,
            Ok(None) => bail!("the watcher stream ended"),
            Ok(Some(Err(e))) => {
                eprintln!("kube-rs-peer: watcher error (retrying): {e}");
                continue;
            }
            Ok(Some(Ok(event))) => event,
        };
        match event {
            watcher::Event::InitDone if line.is_none() => {
                let n = reader.len() as u64;
                line = Some(timer.synced("kube-rs", &args, n)?);
                if n != args.n {
                    break;
                }
            }
            watcher::Event::Apply(_) if line.is_some() => {
                window.record();
            }
            _ => {}
        }
        if line.is_some() && window.is_done() {
            break;
        }
    }
    let Some(mut line) = line else {
        bail!(
            "the store did not become ready within --timeout={:?}",
            args.timeout
        );
    };
    line.extra.insert("kube_rs".into(), "5.0.0".into());
    window.fill(&mut line);
    println!("{}", serde_json::to_string(&line)?);
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
    Ok(())
}
