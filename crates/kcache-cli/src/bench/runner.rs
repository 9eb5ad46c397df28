//! Running one peer configuration once: spawn the peer, drive the updater when it is ready,
//! collect and check its line.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kcache_bench::{PeerLine, dataset, peer::Mode};
use kube_client::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use serde::Serialize;
use tokio::io::AsyncReadExt;

use super::BenchArgs;

/// A peer program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PeerKind {
    /// kcache's informer (`kcache-peer`).
    Kcache,
    /// kube-runtime's reflector (`kube-rs-peer`).
    KubeRs,
    /// client-go's shared informer (`harness/client-go-peer`).
    ClientGo,
}

impl PeerKind {
    /// The name the peer prints in its line.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Kcache => "kcache",
            PeerKind::KubeRs => "kube-rs",
            PeerKind::ClientGo => "client-go",
        }
    }
}

/// One peer configuration: program, initial-list mode, storage, wire format.
#[derive(Debug, Clone)]
pub struct Config {
    pub kind: PeerKind,
    pub mode: Mode,
    pub storage: Option<String>,
    pub protobuf: bool,
    pub program: PathBuf,
}

impl Config {
    /// `peer mode[ storage][ protobuf]`, as [`PeerLine::label`] names the line it prints.
    pub fn label(&self) -> String {
        let mut s = format!("{} {}", self.kind.name(), self.mode.as_str());
        if let Some(storage) = &self.storage {
            s.push(' ');
            s.push_str(storage);
        }
        if self.protobuf {
            s.push_str(" protobuf");
        }
        s
    }
}

/// One run's outcome.
#[derive(Debug, Serialize)]
pub struct Record {
    pub n: usize,
    pub run: usize,
    pub label: String,
    pub peer: PeerKind,
    pub mode: &'static str,
    pub storage: Option<String>,
    pub protobuf: bool,
    #[serde(serialize_with = "ser_line")]
    pub line: Result<PeerLine, String>,
}

fn ser_line<S: serde::Serializer>(
    line: &Result<PeerLine, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match line {
        Ok(line) => line.serialize(s),
        Err(e) => serde_json::json!({ "error": e }).serialize(s),
    }
}

/// What every run of one dataset shares.
pub struct Context<'a> {
    pub args: &'a BenchArgs,
    pub kubeconfig: &'a Path,
    pub client: &'a Client,
    pub namespace: &'a str,
    pub n: usize,
}

fn client_go_program(args: &BenchArgs) -> anyhow::Result<PathBuf> {
    if let Some(p) = &args.client_go_peer {
        return Ok(p.clone());
    }
    let cache = std::env::var_os("KCACHE_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/kcache")))
        .context("no --client-go-peer, and neither KCACHE_CACHE_DIR nor HOME is set")?;
    let newest = std::fs::read_dir(&cache)
        .with_context(|| format!("looking for client-go-peer in {}", cache.display()))?
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("client-go-peer-")
        })
        .map(|e| e.path().join("client-go-peer"))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    newest.with_context(|| {
        format!(
            "no client-go-peer in {} (build it with scripts/build-harness.sh client-go-peer, or pass --client-go-peer)",
            cache.display()
        )
    })
}

fn sibling_program(args: &BenchArgs, name: &str) -> anyhow::Result<PathBuf> {
    let dir = match &args.peer_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("this program has no directory")?
            .to_path_buf(),
    };
    let path = dir.join(name);
    if !path.is_file() {
        bail!(
            "{} not found (build it: cargo build -p {name}, or pass --peer-dir)",
            path.display()
        );
    }
    Ok(path)
}

/// The storage modes a kcache peer supports (`kcache-peer --list-storages`).
fn kcache_storages(program: &Path) -> anyhow::Result<Vec<String>> {
    let out = std::process::Command::new(program)
        .arg("--list-storages")
        .output()
        .with_context(|| format!("running {} --list-storages", program.display()))?;
    if !out.status.success() {
        bail!("{} --list-storages failed", program.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect())
}

/// Every configuration to run, in the order they alternate.
pub fn configs(args: &BenchArgs) -> anyhow::Result<Vec<Config>> {
    let mut configs = Vec::new();
    for &kind in &args.peers {
        let (program, storages, formats): (PathBuf, Vec<Option<String>>, Vec<bool>) = match kind {
            PeerKind::Kcache => {
                let program = sibling_program(args, "kcache-peer")?;
                let storages = kcache_storages(&program)?.into_iter().map(Some).collect();
                (program, storages, vec![false])
            }
            PeerKind::KubeRs => (
                sibling_program(args, "kube-rs-peer")?,
                vec![None],
                vec![false],
            ),
            PeerKind::ClientGo => {
                let formats = if args.no_protobuf {
                    vec![false]
                } else {
                    vec![false, true]
                };
                (client_go_program(args)?, vec![None], formats)
            }
        };
        for mode in [Mode::ListWatch, Mode::Streaming] {
            for storage in &storages {
                for &protobuf in &formats {
                    configs.push(Config {
                        kind,
                        mode,
                        storage: storage.clone(),
                        protobuf,
                        program: program.clone(),
                    });
                }
            }
        }
    }
    Ok(configs)
}

/// Runs `config` once on the context's dataset.
pub async fn run_one(ctx: &Context<'_>, config: &Config, run: usize) -> Record {
    let line = run_peer(ctx, config, run)
        .await
        .map_err(|e| format!("{e:#}"));
    Record {
        n: ctx.n,
        run,
        label: config.label(),
        peer: config.kind,
        mode: config.mode.as_str(),
        storage: config.storage.clone(),
        protobuf: config.protobuf,
        line,
    }
}

async fn run_peer(ctx: &Context<'_>, config: &Config, run: usize) -> anyhow::Result<PeerLine> {
    let slug = config.label().replace(' ', "-");
    let logs = ctx.args.out.join("logs");
    let ready = logs.join(format!("{slug}-n{}-r{run}.ready", ctx.n));
    let err_path = logs.join(format!("{slug}-n{}-r{run}.stderr", ctx.n));
    let _ = std::fs::remove_file(&ready);
    let n = ctx.n.to_string();
    let mut cmd = tokio::process::Command::new(&config.program);
    cmd.arg("--kubeconfig")
        .arg(ctx.kubeconfig)
        .args(["--namespace", ctx.namespace, "--n", &n, "--updates", &n])
        .args(["--mode", config.mode.as_str()])
        .arg("--ready-file")
        .arg(&ready)
        .arg(format!("--timeout={}s", ctx.args.timeout.as_secs().max(1)));
    if config.protobuf {
        cmd.arg("--protobuf");
    }
    if let Some(storage) = &config.storage {
        cmd.args(["--storage", storage]);
    }
    let stderr = std::fs::File::create(&err_path)
        .with_context(|| format!("creating {}", err_path.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", config.program.display()))?;
    let mut stdout = child.stdout.take().context("no stdout pipe")?;
    let reader = tokio::spawn(async move {
        let mut s = String::new();
        stdout.read_to_string(&mut s).await.map(|_| s)
    });

    let deadline = tokio::time::Instant::now() + ctx.args.timeout;
    loop {
        if ready.exists() {
            let tag = format!("{slug}-r{run}");
            dataset::touch_all(ctx.client, ctx.namespace, ctx.n, &tag, ctx.args.concurrency)
                .await?;
            break;
        }
        if child.try_wait()?.is_some() || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let status = tokio::time::timeout_at(deadline, child.wait()).await;
    let stderr_tail = || {
        let text = std::fs::read_to_string(&err_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    };
    let status = match status {
        Ok(status) => status?,
        Err(_) => {
            let _ = child.kill().await;
            bail!(
                "timed out after {:?}; stderr: {}",
                ctx.args.timeout,
                stderr_tail()
            );
        }
    };
    let out = reader.await??;
    if !status.success() {
        bail!("exited with {status}; stderr: {}", stderr_tail());
    }
    let line = PeerLine::parse_output(&out)?;
    let expect = (config.kind.name(), config.mode.as_str());
    if (line.peer.as_str(), line.mode.as_str()) != expect || line.label() != config.label() {
        bail!(
            "the peer printed {:?}, expected {:?}",
            line.label(),
            config.label()
        );
    }
    line.validate(ctx.n as u64, ctx.n as u64)?;
    Ok(line)
}

/// Deletes the dataset's pods and namespace (best effort: without a namespace controller the
/// namespace stays Terminating, the pods are gone).
///
/// # Errors
/// The first failed request.
pub async fn delete_pods(client: &Client, namespace: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("deleting the pods")?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(namespace, &DeleteParams::default())
        .await
        .context("deleting the namespace")?;
    Ok(())
}
