//! One peer process: started with the run's flags, driven through its sync and the update
//! phase, its line read and checked, and (when measured) what it cost the API server.

use std::{path::PathBuf, process::Stdio, time::Duration};

use anyhow::{Context as _, bail};
use kcache_bench::{PeerLine, dataset, server_cost};
use tokio::{io::AsyncReadExt, process::Child};

use super::runner::{Config, Context, Record, ServerCost};

/// The file a peer creates once synced.
fn ready_file(ctx: &Context<'_>, tag: &str) -> PathBuf {
    ctx.args.out.join("logs").join(format!("{tag}.ready"))
}

/// Its stderr.
fn stderr_file(ctx: &Context<'_>, tag: &str) -> PathBuf {
    ctx.args.out.join("logs").join(format!("{tag}.stderr"))
}

/// Starts the peer of `config` with the run's flags; `tag` names its files.
fn spawn(ctx: &Context<'_>, config: &Config, tag: &str, updates: usize) -> anyhow::Result<Child> {
    let ready = ready_file(ctx, tag);
    let err_path = stderr_file(ctx, tag);
    let _ = std::fs::remove_file(&ready);
    let n = ctx.n.to_string();
    let updates = updates.to_string();
    let mut cmd = tokio::process::Command::new(&config.program);
    cmd.arg("--kubeconfig")
        .arg(ctx.kubeconfig)
        .args([
            "--namespace",
            ctx.namespace,
            "--n",
            &n,
            "--updates",
            &updates,
        ])
        .args(["--mode", config.mode.as_str()])
        .args(["--dataset", ctx.args.dataset.as_str()])
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
    cmd.spawn()
        .with_context(|| format!("starting {}", config.program.display()))
}

/// A started peer: its process and the task reading its stdout.
pub(super) struct Peer {
    child: Child,
    stdout: tokio::task::JoinHandle<std::io::Result<String>>,
    ready: PathBuf,
    err_path: PathBuf,
    updates: usize,
}

impl Peer {
    /// Starts the peer of `config`; `tag` names its files (unique per run and fleet member).
    /// `updates` is the number of update events it waits for after its sync.
    pub(super) fn start(
        ctx: &Context<'_>,
        config: &Config,
        tag: &str,
        updates: usize,
    ) -> anyhow::Result<Self> {
        let mut child = spawn(ctx, config, tag, updates)?;
        let mut out = child.stdout.take().context("no stdout pipe")?;
        let stdout = tokio::spawn(async move {
            let mut s = String::new();
            out.read_to_string(&mut s).await.map(|_| s)
        });
        Ok(Self {
            child,
            stdout,
            ready: ready_file(ctx, tag),
            err_path: stderr_file(ctx, tag),
            updates,
        })
    }

    /// Waits until the peer has synced (its ready file exists); `false` when it exited first
    /// or the deadline passed.
    pub(super) async fn synced(&mut self, deadline: tokio::time::Instant) -> anyhow::Result<bool> {
        loop {
            if self.ready.exists() {
                return Ok(true);
            }
            if self.child.try_wait()?.is_some() || tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for the peer's exit and checks its line against `config` and the run's N.
    pub(super) async fn finish(
        mut self,
        ctx: &Context<'_>,
        config: &Config,
        deadline: tokio::time::Instant,
    ) -> anyhow::Result<PeerLine> {
        let status = tokio::time::timeout_at(deadline, self.child.wait()).await;
        let err_path = self.err_path.clone();
        let stderr_tail = || {
            let text = std::fs::read_to_string(&err_path).unwrap_or_default();
            stderr_summary(&text)
        };
        let status = match status {
            Ok(status) => status?,
            Err(_) => {
                let _ = self.child.kill().await;
                bail!(
                    "timed out after {:?}; stderr: {}",
                    ctx.args.timeout,
                    stderr_tail()
                );
            }
        };
        let out = self.stdout.await??;
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
        line.validate(ctx.n as u64, self.updates as u64)?;
        Ok(line)
    }
}

/// Runs `config` once on the context's dataset and records the outcome.
pub(super) async fn run_one(ctx: &Context<'_>, config: &Config, run: usize) -> Record {
    let tag = format!("{}-n{}-r{run}", config.label().replace(' ', "-"), ctx.n);
    let (line, server) = match run_peer(ctx, config, &tag).await {
        Ok((line, server)) => (Ok(line), server),
        Err(e) => (Err(format!("{e:#}")), None),
    };
    Record {
        n: ctx.n,
        run,
        label: config.label(),
        peer: config.kind,
        mode: config.mode.as_str(),
        storage: config.storage.clone(),
        protobuf: config.protobuf,
        line,
        server,
    }
}

/// Runs one peer to its end: its sync, then (unless `config` is a limit line or the run asks
/// for none) the updater's patches; with a server to measure, the server's cost of each phase.
pub(super) async fn run_peer(
    ctx: &Context<'_>,
    config: &Config,
    tag: &str,
) -> anyhow::Result<(PeerLine, Option<ServerCost>)> {
    // A limit line only syncs: no updates are sent to it or expected from it.
    let updates = if config.is_limit() { 0 } else { ctx.updates };
    let deadline = tokio::time::Instant::now() + ctx.args.timeout;
    let sync_phase = ctx.server.map(server_cost::Server::phase).transpose()?;
    let mut peer = Peer::start(ctx, config, tag, updates)?;
    let synced = peer.synced(deadline).await?;
    let sync = sync_phase.map(server_cost::Phase::finish).transpose()?;
    let mut update = None;
    if synced && updates > 0 {
        let phase = ctx.server.map(server_cost::Server::phase).transpose()?;
        dataset::touch_all(
            ctx.client,
            ctx.args.dataset,
            ctx.namespace,
            updates,
            tag,
            ctx.args.concurrency,
            ctx.args.update_rate,
        )
        .await?;
        let line = peer.finish(ctx, config, deadline).await?;
        update = phase.map(server_cost::Phase::finish).transpose()?;
        let server = sync.map(|sync| ServerCost { sync, update });
        return Ok((line, server));
    }
    let line = peer.finish(ctx, config, deadline).await?;
    Ok((line, sync.map(|sync| ServerCost { sync, update })))
}

/// What a failed peer said: its error report (`Error: …` and its causes, as `anyhow` prints
/// them from `main`, or a panic message), else its last 5 lines of stderr; never a backtrace
/// alone.
fn stderr_summary(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.starts_with("Error: ") || l.contains("panicked at"));
    let picked: Vec<&str> = match start {
        Some(i) => lines[i..]
            .iter()
            .take_while(|l| !l.trim_start().starts_with("Stack backtrace:"))
            .take(12)
            .copied()
            .collect(),
        None => lines[lines.len().saturating_sub(5)..].to_vec(),
    };
    picked.join(" | ")
}

#[cfg(test)]
mod stderr_tests {
    use super::stderr_summary;

    #[test]
    fn a_failed_peer_is_reported_by_its_error_not_the_end_of_its_backtrace() {
        let text = "log line\nError: the list answered 500\n\nCaused by:\n    boom\n\n\
                    Stack backtrace:\n   0: main\n   1: _start\n";
        let summary = stderr_summary(text);
        assert!(
            summary.starts_with("Error: the list answered 500"),
            "{summary}"
        );
        assert!(
            summary.contains("boom") && !summary.contains("_start"),
            "{summary}"
        );
        assert_eq!(stderr_summary("a\nb"), "a | b");
    }
}
