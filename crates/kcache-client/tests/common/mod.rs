//! The integration tests' server fixture: the same test code runs against the embedded
//! `kcache-apiserver` (started in-process on 127.0.0.1:0) and, when requested, against the
//! upstream kube-apiserver described by `KCACHE_UPSTREAM_*` (written by `scripts/kube-up.sh`).
//!
//! The upstream is requested when `KCACHE_UPSTREAM_KUBECONFIG` is set, or `CI` or
//! `KCACHE_REQUIRE_UPSTREAM` is; requested but missing or unreachable is a failure, never a skip.
//! Upstream-only tests fail without it too, unless `KCACHE_UPSTREAM=skip` says on purpose that
//! there is no upstream server (`scripts/quick-test.sh`): then the upstream runs are skipped, each
//! with a line on stderr.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the fixture"
)]

/// `protobuf.json` of the recorded fixtures (shared with kcache-proto's tests).
#[path = "../../../kcache-proto/tests/support/protobuf_fixture.rs"]
pub(crate) mod protobuf_fixture;

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use kcache_apiserver::{ApiServer, FaultHandle, RunningServer};
use kcache_client::Client;
use serde_json::{Value, json};

/// One API server under test.
pub(crate) struct TestServer {
    /// `embedded` or `upstream`.
    pub name: &'static str,
    /// A client with full rights.
    pub client: Client,
    /// A namespace created for this test.
    pub ns: String,
    embedded: Option<RunningServer>,
    upstream: Option<Upstream>,
}

/// What the env file says about the upstream server.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The unprivileged user's kubeconfig (authenticated, no RBAC bindings).
    pub alice_kubeconfig: Option<PathBuf>,
    /// The server URL.
    pub url: String,
}

/// The fixtures recorded from kube-apiserver v1.36, in the repository's
/// `testdata/kube-apiserver-v1.36/`. Missing, they fail the test (never a skip).
pub(crate) fn fixtures_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/kube-apiserver-v1.36"
    ));
    assert!(
        dir.join("README.md").is_file(),
        "the recorded kube-apiserver fixtures are missing: expected them in {} \
         (testdata/kube-apiserver-v1.36/ at the repository root)",
        dir.display()
    );
    dir
}

/// A file of those fixtures; missing, it fails the test.
pub(crate) fn fixture_file(name: &str) -> PathBuf {
    let path = fixtures_dir().join(name);
    assert!(
        path.is_file(),
        "recorded fixture missing: {}",
        path.display()
    );
    path
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Whether `KCACHE_UPSTREAM=skip` is set (any other value is refused).
pub(crate) fn upstream_skip_requested() -> bool {
    match std::env::var("KCACHE_UPSTREAM") {
        Ok(v) if v == "skip" => true,
        Ok(v) if !v.is_empty() => panic!("KCACHE_UPSTREAM={v:?}: the only value is `skip`"),
        _ => false,
    }
}

/// Says on stderr, past the test harness's output capture, that this test's upstream run is
/// skipped.
fn say_upstream_skipped() {
    use std::io::Write as _;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: the upstream kube-apiserver run of {test}, because KCACHE_UPSTREAM=skip"
    );
}

/// For an upstream-only test that found no upstream server: `Ok` (skipped, said on stderr by
/// [`upstream_env`]) under `KCACHE_UPSTREAM=skip`, otherwise the failure.
pub(crate) fn upstream_missing() -> Result<()> {
    if upstream_skip_requested() {
        return Ok(());
    }
    bail!(
        "this test needs the upstream kube-apiserver: start it with scripts/kube-up.sh and export \
         its env file (scripts/test.sh does), or set KCACHE_UPSTREAM_KUBECONFIG \
         (KCACHE_UPSTREAM=skip skips it on purpose)"
    )
}

fn upstream_requested() -> bool {
    std::env::var_os("KCACHE_UPSTREAM_KUBECONFIG").is_some()
        || std::env::var_os("KCACHE_REQUIRE_UPSTREAM").is_some_and(|v| v != "0")
        || std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The upstream server's description, or an error when it is requested but missing.
/// `None` when it is not requested, or skipped by `KCACHE_UPSTREAM=skip` (said on stderr).
pub(crate) fn upstream_env() -> Result<Option<Upstream>> {
    if upstream_skip_requested() {
        say_upstream_skipped();
        return Ok(None);
    }
    if !upstream_requested() {
        return Ok(None);
    }
    let kubeconfig = std::env::var_os("KCACHE_UPSTREAM_KUBECONFIG").context(
        "the upstream kube-apiserver is requested (CI / KCACHE_REQUIRE_UPSTREAM) but \
         KCACHE_UPSTREAM_KUBECONFIG is not set: run scripts/kube-up.sh and source its env file",
    )?;
    Ok(Some(Upstream {
        kubeconfig: kubeconfig.into(),
        alice_kubeconfig: std::env::var_os("KCACHE_UPSTREAM_ALICE_KUBECONFIG").map(PathBuf::from),
        url: std::env::var("KCACHE_UPSTREAM_URL").unwrap_or_default(),
    }))
}

impl TestServer {
    /// The embedded server, fresh for this test.
    pub(crate) async fn embedded() -> Result<Self> {
        Self::embedded_with(ApiServer::builder()).await
    }

    /// The embedded server built by `builder`.
    pub(crate) async fn embedded_with(builder: kcache_apiserver::ApiServerBuilder) -> Result<Self> {
        let server = builder.build().start().await?;
        let client = Client::from_url(&server.url())?;
        let mut s = Self {
            name: "embedded",
            client,
            ns: String::new(),
            embedded: Some(server),
            upstream: None,
        };
        s.ns = s.create_namespace().await?;
        Ok(s)
    }

    /// The upstream server, if requested (an error if requested but unusable).
    pub(crate) async fn upstream() -> Result<Option<Self>> {
        let Some(up) = upstream_env()? else {
            return Ok(None);
        };
        let client = Client::from_kubeconfig(&up.kubeconfig).await?;
        let mut s = Self {
            name: "upstream",
            client,
            ns: String::new(),
            embedded: None,
            upstream: Some(up),
        };
        s.ns = s
            .create_namespace()
            .await
            .context("the upstream kube-apiserver is requested but does not answer")?;
        Ok(Some(s))
    }

    /// Every server the tests must run against: the embedded one, plus the upstream when
    /// requested.
    pub(crate) async fn all() -> Result<Vec<Self>> {
        let mut out = vec![Self::embedded().await?];
        out.extend(Self::upstream().await?);
        Ok(out)
    }

    /// Fault injection (embedded only).
    pub(crate) fn faults(&self) -> Option<&FaultHandle> {
        self.embedded.as_ref().map(RunningServer::faults)
    }

    /// The upstream description (upstream only).
    pub(crate) fn upstream_info(&self) -> Option<&Upstream> {
        self.upstream.as_ref()
    }

    /// The embedded server (embedded only).
    pub(crate) fn embedded_server(&self) -> Option<&RunningServer> {
        self.embedded.as_ref()
    }

    /// Checks the wire format a built-in kind's lists and watches came in: protobuf only with
    /// the feature `protobuf` (the upstream kube-apiserver and the embedded server both serve
    /// it), JSON only without it.
    pub(crate) fn ensure_wire(&self, stats: &kcache_client::WireStats) -> Result<()> {
        let want_protobuf = cfg!(feature = "protobuf");
        let (pb, json) = (stats.protobuf(), stats.json());
        let ok = if want_protobuf {
            pb > 0 && json == 0
        } else {
            json > 0 && pb == 0
        };
        if !ok {
            bail!(
                "{}: expected {} responses only, got {pb} protobuf and {json} JSON",
                self.name,
                if want_protobuf { "protobuf" } else { "JSON" }
            );
        }
        Ok(())
    }

    async fn create_namespace(&self) -> Result<String> {
        let ns = format!(
            "kcache-it-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        self.request(
            "POST",
            "/api/v1/namespaces",
            Some(json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name": ns}})),
        )
        .await?;
        Ok(ns)
    }

    /// The configmaps collection path of the test namespace.
    pub(crate) fn configmaps(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.ns)
    }

    /// Creates a ConfigMap in the test namespace.
    pub(crate) async fn create_cm(&self, name: &str, labels: Value, data: Value) -> Result<Value> {
        let body = json!({"apiVersion":"v1","kind":"ConfigMap",
            "metadata":{"name": name, "labels": labels}, "data": data});
        self.request("POST", &self.configmaps(), Some(body)).await
    }

    /// Replaces a ConfigMap's data (read-modify-write).
    pub(crate) async fn update_cm(&self, name: &str, data: Value) -> Result<Value> {
        let path = format!("{}/{name}", self.configmaps());
        let mut cm = self.request("GET", &path, None).await?;
        cm["data"] = data;
        self.request("PUT", &path, Some(cm)).await
    }

    /// Deletes a ConfigMap.
    pub(crate) async fn delete_cm(&self, name: &str) -> Result<Value> {
        let path = format!("{}/{name}", self.configmaps());
        self.request("DELETE", &path, None).await
    }

    /// A raw JSON request through the same transport; non-2xx is an error.
    pub(crate) async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let body = body
            .map(|b| serde_json::to_vec(&b))
            .transpose()?
            .unwrap_or_default();
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(kube_client::client::Body::from(body))?;
        let resp = self.client.kube().send(req).await?;
        let status = resp.status();
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await?
            .to_bytes();
        if !status.is_success() {
            bail!(
                "{method} {path} on {}: {status}: {}",
                self.name,
                String::from_utf8_lossy(&bytes)
            );
        }
        Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
}

/// Builds the example `name` of kcache-examples (a no-op when up to date) with the `cargo`
/// that runs the tests, into the test executable's target directory, and returns its path.
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
    // The variables cargo sets for this test (CARGO_PKG_*, CARGO_MANIFEST_DIR, ...) would make
    // build scripts that watch them rebuild on every run.
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
    let started = Instant::now();
    let status = cmd
        .status()
        .context("running cargo build for the example")?;
    eprintln!("cargo build of the example: {:?}", started.elapsed());
    ensure!(status.success(), "building the {name} example failed");
    let bin = profile_dir.join("examples").join(name);
    ensure!(bin.is_file(), "{} was not built", bin.display());
    Ok(bin)
}

/// A kube-apiserver + etcd of this test's own, started by `scripts/kube-up.sh` with extra
/// feature gates (`KCACHE_FEATURE_GATES`) in a fresh state dir; stopped (and the dir
/// removed) on drop.
pub(crate) struct OwnUpstream {
    state: PathBuf,
}

impl Drop for OwnUpstream {
    fn drop(&mut self) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let _ = Command::new(root.join("scripts/kube-down.sh"))
            .arg("all")
            .env("KCACHE_UPSTREAM_STATE", &self.state)
            .status();
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

impl OwnUpstream {
    /// The state dir (`scripts/kube-up.sh etcd|apiserver` restarts a server of it).
    pub(crate) fn state(&self) -> &Path {
        &self.state
    }
}

impl TestServer {
    /// A fresh upstream kube-apiserver with `feature_gates` (e.g.
    /// `ShardedListAndWatch=true`), when the upstream is requested (as for
    /// [`TestServer::upstream`]); the harness binaries must be built (`scripts/test.sh` does).
    pub(crate) async fn own_upstream(feature_gates: &str) -> Result<Option<(Self, OwnUpstream)>> {
        if upstream_env()?.is_none() {
            return Ok(None);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let state = std::env::temp_dir().join(format!(
            "kcache-own-kube-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&state)?;
        let guard = OwnUpstream {
            state: state.clone(),
        };
        let started = Instant::now();
        let out = Command::new(root.join("scripts/kube-up.sh"))
            .env("KCACHE_UPSTREAM_STATE", &state)
            .env("KCACHE_FEATURE_GATES", feature_gates)
            .env_remove("KCACHE_APISERVER_EXTRA_ARGS")
            .output()
            .context("running scripts/kube-up.sh")?;
        ensure!(
            out.status.success(),
            "scripts/kube-up.sh with {feature_gates} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "own kube-apiserver with {feature_gates} up in {:?}",
            started.elapsed()
        );
        let kubeconfig = state.join("admin.kubeconfig");
        let client = Client::from_kubeconfig(&kubeconfig).await?;
        let mut s = Self {
            name: "upstream (own)",
            client,
            ns: String::new(),
            embedded: None,
            upstream: Some(Upstream {
                kubeconfig,
                alice_kubeconfig: None,
                url: String::new(),
            }),
        };
        s.ns = s.create_namespace().await?;
        Ok(Some((s, guard)))
    }
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `within`; an `Err` from `f` ends
/// the wait at once. The error names `what`.
pub(crate) async fn eventually<T>(
    what: &str,
    within: Duration,
    f: impl AsyncFnMut() -> Result<Option<T>>,
) -> Result<T> {
    eventually_every(Duration::from_millis(50), what, within, f).await
}

/// [`eventually`], polling every `every`.
pub(crate) async fn eventually_every<T>(
    every: Duration,
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
        tokio::time::sleep(every).await;
    }
}
