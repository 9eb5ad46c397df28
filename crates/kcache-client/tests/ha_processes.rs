//! Three `ha_controller` processes (examples/ha_controller.rs) on one Lease: exactly one
//! leads at a time, the leader annotates labelled ConfigMaps, a SIGKILLed leader is replaced
//! within the lease duration plus a retry, a SIGTERMed one (which releases the lease) within
//! a retry; each new leader reconciles from the cache it synced as a standby (its `/metrics`
//! show one initial sync and no relist after the takeover). Against the embedded server (a kubeconfig written to a temp dir) and, in its own
//! test, the upstream kube-apiserver (`KCACHE_UPSTREAM_*`; fails without it unless
//! `KCACHE_UPSTREAM=skip`).
//!
//! The binary: this test runs `cargo build -p kcache-examples --example ha_controller` with
//! the `cargo` that runs the tests (`$CARGO`) into the same target directory as the test
//! executable (`<target>/<profile>/deps/` → `<target>/<profile>/examples/ha_controller`), so
//! it works under `CARGO_TARGET_DIR` too. Every child is SIGKILLed when the test ends
//! ([`Fleet`]'s `Drop`). Lease 4 s, renew deadline 3 s, retry period 1 s; the whole
//! scenario is bounded by `SCENARIO_BOUND`.

mod common;

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, ensure};
use common::TestServer;
use serde_json::json;

const LEASE_S: u64 = 4;
const RENEW_S: u64 = 3;
const RETRY_S: u64 = 1;
const SCENARIO_BOUND: Duration = Duration::from_secs(55);

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// A status line of a replica.
#[derive(Clone, Debug)]
struct Line {
    kind: String,
    id: String,
    ms: u128,
}

struct Replica {
    id: String,
    child: Child,
    /// When the test killed it (SIGKILL), if it did.
    killed_ms: Option<u128>,
}

/// The replicas, and every status line they printed; kills them all on drop.
struct Fleet {
    replicas: Vec<Replica>,
    lines: Arc<Mutex<Vec<Line>>>,
    dir: PathBuf,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for r in &mut self.replicas {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}

impl Fleet {
    fn spawn(&mut self, bin: &Path, kubeconfig: &Path, ns: &str, id: &str) -> Result<()> {
        let stderr = std::fs::File::create(self.dir.join(format!("{id}.stderr")))?;
        let mut child = Command::new(bin)
            .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
            .args(["--namespace", ns, "--lease-name", "ha-it", "--identity", id])
            .args(["--lease-duration", &LEASE_S.to_string()])
            .args(["--renew-deadline", &RENEW_S.to_string()])
            .args(["--retry-period", &RETRY_S.to_string()])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("spawning ha_controller")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let lines = Arc::clone(&self.lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let parts: Vec<&str> = line.split(' ').collect();
                if let [kind, id, ms] = parts[..]
                    && let Ok(ms) = ms.parse()
                {
                    lines.lock().unwrap().push(Line {
                        kind: kind.to_owned(),
                        id: id.to_owned(),
                        ms,
                    });
                } else {
                    eprintln!("unexpected stdout line: {line:?}");
                }
            }
        });
        self.replicas.push(Replica {
            id: id.to_owned(),
            child,
            killed_ms: None,
        });
        Ok(())
    }

    fn lines(&self) -> Vec<Line> {
        self.lines.lock().unwrap().clone()
    }

    /// Who leads now according to the lines: LEADING without a later STOPPED, not killed.
    fn leaders(&self) -> Vec<String> {
        let lines = self.lines();
        self.replicas
            .iter()
            .filter(|r| r.killed_ms.is_none())
            .filter(|r| {
                let last = lines
                    .iter()
                    .rfind(|l| l.id == r.id && (l.kind == "LEADING" || l.kind == "STOPPED"));
                last.is_some_and(|l| l.kind == "LEADING")
            })
            .map(|r| r.id.clone())
            .collect()
    }

    /// `id`'s reflector counters from its `/metrics` (the address it printed on stderr):
    /// (initial syncs by LIST or streaming list, relists).
    fn syncs(&self, id: &str) -> Result<(u64, u64)> {
        let log = std::fs::read_to_string(self.dir.join(format!("{id}.stderr")))?;
        let addr = log
            .lines()
            .find_map(|l| {
                l.strip_prefix("metrics on http://")?
                    .strip_suffix("/metrics")
            })
            .with_context(|| format!("{id} printed no metrics address"))?;
        let mut conn = std::net::TcpStream::connect(addr)?;
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        std::io::Write::write_all(
            &mut conn,
            b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )?;
        let mut body = String::new();
        std::io::Read::read_to_string(&mut conn, &mut body)?;
        let total = |family: &str| -> u64 {
            body.lines()
                .filter(|l| l.starts_with(&format!("{family}{{")))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>() as u64
        };
        ensure!(
            body.contains("kcache_reflector_lists_total"),
            "{id}: no reflector metrics in: {body}"
        );
        Ok((
            total("kcache_reflector_lists_total") + total("kcache_reflector_watch_lists_total"),
            total("kcache_reflector_relists_total"),
        ))
    }

    /// The new leader `id` synced its cache before it led (SYNCED before LEADING), and that was
    /// its one and only sync (no list after the takeover): a warm standby.
    fn check_warm(&self, id: &str) -> Result<()> {
        let lines = self.lines();
        let first = |kind: &str| lines.iter().find(|l| l.id == id && l.kind == kind);
        let (synced, leading) = (first("SYNCED"), first("LEADING"));
        ensure!(
            matches!((synced, leading), (Some(s), Some(l)) if s.ms < l.ms),
            "{id} did not sync before it led: SYNCED {synced:?}, LEADING {leading:?}"
        );
        let (syncs, relists) = self.syncs(id)?;
        eprintln!("{id}: {syncs} initial sync(s), {relists} relist(s) after taking over");
        ensure!(
            syncs == 1 && relists == 0,
            "{id} listed after it took over: {syncs} syncs, {relists} relists (want 1 and 0)"
        );
        Ok(())
    }

    fn replica(&mut self, id: &str) -> &mut Replica {
        self.replicas.iter_mut().find(|r| r.id == id).unwrap()
    }

    /// The LEADING/STOPPED intervals never overlap across identities.
    fn check_no_overlap(&self) -> Result<()> {
        let lines = self.lines();
        let mut intervals = Vec::new();
        for r in &self.replicas {
            let mut start = None;
            for l in lines.iter().filter(|l| l.id == r.id) {
                match l.kind.as_str() {
                    "LEADING" => start = Some(l.ms),
                    "STOPPED" => {
                        if let Some(s) = start.take() {
                            intervals.push((s, l.ms, r.id.clone()));
                        }
                    }
                    _ => {}
                }
            }
            if let Some(s) = start {
                intervals.push((s, r.killed_ms.unwrap_or(u128::MAX), r.id.clone()));
            }
        }
        intervals.sort();
        for w in intervals.windows(2) {
            ensure!(
                w[1].0 >= w[0].1,
                "two leaders at once: {:?} and {:?}",
                w[0],
                w[1]
            );
        }
        Ok(())
    }

    fn dump_stderr(&self) {
        for r in &self.replicas {
            let text = std::fs::read_to_string(self.dir.join(format!("{}.stderr", r.id)))
                .unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            eprintln!("--- {} stderr (last lines) ---", r.id);
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

async fn annotation_of(s: &TestServer, name: &str) -> Result<Option<String>> {
    let cm = s
        .request("GET", &format!("{}/{name}", s.configmaps()), None)
        .await?;
    Ok(cm["metadata"]["annotations"]["kcache.dev/reconciled-by"]
        .as_str()
        .map(str::to_owned))
}

async fn scenario(s: &TestServer, kubeconfig: &Path, dir: PathBuf) -> Result<()> {
    let bin = common::example_binary("ha_controller")?;
    let mut fleet = Fleet {
        replicas: Vec::new(),
        lines: Arc::default(),
        dir,
    };
    let out = tokio::time::timeout(SCENARIO_BOUND, run(s, kubeconfig, &bin, &mut fleet)).await;
    let result =
        out.unwrap_or_else(|_| Err(anyhow::anyhow!("scenario exceeded {SCENARIO_BOUND:?}")));
    if result.is_err() {
        eprintln!("{}: lines: {:#?}", s.name, fleet.lines());
        fleet.dump_stderr();
    }
    result
}

async fn run(s: &TestServer, kubeconfig: &Path, bin: &Path, fleet: &mut Fleet) -> Result<()> {
    let labels = json!({"kcache.dev/demo": "true"});
    for id in ["ha-0", "ha-1", "ha-2"] {
        fleet.spawn(bin, kubeconfig, &s.ns, id)?;
    }
    common::eventually(
        "3 SYNCED and one leader",
        Duration::from_secs(20),
        async || {
            let synced = fleet.lines().iter().filter(|l| l.kind == "SYNCED").count();
            Ok((synced == 3 && fleet.leaders().len() == 1).then_some(()))
        },
    )
    .await?;
    let first = fleet.leaders()[0].clone();

    // The leader annotates a labelled ConfigMap; an unlabelled one is left alone.
    s.create_cm("cm-1", labels.clone(), json!({"k": "v"}))
        .await?;
    s.create_cm("plain", json!({}), json!({"k": "v"})).await?;
    let by = common::eventually("cm-1 annotated", Duration::from_secs(10), async || {
        annotation_of(s, "cm-1").await
    })
    .await?;
    ensure!(by == first, "cm-1 annotated by {by}, the leader is {first}");

    // SIGKILL the leader; a standby takes over after the lease expires.
    let killed_ms = unix_ms();
    {
        let r = fleet.replica(&first);
        r.child.kill()?;
        r.child.wait()?;
        r.killed_ms = Some(killed_ms);
    }
    s.create_cm("cm-2", labels.clone(), json!({"k": "v"}))
        .await?;
    let bound = Duration::from_secs(LEASE_S + RETRY_S + 3);
    let second = common::eventually(
        "a new leader after SIGKILL",
        bound + Duration::from_secs(2),
        async || Ok(fleet.leaders().first().cloned()),
    )
    .await?;
    let took = leading_since(fleet, &second, killed_ms)?;
    eprintln!(
        "{}: failover after SIGKILL of {first}: {second} LEADING after {took} ms \
         (lease {LEASE_S} s, retry {RETRY_S} s)",
        s.name
    );
    ensure!(
        took <= bound.as_millis(),
        "takeover after SIGKILL took {took} ms > {bound:?}"
    );
    let by = common::eventually(
        "cm-2 annotated by the new leader",
        Duration::from_secs(10),
        async || Ok(annotation_of(s, "cm-2").await?.filter(|by| *by == second)),
    )
    .await?;
    ensure!(by == second);
    fleet.check_warm(&second)?;
    ensure!(
        annotation_of(s, "plain").await?.is_none(),
        "unlabelled ConfigMap annotated"
    );

    // SIGTERM the new leader: it releases the lease, the last replica takes over at once.
    let term_ms = unix_ms();
    let pid = fleet.replica(&second).child.id();
    let st = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    ensure!(st.success(), "kill -TERM failed");
    let bound = Duration::from_secs(RETRY_S + 2);
    let third = common::eventually(
        "a new leader after SIGTERM",
        bound + Duration::from_secs(2),
        async || Ok(fleet.leaders().into_iter().find(|l| *l != second)),
    )
    .await?;
    let took = leading_since(fleet, &third, term_ms)?;
    eprintln!(
        "{}: handover after SIGTERM of {second}: {third} LEADING after {took} ms",
        s.name
    );
    ensure!(
        took <= bound.as_millis(),
        "takeover after SIGTERM took {took} ms > {bound:?}"
    );
    let status = common::eventually(
        "the SIGTERMed replica to exit",
        Duration::from_secs(10),
        async || Ok(fleet.replica(&second).child.try_wait()?),
    )
    .await?;
    ensure!(status.success(), "{second} exited with {status}");
    ensure!(
        fleet
            .lines()
            .iter()
            .any(|l| l.id == second && l.kind == "STOPPED"),
        "{second} printed no STOPPED"
    );
    s.create_cm("cm-3", labels, json!({"k": "v"})).await?;
    common::eventually(
        "cm-3 annotated by the third leader",
        Duration::from_secs(10),
        async || Ok(annotation_of(s, "cm-3").await?.filter(|by| *by == third)),
    )
    .await?;
    fleet.check_warm(&third)?;
    fleet.check_no_overlap()?;
    ensure!(
        fleet.leaders() == [third.clone()],
        "leaders: {:?}",
        fleet.leaders()
    );
    Ok(())
}

/// Milliseconds from `since` to `id`'s last LEADING line.
fn leading_since(fleet: &Fleet, id: &str, since: u128) -> Result<u128> {
    let ms = fleet
        .lines()
        .iter()
        .rfind(|l| l.id == id && l.kind == "LEADING")
        .context("no LEADING line")?
        .ms;
    Ok(ms.saturating_sub(since))
}

fn temp_dir(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kcache-ha-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_fail_over_on_the_embedded_server() -> Result<()> {
    let s = TestServer::embedded().await?;
    let dir = temp_dir("embedded")?;
    let kubeconfig = dir.join("kubeconfig");
    s.embedded_server()
        .context("embedded")?
        .write_kubeconfig(&kubeconfig)?;
    let r = scenario(&s, &kubeconfig, dir.clone()).await;
    if r.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_fail_over_on_the_upstream_kube_apiserver() -> Result<()> {
    let Some(s) = TestServer::upstream().await? else {
        return common::upstream_missing();
    };
    let kubeconfig = s.upstream_info().context("upstream")?.kubeconfig.clone();
    let dir = temp_dir("upstream")?;
    let r = scenario(&s, &kubeconfig, dir.clone()).await;
    if r.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    r
}
