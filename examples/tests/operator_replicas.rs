//! Three replicas of the operator example (examples/operator.rs) as real processes on one
//! Lease, on the embedded server (in this process, reached through a kubeconfig) and, in its
//! own test, on the upstream kube-apiserver (`KCACHE_UPSTREAM_*`; fails without it unless
//! `KCACHE_UPSTREAM=skip`).
//!
//! The scenario: the three sync (all `/readyz` 200) and one leads (its
//! `leader_election_master_status` is 1); two Websites are reconciled; the leader is
//! SIGKILLed, and meanwhile three Websites are created and one deleted; a standby takes over
//! within the lease duration + renew deadline + 10 s, reconciles the new ones from the cache
//! it kept warm, and runs the deleted one's cleanup; it is then SIGTERMed: it releases the
//! Lease and exits 0, and the last replica takes over in less than the lease duration minus
//! a retry period (faster than an expired lease could be taken), and reconciles one more.
//! Every Website then has exactly one `Created` Event (series counted), from the replica
//! that led when it was created, one ConfigMap and one Deployment, each with one owner
//! reference (to it); once all are deleted, each cleanup ran exactly once (one `Deleted`
//! Event each) and no owned object is left.
//!
//! Lease 6 s, renew deadline 4 s, retry period 0.8 s (`--lease-duration 6`); a scenario is
//! bounded by [`SCENARIO_BOUND`].

#[allow(dead_code, reason = "the example's main and CLI are not used here")]
#[path = "../operator.rs"]
mod operator;
mod processes;

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::{
    api::{
        apps::v1::Deployment, coordination::v1::Lease, core::v1::ConfigMap, core::v1::Namespace,
        events::v1::Event,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kcache_apiserver::ApiServer;
use kube_client::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use operator::{FINALIZER, Website, WebsiteSpec};
use processes::{Process, eventually, http_get, sample};

const LEASE: Duration = Duration::from_secs(6);
const RENEW: Duration = Duration::from_secs(4);
const RETRY: Duration = Duration::from_millis(800);
/// A SIGKILLed leader is replaced within this (the lease runs out, then a retry).
const KILL_BOUND: Duration = Duration::from_secs(6 + 4 + 10);
/// A SIGTERMed leader releases the Lease: replaced before an expired one could be taken.
const TERM_BOUND: Duration = Duration::from_millis(6000 - 800);
const SCENARIO_BOUND: Duration = Duration::from_secs(85);
/// A guard against a hung wait; not a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(30);
const LEADING: &str = r#"leader_election_master_status{name="website-operator"}"#;

/// The server under test, as the test and the replicas reach it.
struct Cluster {
    name: &'static str,
    kubeconfig: PathBuf,
    kube: Client,
    ns: String,
}

/// A replica and the address of its metrics and probes.
struct Replica {
    process: Process,
    addr: String,
}

impl Cluster {
    async fn new(name: &'static str, kubeconfig: PathBuf) -> Result<Self> {
        let kube = kcache_client::Client::from_kubeconfig(&kubeconfig)
            .await?
            .kube()
            .clone();
        let ns = format!("op-replicas-{name}-{}", std::process::id());
        let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
        Api::<Namespace>::all(kube.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating the namespace on {name}"))?;
        // Cluster-wide, shared with other tests of the same server: already there is fine.
        let crd: CustomResourceDefinition = serde_json::from_value(operator::crd())?;
        match Api::<CustomResourceDefinition>::all(kube.clone())
            .create(&PostParams::default(), &crd)
            .await
        {
            Err(kube_client::Error::Api(e)) if e.code == 409 => {}
            other => drop(other.context("creating the Website CRD")?),
        }
        let cluster = Self {
            name,
            kubeconfig,
            kube,
            ns,
        };
        eventually("Websites served", HANG_GUARD, async || {
            Ok(cluster.websites().list(&ListParams::default()).await.ok())
        })
        .await?;
        Ok(cluster)
    }

    fn websites(&self) -> Api<Website> {
        Api::namespaced(self.kube.clone(), &self.ns)
    }

    async fn create(&self, name: &str) -> Result<()> {
        let spec = WebsiteSpec {
            image: "nginx:1.27".into(),
            replicas: 1,
            content: format!("<h1>{name}</h1>"),
        };
        self.websites()
            .create(&PostParams::default(), &Website::new(name, spec))
            .await?;
        Ok(())
    }

    async fn delete(&self, name: &str) -> Result<()> {
        self.websites()
            .delete(name, &DeleteParams::default())
            .await?;
        Ok(())
    }

    /// Waits until every Website of `names` carries the finalizer and the status of its
    /// generation.
    async fn reconciled(&self, names: &[&str]) -> Result<()> {
        for name in names {
            eventually(&format!("{name} reconciled"), HANG_GUARD, async || {
                let site = self.websites().get_opt(name).await?;
                Ok(site.filter(|s| {
                    let status = s.status.as_ref().and_then(|st| st.observed_generation);
                    s.metadata.finalizers.as_deref() == Some(&[FINALIZER.to_owned()])
                        && status.is_some()
                        && status == s.metadata.generation
                }))
            })
            .await?;
        }
        Ok(())
    }

    async fn gone(&self, names: &[&str]) -> Result<()> {
        for name in names {
            eventually(&format!("{name} gone"), HANG_GUARD, async || {
                Ok(self.websites().get_opt(name).await?.is_none().then_some(()))
            })
            .await?;
        }
        Ok(())
    }

    /// The occurrences (series counted) of Events `reason` about the Website `name`, with
    /// their reporting instances.
    async fn events(&self, name: &str, reason: &str) -> Result<(i32, Vec<String>)> {
        let api: Api<Event> = Api::namespaced(self.kube.clone(), &self.ns);
        let mut count = 0;
        let mut instances = Vec::new();
        for e in api.list(&ListParams::default()).await? {
            let about = e.regarding.as_ref().and_then(|r| r.name.as_deref());
            if e.reason.as_deref() == Some(reason) && about == Some(name) {
                count += e.series.as_ref().map_or(1, |s| s.count);
                instances.extend(e.reporting_instance);
            }
        }
        Ok((count, instances))
    }

    /// The identity holding the operator's Lease.
    async fn holder(&self) -> Result<String> {
        let lease = Api::<Lease>::namespaced(self.kube.clone(), &self.ns)
            .get("website-operator")
            .await?;
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty())
            .context("the Lease has no holder")
    }

    /// The Website's ConfigMap and Deployment exist, each owned by it alone.
    async fn check_owned(&self, name: &str) -> Result<()> {
        let site = self.websites().get(name).await?;
        let uid = site.metadata.uid.clone();
        let owners = |kind: &str, refs: Option<Vec<_>>| -> Result<()> {
            let refs: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> =
                refs.unwrap_or_default();
            ensure!(
                refs.len() == 1
                    && Some(&refs[0].uid) == uid.as_ref()
                    && refs[0].controller == Some(true),
                "{}: {kind} {name} owned by {refs:?}, want one reference to {uid:?}",
                self.name
            );
            Ok(())
        };
        let deployment = Api::<Deployment>::namespaced(self.kube.clone(), &self.ns);
        owners(
            "Deployment",
            deployment.get(name).await?.metadata.owner_references,
        )?;
        let page = Api::<ConfigMap>::namespaced(self.kube.clone(), &self.ns);
        owners("ConfigMap", page.get(name).await?.metadata.owner_references)
    }

    /// The Deployments and Websites' ConfigMaps left in the namespace.
    async fn owned_left(&self) -> Result<usize> {
        let selector = ListParams::default().labels("app.kubernetes.io/instance");
        let deployments = Api::<Deployment>::namespaced(self.kube.clone(), &self.ns)
            .list(&selector)
            .await?;
        let pages = Api::<ConfigMap>::namespaced(self.kube.clone(), &self.ns)
            .list(&selector)
            .await?;
        Ok(deployments.items.len() + pages.items.len())
    }
}

impl Replica {
    async fn spawn(bin: &Path, cluster: &Cluster, dir: &Path, name: &str) -> Result<Self> {
        let kubeconfig = cluster.kubeconfig.to_string_lossy();
        let args = [
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            &cluster.ns,
            "--metrics-addr",
            "127.0.0.1:0",
            "--lease-duration",
            "6",
        ];
        let process = Process::spawn(bin, &args, dir, name)?;
        let addr = eventually(
            &format!("{name}'s metrics address"),
            HANG_GUARD,
            async || Ok(process.printed_addr("metrics and probes on http://")),
        )
        .await?;
        Ok(Self { process, addr })
    }

    /// Whether it says it leads (`None`: it does not answer).
    async fn leading(&self) -> Option<bool> {
        let (_, text) = http_get(&self.addr, "/metrics").await.ok()?;
        Some(sample(&text, LEADING)? == 1.0)
    }
}

/// The replicas that say they lead, among those the test did not end.
async fn leaders(replicas: &[Replica]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, r) in replicas.iter().enumerate() {
        if !r.process.ended && r.leading().await == Some(true) {
            out.push(i);
        }
    }
    out
}

/// Waits for exactly one leader other than `not`; returns it and the time since `since`.
async fn next_leader(
    replicas: &[Replica],
    not: Option<usize>,
    since: Instant,
    within: Duration,
) -> Result<(usize, Duration)> {
    let leader = eventually("a leader", within, async || {
        let now = leaders(replicas).await;
        Ok(match now[..] {
            [one] if Some(one) != not => Some(one),
            _ => None,
        })
    })
    .await?;
    Ok((leader, since.elapsed()))
}

async fn scenario(cluster: &Cluster, dir: &Path) -> Result<()> {
    let bin = processes::example_binary("operator")?;
    let mut replicas = Vec::new();
    let outcome = tokio::time::timeout(SCENARIO_BOUND, async {
        for name in ["op-0", "op-1", "op-2"] {
            replicas.push(Replica::spawn(&bin, cluster, dir, name).await?);
        }
        run(cluster, &mut replicas).await
    })
    .await
    .unwrap_or_else(|_| Err(anyhow!("the scenario took more than {SCENARIO_BOUND:?}")));
    if outcome.is_err() {
        for r in &replicas {
            r.process.dump(20);
        }
    }
    outcome
}

async fn run(c: &Cluster, replicas: &mut [Replica]) -> Result<()> {
    let started = Instant::now();
    for r in replicas.iter() {
        eventually(
            &format!("{} ready", r.process.name),
            HANG_GUARD,
            async || {
                Ok(http_get(&r.addr, "/readyz")
                    .await
                    .ok()
                    .filter(|(c, _)| *c == 200))
            },
        )
        .await?;
    }
    let (first, _) = next_leader(replicas, None, started, HANG_GUARD).await?;
    c.create("a-0").await?;
    c.create("a-1").await?;
    c.reconciled(&["a-0", "a-1"]).await?;
    let first_id = c.holder().await?;

    // SIGKILL the leader; meanwhile three Websites come and one goes.
    let killed = Instant::now();
    replicas[first].process.kill()?;
    for name in ["b-0", "b-1", "b-2"] {
        c.create(name).await?;
    }
    c.delete("a-1").await?;
    let (second, took) = next_leader(replicas, Some(first), killed, KILL_BOUND + RETRY).await?;
    eprintln!(
        "{}: {} leads {took:?} after the SIGKILL of {} (bound {KILL_BOUND:?}: lease {LEASE:?} + renew deadline {RENEW:?} + 10 s)",
        c.name, replicas[second].process.name, replicas[first].process.name
    );
    ensure!(took <= KILL_BOUND, "takeover after SIGKILL took {took:?}");
    c.reconciled(&["b-0", "b-1", "b-2"]).await?;
    c.gone(&["a-1"]).await?;
    let second_id = c.holder().await?;
    ensure!(second_id != first_id, "the Lease still names {first_id}");

    // SIGTERM the new leader: it drains, releases the Lease and exits 0.
    let termed = Instant::now();
    replicas[second].process.terminate()?;
    let (third, took) = next_leader(replicas, Some(second), termed, TERM_BOUND + RETRY).await?;
    eprintln!(
        "{}: {} leads {took:?} after the SIGTERM of {} (bound {TERM_BOUND:?})",
        c.name, replicas[third].process.name, replicas[second].process.name
    );
    ensure!(took <= TERM_BOUND, "takeover after SIGTERM took {took:?}");
    let status = eventually("the SIGTERMed replica's exit", HANG_GUARD, async || {
        replicas[second].process.try_wait()
    })
    .await?;
    ensure!(
        status.success(),
        "the SIGTERMed replica exited with {status}"
    );
    c.create("c-0").await?;
    c.reconciled(&["c-0"]).await?;
    let third_id = c.holder().await?;
    ensure!(![&first_id, &second_id].contains(&&third_id));

    // Each reconciled once: one Created Event, from the leader of its time; owned objects.
    let by = [
        ("a-0", &first_id),
        ("b-0", &second_id),
        ("b-1", &second_id),
        ("b-2", &second_id),
        ("c-0", &third_id),
    ];
    for (name, leader) in by {
        let (count, instances) = c.events(name, "Created").await?;
        ensure!(
            count == 1 && instances == [leader.clone()],
            "{}: {name}: {count} Created Events from {instances:?}, want 1 from {leader}",
            c.name
        );
        c.check_owned(name).await?;
    }

    // Each cleanup ran once; nothing owned is left.
    for (name, _) in by {
        c.delete(name).await?;
    }
    c.gone(&by.map(|(name, _)| name)).await?;
    // a-1 was deleted while no replica led: the second leader ran its cleanup.
    let cleaned_by = by.map(|(name, _)| (name, &third_id));
    for (name, leader) in cleaned_by.into_iter().chain([("a-1", &second_id)]) {
        let (count, instances) = c.events(name, "Deleted").await?;
        ensure!(
            count == 1 && instances == [leader.clone()],
            "{}: {name}: {count} Deleted Events from {instances:?}, want 1 from {leader}",
            c.name
        );
    }
    ensure!(c.owned_left().await? == 0, "owned objects left behind");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_operator_replicas_fail_over_on_the_embedded_server() -> Result<()> {
    let server = ApiServer::builder().build().start().await?;
    let dir = processes::temp_dir("operator-replicas-embedded")?;
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    let cluster = Cluster::new("embedded", kubeconfig).await?;
    let outcome = scenario(&cluster, &dir).await;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    server.shutdown().await;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_operator_replicas_fail_over_on_the_upstream_kube_apiserver() -> Result<()> {
    let Some(kubeconfig) = processes::upstream_kubeconfig()? else {
        return Ok(());
    };
    let dir = processes::temp_dir("operator-replicas-upstream")?;
    let cluster = Cluster::new("upstream", kubeconfig).await?;
    let outcome = scenario(&cluster, &dir).await;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    outcome
}
