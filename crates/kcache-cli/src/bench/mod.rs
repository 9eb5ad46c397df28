//! `kcache bench`: kcache, client-go and kube-rs side by side, against the same server and the
//! same dataset, in one run.
//!
//! For each `--objects` N the dataset (N realistic pods, see [`kcache_bench::dataset`], or
//! with `--dataset widgets` N custom resources of a CRD the bench installs, see
//! [`kcache_bench::widgets`]) is loaded once into a fresh namespace; then every peer configuration — peer × initial-list
//! mode × kcache storage × wire format (JSON, and protobuf where the peer offers it: client-go,
//! and the kcache storages that `kcache-peer --list-formats` lists with `protobuf`) — runs
//! `--runs` times, alternating (A B C A B C …), each as its own process so that its memory
//! figures are its own. While a peer waits after its sync, the updater patches every pod once
//! (or the first `--updates` pods) and the peer times those events. The kcache storage `limit`
//! is the server-bound limit line: the reflector's first request read to the sync point with
//! nothing decoded, and no update phase. The results go to `--out`: `results.json` (every
//! run), `results.md` (medians, min–max, each line's sync wall × the limit line's, ratios
//! kcache/peer in the same wire format, ratios protobuf/JSON) and one `chart-N.png` per N.

pub(crate) mod authz;
mod chart;
mod fleet;
mod peer_process;
mod report;
mod row;
mod runner;

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::{Context, bail};
use kcache_apiserver::ApiServer;
use kcache_bench::{
    dataset,
    peer::{Dataset, parse_duration},
};

pub(crate) use runner::PeerKind;

/// Arguments of `kcache bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The server: `embedded` (kcache's own, started here) or `kubeconfig PATH` (any cluster,
    /// e.g. the upstream kube-apiserver of `scripts/kube-up.sh`).
    #[arg(long, num_args = 1..=2, value_names = ["embedded|kubeconfig", "PATH"], default_value = "embedded")]
    pub server: Vec<String>,
    /// The objects: `pods` (realistic pods), or `widgets` (custom resources of a CRD the bench
    /// installs; JSON only, as every custom resource, so no protobuf configuration runs).
    #[arg(long, value_enum, default_value_t = Dataset::Pods)]
    pub dataset: Dataset,
    /// Object counts to run with, comma-separated (the dataset is loaded once per count).
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    pub objects: Vec<usize>,
    /// Runs of each peer configuration per count.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Peers to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "kcache,kube-rs,client-go"
    )]
    pub peers: Vec<PeerKind>,
    /// Directory for results.json, results.md, the charts and the peers' logs.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// The client-go peer binary (default: `scripts/build-harness.sh`'s cache,
    /// `~/.cache/kcache/client-go-peer-*/client-go-peer`, the newest).
    #[arg(long, env = "KCACHE_CLIENT_GO_PEER")]
    pub client_go_peer: Option<PathBuf>,
    /// Directory holding the `kube-rs-peer` and `kcache-peer` binaries (default: this
    /// program's directory, where cargo puts them).
    #[arg(long)]
    pub peer_dir: Option<PathBuf>,
    /// Requests in flight while loading and updating.
    #[arg(long, default_value_t = 48)]
    pub concurrency: usize,
    /// Give up on one peer run after this long (e.g. 300s, 10m).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Skip every protobuf configuration (client-go's, and kcache's storages that offer it).
    #[arg(long)]
    pub no_protobuf: bool,
    /// Update events timed per run: the first this many pods are patched once each after the
    /// peer's sync (default: every pod; 0 skips the update phase).
    #[arg(long)]
    pub updates: Option<usize>,
    /// Send the update patches at this many per second (default: as fast as `--concurrency`
    /// requests in flight and the server allow); the achieved rate is in the results
    /// (`updates/s`).
    #[arg(long, value_parser = parse_rate)]
    pub update_rate: Option<f64>,
    /// Run only these configurations, comma-separated labels as in results.md (e.g.
    /// `client-go list-watch protobuf,kcache list-watch typed`); an unknown label is an error.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Fleet sizes, comma-separated (e.g. `1,10,50`): instead of the runs above, start this
    /// many peers of each configuration at once (a fleet of controllers restarting), with no
    /// update phase, `--runs` times each; `fleet.md` / `fleet.json` report the wall time until
    /// the last one synced, the members' CPU and memory added up, and (with `--server-pid` or
    /// the embedded server) what the fleet cost the API server.
    #[arg(long, value_delimiter = ',')]
    pub fleet: Vec<usize>,
    /// The API server's process id: each run then reports what it cost the server (CPU
    /// seconds, peak resident memory growth and bytes written, during the sync and during the
    /// updates; read from `/proc/PID`). With `--server embedded` the server is this process
    /// and is always measured (its update phase then includes the updater's own work).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Leave each N's namespace and pods on the server at the end instead of deleting them
    /// (e.g. to profile one peer against them by hand); the namespace is printed. Only with
    /// `--server kubeconfig`: the embedded server goes away with the run.
    #[arg(long)]
    pub keep_dataset: bool,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "{s:?} is not a positive number of updates per second"
        )),
    }
}

/// Where the peers read from.
enum Server {
    Embedded(Box<kcache_apiserver::RunningServer>),
    Kubeconfig,
}

/// Runs the benchmark; fails when any peer run failed (after writing every result).
///
/// # Errors
/// Bad arguments, a server or loader failure, or a failed peer run.
pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.runs == 0 || args.objects.is_empty() || args.objects.contains(&0) {
        bail!("--runs and every --objects count must be at least 1");
    }
    if args.fleet.contains(&0) {
        bail!("every --fleet size must be at least 1");
    }
    if args.keep_dataset && args.server.first().map(String::as_str) != Some("kubeconfig") {
        bail!(
            "--keep-dataset needs --server kubeconfig PATH (the embedded server ends with the run)"
        );
    }
    std::fs::create_dir_all(args.out.join("logs"))
        .with_context(|| format!("creating {}", args.out.display()))?;
    let max_n = args.objects.iter().copied().max().unwrap_or(1);
    let (server, kubeconfig) = match args.server.as_slice() {
        [kind] if kind == "embedded" => {
            let history = (max_n * 2).max(10_000);
            let server = ApiServer::builder()
                .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
                .history_events(history)
                .auto_create_namespaces(true)
                .build()
                .start()
                .await
                .context("starting the embedded API server")?;
            let path = args.out.join("embedded.kubeconfig");
            server
                .write_kubeconfig(&path)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("bench: embedded server at {}", server.url());
            (Server::Embedded(Box::new(server)), path)
        }
        [kind, path] if kind == "kubeconfig" => (Server::Kubeconfig, PathBuf::from(path)),
        other => bail!("--server takes `embedded` or `kubeconfig PATH`, not {other:?}"),
    };
    let server_label = match &server {
        Server::Embedded(_) => "embedded (kcache-apiserver)".to_owned(),
        Server::Kubeconfig => format!("kubeconfig {}", kubeconfig.display()),
    };
    let server_label = format!("{server_label}. Dataset: {}", args.dataset.as_str());
    let server_process = match (&server, args.server_pid) {
        (_, Some(pid)) => Some(pid),
        (Server::Embedded(_), None) => Some(std::process::id()),
        (Server::Kubeconfig, None) => None,
    }
    .map(kcache_bench::server_cost::Server::new);
    if let Some(process) = server_process {
        process.sample().with_context(|| {
            format!(
                "--server-pid {}: the server's cost cannot be read",
                process.pid()
            )
        })?;
    }
    let client = dataset::client(&kubeconfig).await?;
    let configs = runner::configs(&args)?;
    let mut records = Vec::new();
    let mut fleet_records = Vec::new();
    let mut pod_sizes = Vec::new();
    for &n in &args.objects {
        let namespace = format!("kcache-bench-{n}-{}", std::process::id());
        let started = std::time::Instant::now();
        let what = args.dataset.as_str();
        eprintln!("bench: loading {n} {what} into namespace {namespace}");
        dataset::load(&client, args.dataset, &namespace, n, args.concurrency).await?;
        eprintln!("bench: loaded in {:.1}s", started.elapsed().as_secs_f64());
        match dataset::sample_size(&client, args.dataset, &namespace).await {
            Ok((total, managed)) => {
                eprintln!(
                    "bench: one of the {what} is {total} bytes of JSON ({managed} of managedFields)"
                );
                pod_sizes.push((n, total, managed));
            }
            Err(e) => eprintln!("bench: reading one pod back: {e}"),
        }
        let ctx = runner::Context {
            args: &args,
            kubeconfig: &kubeconfig,
            client: &client,
            namespace: &namespace,
            n,
            updates: args.updates.map_or(n, |u| u.min(n)),
            server: server_process,
        };
        if !args.fleet.is_empty() {
            let ctx = runner::Context { updates: 0, ..ctx };
            for run in 0..args.runs {
                for &size in &args.fleet {
                    for config in &configs {
                        let record = fleet::run(&ctx, config, size, run).await;
                        eprintln!(
                            "bench: n={n} run {}/{} fleet of {size} {}: {}",
                            run + 1,
                            args.runs,
                            config.label(),
                            match &record.error {
                                None => format!("all synced in {:.0} ms", record.wall_ms),
                                Some(e) => format!("FAILED: {e}"),
                            }
                        );
                        fleet_records.push(record);
                        fleet::write_all(&args.out, &server_label, &fleet_records)?;
                    }
                }
            }
        }
        for run in 0..args.runs {
            if !args.fleet.is_empty() {
                break;
            }
            for config in &configs {
                let record = peer_process::run_one(&ctx, config, run).await;
                match &record.line {
                    Ok(line) => eprintln!(
                        "bench: n={n} run {}/{} {}: sync {:.0} ms, cpu {:.2} s, rss {:.0} MB, peak {:.0} MB",
                        run + 1,
                        args.runs,
                        config.label(),
                        line.sync_ms,
                        line.sync_cpu_s,
                        line.rss_after_sync_bytes as f64 / 1e6,
                        line.vmhwm_bytes as f64 / 1e6
                    ),
                    Err(e) => eprintln!(
                        "bench: n={n} run {}/{} {}: FAILED: {e}",
                        run + 1,
                        args.runs,
                        config.label()
                    ),
                }
                records.push(record);
                // Keep the files current, so that an interrupted run leaves its results.
                if let Err(e) = report::write_all(&args.out, &server_label, &pod_sizes, &records) {
                    eprintln!("bench: writing results: {e:#}");
                }
            }
        }
        if args.keep_dataset {
            eprintln!("bench: kept {n} {what} in namespace {namespace} (--keep-dataset)");
        } else if let Err(e) = dataset::delete(&client, args.dataset, &namespace).await {
            eprintln!("bench: cleaning up {namespace}: {e}");
        }
    }
    if args.fleet.is_empty() {
        let summary = report::write_all(&args.out, &server_label, &pod_sizes, &records)?;
        print!("{summary}");
    } else {
        print!(
            "{}",
            fleet::write_all(&args.out, &server_label, &fleet_records)?
        );
    }
    if let Server::Embedded(server) = server {
        server.shutdown().await;
    }
    let failed = records.iter().filter(|r| r.line.is_err()).count()
        + fleet_records.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        bail!(
            "{failed} of {} peer runs failed (see above and {}/logs)",
            records.len() + fleet_records.len(),
            args.out.display()
        );
    }
    Ok(())
}
