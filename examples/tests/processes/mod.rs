//! Example binaries run as real processes: built with the `cargo` that runs the tests, spawned
//! with stderr to a file, scraped over HTTP on the metrics address they print, SIGKILLed or
//! SIGTERMed, and all SIGKILLed when the test ends; plus the upstream kube-apiserver's
//! kubeconfig from `KCACHE_UPSTREAM_*`, with the repository's rule: a test that needs it
//! fails without it, unless `KCACHE_UPSTREAM=skip` says there is none on purpose.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the support"
)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The upstream kube-apiserver's admin kubeconfig: `Ok(None)` (said on stderr) under
/// `KCACHE_UPSTREAM=skip`, an error when `KCACHE_UPSTREAM_KUBECONFIG` is not set.
pub(crate) fn upstream_kubeconfig() -> Result<Option<PathBuf>> {
    match std::env::var("KCACHE_UPSTREAM") {
        Ok(v) if v == "skip" => {
            let thread = std::thread::current();
            eprintln!(
                "SKIPPED: the upstream kube-apiserver run of {}, because KCACHE_UPSTREAM=skip",
                thread.name().unwrap_or("this test")
            );
            return Ok(None);
        }
        Ok(v) if !v.is_empty() => bail!("KCACHE_UPSTREAM={v:?}: the only value is `skip`"),
        _ => {}
    }
    let path = std::env::var_os("KCACHE_UPSTREAM_KUBECONFIG").context(
        "this test needs the upstream kube-apiserver: start it with scripts/kube-up.sh and \
         export its env file (scripts/test.sh does), or set KCACHE_UPSTREAM_KUBECONFIG \
         (KCACHE_UPSTREAM=skip skips it on purpose)",
    )?;
    Ok(Some(path.into()))
}

/// Builds the example `name` (a no-op when up to date) into the test executable's target
/// directory (`<target>/<profile>/deps/` → `<target>/<profile>/examples/<name>`), so it works
/// under `CARGO_TARGET_DIR` too, and returns its path.
pub(crate) fn example_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("test executable not in <target>/<profile>/deps")?;
    let target_dir = profile_dir.parent().context("no target dir")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-q", "-p", "kcache-examples", "--example", name])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    // The variables cargo sets for this test would make build scripts that watch them rebuild.
    for (key, _) in std::env::vars_os() {
        let key_str = key.to_string_lossy();
        if key_str.starts_with("CARGO_") && !matches!(&*key_str, "CARGO_HOME" | "CARGO_TARGET_DIR")
        {
            cmd.env_remove(&key);
        }
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .context("running cargo build for the example")?;
    ensure!(status.success(), "building the {name} example failed");
    let bin = profile_dir.join("examples").join(name);
    ensure!(bin.is_file(), "{} was not built", bin.display());
    Ok(bin)
}

/// One running process of an example.
#[derive(Debug)]
pub(crate) struct Process {
    /// The test's name for it.
    pub name: String,
    child: Child,
    stderr: PathBuf,
    /// Whether the test ended it (killed or terminated).
    pub ended: bool,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Spawns `bin args…`, stdout discarded, stderr to `<dir>/<name>.stderr`.
    pub(crate) fn spawn(bin: &Path, args: &[&str], dir: &Path, name: &str) -> Result<Self> {
        let stderr = dir.join(format!("{name}.stderr"));
        let child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .with_context(|| format!("spawning {}", bin.display()))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            stderr,
            ended: false,
        })
    }

    /// Its stderr so far.
    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The address after `prefix` on a line of its stderr (`metrics and probes on http://`).
    pub(crate) fn printed_addr(&self, prefix: &str) -> Option<String> {
        let text = self.stderr();
        let line = text.lines().find_map(|l| l.strip_prefix(prefix))?;
        Some(line.trim().trim_end_matches("/metrics").to_owned())
    }

    /// SIGKILL, and reaped.
    pub(crate) fn kill(&mut self) -> Result<()> {
        self.ended = true;
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// SIGTERM (it exits on its own).
    pub(crate) fn terminate(&mut self) -> Result<()> {
        self.ended = true;
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        ensure!(status.success(), "kill -TERM {} failed", self.child.id());
        Ok(())
    }

    /// Its exit status once it has exited.
    pub(crate) fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// The last `n` lines of its stderr, on the test's stderr.
    pub(crate) fn dump(&self, n: usize) {
        let text = self.stderr();
        let lines: Vec<&str> = text.lines().collect();
        eprintln!("--- {} stderr (last {n} lines) ---", self.name);
        for l in &lines[lines.len().saturating_sub(n)..] {
            eprintln!("{l}");
        }
    }
}

/// `GET path` on `addr` (plain HTTP/1.1): the status code and the body; bounded by 5 s.
pub(crate) async fn http_get(addr: &str, path: &str) -> Result<(u16, String)> {
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        s.write_all(request.as_bytes()).await?;
        let mut raw = String::new();
        s.read_to_string(&mut raw).await?;
        let (head, body) = raw.split_once("\r\n\r\n").context("an HTTP response")?;
        let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
        anyhow::Ok((code.context("a status code")?, body.to_owned()))
    };
    tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .with_context(|| format!("GET {path} on {addr} timed out"))?
}

/// The value of the first sample of a Prometheus text body whose line starts with `prefix`.
pub(crate) fn sample(text: &str, prefix: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with(prefix))?;
    line.rsplit(' ').next()?.parse().ok()
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `within`; an `Err` from `f`
/// ends the wait at once. The error names `what`.
pub(crate) async fn eventually<T>(
    what: &str,
    within: Duration,
    mut f: impl AsyncFnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = f().await? {
            return Ok(t);
        }
        if Instant::now() >= deadline {
            bail!("timed out after {within:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A fresh directory under the system's temp dir for a test's files.
pub(crate) fn temp_dir(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kcache-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
