//! `harness/client-go-peer --follow` as a child process: client-go's informer on the pods of
//! one namespace, asked for its cache (name → resourceVersion) one line at a time.

use std::{path::Path, process::Stdio, time::Duration};

use anyhow::{Context, Result, bail};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};

use super::rig::State;

/// The running peer; killed when dropped.
pub(crate) struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

/// Builds (or reuses) the peer with `scripts/build-harness.sh` and returns its path.
fn binary() -> Result<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new(root.join("scripts/build-harness.sh"))
        .arg("client-go-peer")
        .stderr(Stdio::inherit())
        .output()
        .context("run scripts/build-harness.sh client-go-peer")?;
    if !out.status.success() {
        bail!(
            "scripts/build-harness.sh client-go-peer failed ({})",
            out.status
        );
    }
    let path = String::from_utf8(out.stdout)?.trim().to_owned();
    Ok(path.into())
}

impl Peer {
    /// Starts the peer on `namespace` through `kubeconfig` and waits for its sync line (which
    /// must report `pods` objects).
    pub(crate) async fn start(kubeconfig: &Path, namespace: &str, pods: usize) -> Result<Self> {
        let mut child = Command::new(binary()?)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--namespace",
                namespace,
                "--protobuf",
                "--follow",
                "--timeout",
                "60s",
            ])
            .args(["--n", &pods.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("start client-go-peer")?;
        let stdin = child.stdin.take().context("peer stdin")?;
        let mut lines = BufReader::new(child.stdout.take().context("peer stdout")?).lines();
        let first = tokio::time::timeout(Duration::from_secs(90), lines.next_line())
            .await
            .context("client-go-peer did not sync within 90 s")??
            .context("client-go-peer exited before its sync line")?;
        let sync: serde_json::Value = serde_json::from_str(&first)
            .with_context(|| format!("client-go-peer's sync line {first:?}"))?;
        if sync["n"].as_u64() != Some(pods as u64) {
            bail!("client-go-peer synced {} pods, expected {pods}", sync["n"]);
        }
        Ok(Self {
            child,
            stdin,
            lines,
        })
    }

    /// client-go's cache now.
    pub(crate) async fn snapshot(&mut self) -> Result<State> {
        self.stdin.write_all(b"dump\n").await?;
        self.stdin.flush().await?;
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .context("client-go-peer did not answer a snapshot request within 10 s")??
            .context("client-go-peer exited")?;
        let v: serde_json::Value = serde_json::from_str(&line)?;
        let pods = v["pods"].as_object().context("a snapshot without pods")?;
        Ok(pods
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect())
    }

    /// Closes its stdin and waits for a clean exit.
    pub(crate) async fn stop(mut self) -> Result<()> {
        drop(self.stdin);
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .context("client-go-peer did not exit within 10 s of its stdin closing")??;
        if !status.success() {
            bail!("client-go-peer exited with {status}");
        }
        Ok(())
    }
}
