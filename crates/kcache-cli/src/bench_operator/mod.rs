//! `kcache bench-operator`: one operator written on kcache-runtime, on controller-runtime and
//! on kube-runtime (`bench/operator-peer`, `harness/controller-runtime-peer`), run against the
//! same server and measured side by side (see BENCHMARKS.md).
//!
//! The operator: a `Team` (CRD `teams.bench.kcache.io`) owns a ConfigMap holding the number of
//! Pods of its namespace; every Pod event maps to the Teams of its namespace. The driver loads
//! `--n` Pods over `--namespaces` namespaces and `--teams` Teams (team j in namespace
//! j mod M), then for each run and peer (the order rotates each run): deletes the Teams'
//! ConfigMaps, starts the peer, waits until it has reconciled every Team with the right count,
//! patches `--updates` Pods once each at `--update-rate`, reads the peer's JSON line and checks
//! every ConfigMap on the server. It writes `results.json` and `results.md` under `--out`.

mod report;
mod setup;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use kcache_bench::peer::parse_duration;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

/// The peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[allow(
    clippy::enum_variant_names,
    reason = "the runtimes' names, as the command line spells them"
)]
pub(crate) enum Peer {
    /// kcache-runtime's Manager (`operator-peer --runtime kcache`).
    KcacheRuntime,
    /// controller-runtime (`controller-runtime-peer`).
    ControllerRuntime,
    /// kube-runtime (`operator-peer --runtime kube-rs`).
    KubeRuntime,
}

impl Peer {
    /// Its name in results.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Peer::KcacheRuntime => "kcache-runtime",
            Peer::ControllerRuntime => "controller-runtime",
            Peer::KubeRuntime => "kube-runtime",
        }
    }
}

/// `kcache bench-operator`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BenchOperatorArgs {
    /// Kubeconfig of the server.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// Pods, spread evenly over the namespaces.
    #[arg(long, default_value_t = 10_000)]
    n: usize,
    /// Teams (team j in namespace j mod --namespaces).
    #[arg(long, default_value_t = 1_000)]
    teams: usize,
    /// Namespaces, PREFIX-0 .. PREFIX-(M-1).
    #[arg(long, default_value_t = 100)]
    namespaces: usize,
    /// The namespaces' prefix.
    #[arg(long, default_value = "op-bench")]
    namespace: String,
    /// Pods patched once each in the update phase (default: all of them).
    #[arg(long)]
    updates: Option<usize>,
    /// Pod patches per second in the update phase (as far as the server keeps up).
    #[arg(long, default_value_t = 1_000.0)]
    update_rate: f64,
    /// Runs of each peer (alternating).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Which peers, in their first run's order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "kcache-runtime,controller-runtime,kube-runtime"
    )]
    peers: Vec<Peer>,
    /// Where results.json, results.md and the peers' logs go.
    #[arg(long, default_value = "bench-operator-results")]
    out: PathBuf,
    /// The operator-peer program (default: beside this program).
    #[arg(long, env = "KCACHE_OPERATOR_PEER")]
    operator_peer: Option<PathBuf>,
    /// The controller-runtime-peer program (default: the newest
    /// `~/.cache/kcache/controller-runtime-peer-*/controller-runtime-peer`).
    #[arg(long, env = "KCACHE_CONTROLLER_RUNTIME_PEER")]
    controller_runtime_peer: Option<PathBuf>,
    /// Requests in flight while loading and patching.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Delete the Pods, Teams and ConfigMaps at the end (the namespaces stay).
    #[arg(long)]
    cleanup: bool,
    /// A peer's time limit (sync plus updates), e.g. `600s` or `10m`.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    timeout: Duration,
}

impl BenchOperatorArgs {
    /// Namespace `k`.
    pub(crate) fn ns(&self, k: usize) -> String {
        format!("{}-{k}", self.namespace)
    }

    /// Whether `namespace` is one of the benchmark's (`PREFIX-k`, k < `--namespaces`).
    pub(crate) fn owns_namespace(&self, namespace: &str) -> bool {
        namespace
            .strip_prefix(self.namespace.as_str())
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|k| k.parse::<usize>().ok())
            .is_some_and(|k| k < self.namespaces && self.ns(k) == namespace)
    }

    /// The Pods of namespace `k`.
    pub(crate) fn pods_in(&self, k: usize) -> usize {
        self.n / self.namespaces + usize::from(k < self.n % self.namespaces)
    }

    /// The Pods of namespace `k` patched in the update phase.
    fn updates_in(&self, k: usize) -> usize {
        let u = self.updates.unwrap_or(self.n).min(self.n);
        u / self.namespaces + usize::from(k < u % self.namespaces)
    }
}

/// One peer run.
#[derive(Debug, Clone)]
pub(crate) struct RunResult {
    pub(crate) peer: Peer,
    pub(crate) run: usize,
    /// The peer's JSON line.
    pub(crate) line: Value,
    /// Pod patches per second the driver achieved.
    pub(crate) achieved_rate: Option<f64>,
    /// Teams whose ConfigMap on the server held the right count after the run.
    pub(crate) verified_teams: usize,
}

/// Runs the benchmark.
///
/// # Errors
/// A failed setup, a peer that failed or timed out, or a wrong ConfigMap after a run.
pub(crate) async fn run(args: BenchOperatorArgs) -> anyhow::Result<()> {
    if args.namespaces == 0 || args.teams == 0 || args.runs == 0 || args.peers.is_empty() {
        bail!("--namespaces, --teams, --runs and --peers must be positive");
    }
    let programs = programs(&args)?;
    std::fs::create_dir_all(args.out.join("logs"))
        .with_context(|| format!("creating {}", args.out.display()))?;
    let client = kcache_bench::dataset::client(&args.kubeconfig).await?;
    eprintln!(
        "bench-operator: loading {} pods and {} teams over {} namespaces",
        args.n, args.teams, args.namespaces
    );
    setup::load(&client, &args).await?;
    let mut results = Vec::new();
    for run in 0..args.runs {
        let mut order = args.peers.clone();
        let len = order.len();
        order.rotate_left(run % len);
        for peer in order {
            setup::delete_config_maps(&client, &args).await?;
            let result = run_peer(&client, &args, &programs, peer, run).await?;
            eprintln!(
                "bench-operator: run {} {}: full reconcile {:.0} ms, {} of {} teams verified",
                run + 1,
                peer.as_str(),
                result.line["full_reconcile_ms"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
                result.verified_teams,
                args.teams
            );
            if result.verified_teams != args.teams {
                bail!(
                    "{} run {}: {} of {} Teams' ConfigMaps hold the right count",
                    peer.as_str(),
                    run + 1,
                    result.verified_teams,
                    args.teams
                );
            }
            results.push(result);
        }
    }
    report::write(&args, &results)?;
    if args.cleanup {
        setup::cleanup(&client, &args).await?;
    }
    eprintln!(
        "bench-operator: wrote {} and {}",
        args.out.join("results.json").display(),
        args.out.join("results.md").display()
    );
    Ok(())
}

/// The program of each peer.
struct Programs {
    operator_peer: Option<PathBuf>,
    controller_runtime_peer: Option<PathBuf>,
}

fn programs(args: &BenchOperatorArgs) -> anyhow::Result<Programs> {
    let rust = args.peers.iter().any(|p| *p != Peer::ControllerRuntime);
    let go = args.peers.contains(&Peer::ControllerRuntime);
    let operator_peer = match (&args.operator_peer, rust) {
        (Some(p), true) => Some(p.clone()),
        (None, true) => {
            let dir = std::env::current_exe()?
                .parent()
                .context("this program has no directory")?
                .to_path_buf();
            let p = dir.join("operator-peer");
            if !p.is_file() {
                bail!(
                    "{} not found (cargo build -p operator-peer, or pass --operator-peer)",
                    p.display()
                );
            }
            Some(p)
        }
        (_, false) => None,
    };
    let controller_runtime_peer = match (&args.controller_runtime_peer, go) {
        (Some(p), true) => Some(p.clone()),
        (None, true) => Some(newest_cached("controller-runtime-peer")?),
        (_, false) => None,
    };
    Ok(Programs {
        operator_peer,
        controller_runtime_peer,
    })
}

/// The newest `name` that scripts/build-harness.sh cached.
fn newest_cached(name: &str) -> anyhow::Result<PathBuf> {
    let cache = std::env::var_os("KCACHE_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/kcache")))
        .context("neither KCACHE_CACHE_DIR nor HOME is set")?;
    std::fs::read_dir(&cache)
        .with_context(|| format!("looking for {name} in {}", cache.display()))?
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{name}-"))
        })
        .map(|e| e.path().join(name))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .with_context(|| {
            format!(
                "no {name} in {} (build it with scripts/build-harness.sh {name}, or pass --{name})",
                cache.display()
            )
        })
}

async fn run_peer(
    client: &kube_client::Client,
    args: &BenchOperatorArgs,
    programs: &Programs,
    peer: Peer,
    run: usize,
) -> anyhow::Result<RunResult> {
    let tag = format!("{}-{}", peer.as_str(), run + 1);
    let logs = args.out.join("logs");
    let ready = logs.join(format!("{tag}.ready"));
    let _ = std::fs::remove_file(&ready);
    let stderr = std::fs::File::create(logs.join(format!("{tag}.stderr")))?;
    let updates: usize = (0..args.namespaces).map(|k| args.updates_in(k)).sum();
    let mut cmd = match peer {
        Peer::ControllerRuntime => tokio::process::Command::new(
            programs
                .controller_runtime_peer
                .as_ref()
                .context("no peer")?,
        ),
        Peer::KcacheRuntime | Peer::KubeRuntime => {
            let mut cmd =
                tokio::process::Command::new(programs.operator_peer.as_ref().context("no peer")?);
            let runtime = if peer == Peer::KcacheRuntime {
                "kcache"
            } else {
                "kube-rs"
            };
            cmd.args(["--runtime", runtime]);
            cmd
        }
    };
    cmd.arg("--kubeconfig")
        .arg(&args.kubeconfig)
        .arg("--namespace")
        .arg(&args.namespace)
        .arg("--namespaces")
        .arg(args.namespaces.to_string())
        .arg("--n")
        .arg(args.n.to_string())
        .arg("--teams")
        .arg(args.teams.to_string())
        .arg("--updates")
        .arg(updates.to_string())
        .arg("--ready-file")
        .arg(&ready)
        .arg("--timeout")
        .arg(format!("{}s", args.timeout.as_secs()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", peer.as_str()))?;
    let deadline = Instant::now() + args.timeout;
    while !ready.exists() {
        if let Some(status) = child.try_wait()? {
            bail!("{tag} exited ({status}) before its full reconcile; see logs/{tag}.stderr");
        }
        if Instant::now() > deadline {
            bail!(
                "{tag} did not reach its full reconcile within {:?}",
                args.timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let achieved_rate = if updates > 0 {
        let start = Instant::now();
        // A value no earlier patch set, so that every patch is a change (an event).
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        setup::touch(client, args, &format!("{tag}-{stamp}"), |k| {
            args.updates_in(k)
        })
        .await?;
        Some(updates as f64 / start.elapsed().as_secs_f64())
    } else {
        None
    };
    let mut out = String::new();
    let mut stdout = child.stdout.take().context("no stdout")?;
    let wait = async {
        stdout.read_to_string(&mut out).await?;
        child.wait().await
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let status = tokio::time::timeout(left, wait)
        .await
        .with_context(|| format!("{tag} did not finish its update phase in time"))??;
    if !status.success() {
        bail!("{tag} failed ({status}); see logs/{tag}.stderr");
    }
    let line: Value = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("{tag} printed no JSON line"))
        .and_then(|l| serde_json::from_str(l).context("parsing the peer's line"))?;
    let verified_teams = setup::verify(client, args).await?;
    Ok(RunResult {
        peer,
        run,
        line,
        achieved_rate,
        verified_teams,
    })
}

/// The run's configuration, for results.json.
pub(crate) fn config_json(args: &BenchOperatorArgs) -> Value {
    json!({
        "n": args.n, "teams": args.teams, "namespaces": args.namespaces,
        "updates": (0..args.namespaces).map(|k| args.updates_in(k)).sum::<usize>(),
        "update_rate": args.update_rate, "runs": args.runs,
        "peers": args.peers.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::BenchOperatorArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchOperatorArgs,
    }

    /// The ConfigMaps of another run's namespaces (another prefix, or more namespaces) are not
    /// the benchmark's: waiting for them to go would wait for ever.
    #[test]
    fn owns_only_its_own_namespaces() {
        let cli = Cli::parse_from([
            "bench",
            "--kubeconfig",
            "kc",
            "--namespace",
            "op",
            "--namespaces",
            "3",
        ]);
        let args = cli.args;
        for (ns, ours) in [
            ("op-0", true),
            ("op-2", true),
            ("op-3", false),
            ("op-01", false),
            ("opq-0", false),
            ("op", false),
            ("op-", false),
            ("other-1", false),
        ] {
            assert_eq!(args.owns_namespace(ns), ours, "{ns}");
        }
    }
}
