//! Network faults between informers and the upstream kube-apiserver, kcache side by side with
//! client-go (`harness/client-go-peer --follow`), both behind the same [`FaultProxy`] and
//! watching the same pods while a writer (straight to the server, not through the proxy)
//! patches, deletes and creates them, one write at a time (about 20 writes/s here).
//!
//! Each phase: churn, inject a fault, keep churning through it, end it, stop the churn; then the
//! kcache informer's cache and the state rebuilt by its event handler, and client-go's cache,
//! must equal a fresh LIST (names and resourceVersions). The time from the end of the fault to
//! convergence is printed for both (run with `--nocapture` to see the table). The phases:
//!
//! | phase | fault | kcache must converge within |
//! |---|---|---|
//! | cut | every connection closed | 15 s |
//! | stall | nothing forwarded for 5 s, then the same connections resume | 15 s |
//! | black hole | connections closed, new ones black-holed for 10 s | 20 s |
//! | half-open | open connections silent forever, new ones black-holed for 30 s (longer than the 10 s etcd compaction interval, so the watch's resourceVersion expires) | 40 s |
//!
//! The half-open bound is the behaviour under test: the watch sits on a connection that will
//! never answer, and only the client can find out. With client-go's HTTP/2 health check (ping
//! after 30 s without a frame, 15 s for the answer) it is found about 15 s after the partition
//! heals; the reflector's idle timeout (90 s) alone would take 60 s. client-go's figures are
//! reported, not asserted (it is the reference, not the subject).
//!
//! Upstream only: fails without `KCACHE_UPSTREAM_*` unless `KCACHE_UPSTREAM=skip`. The peer is
//! built (or reused from the cache) by `scripts/build-harness.sh client-go-peer`.

#[path = "../common/mod.rs"]
mod common;
mod peer;
mod proxy;

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use common::TestServer;
use k8s_openapi::api::core::v1::Pod;
use kcache::informer::{self, HandlerFns, SharedIndexInformer};
use kcache_client::{Client, HttpListerWatcher};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use peer::Peer;
use proxy::FaultProxy;

/// Pods in the namespace at any time.
const PODS: usize = 40;
/// Least pause between two writes of the churn (each also waits for its answer).
const WRITE_EVERY: Duration = Duration::from_millis(20);

/// name → resourceVersion.
type State = BTreeMap<String, String>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_converge_after_cuts_stalls_black_holes_and_half_open_connections() -> Result<()>
{
    let Some(s) = TestServer::upstream().await? else {
        return common::upstream_missing();
    };
    let up = s.upstream_info().context("upstream")?.clone();
    let target: SocketAddr = up
        .url
        .trim_start_matches("https://")
        .parse()
        .with_context(|| format!("KCACHE_UPSTREAM_URL {:?} is not https://IP:PORT", up.url))?;
    let proxy = FaultProxy::start(target).await?;
    let dir = tempdir()?;
    let kubeconfig = dir.join("proxied-kubeconfig.json");
    write_proxied_kubeconfig(&up.kubeconfig, proxy.addr(), &kubeconfig)?;

    let writer = Writer::new(&s);
    for i in 0..PODS {
        writer.create(i).await?;
    }

    // kcache: an informer through the proxy, and a handler that rebuilds the state from events.
    let client = Client::from_kubeconfig(&kubeconfig).await?;
    let informer = SharedIndexInformer::new(
        HttpListerWatcher::<Pod>::namespaced(client, &s.ns),
        informer::Config::default(),
    );
    let rebuilt: Arc<Mutex<State>> = Arc::default();
    let put = |state: &Arc<Mutex<State>>| {
        let state = Arc::clone(state);
        move |p: &Arc<Pod>| {
            let (name, rv) = name_rv(p);
            state.lock().unwrap().insert(name, rv);
        }
    };
    let (on_add, on_update) = (put(&rebuilt), put(&rebuilt));
    let on_delete = Arc::clone(&rebuilt);
    let reg = informer.add_event_handler(
        HandlerFns::new()
            .on_add(move |p, _| on_add(p))
            .on_update(move |_, p| on_update(p))
            .on_delete(move |d| {
                on_delete.lock().unwrap().remove(&name_rv(d.object()).0);
            }),
    )?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    tokio::time::timeout(Duration::from_secs(60), reg.synced())
        .await
        .context("the kcache informer did not sync through the proxy within 60 s")?;

    let mut peer = Peer::start(&kubeconfig, &s.ns, PODS).await?;
    let cache = || -> State {
        informer
            .indexer()
            .list()
            .iter()
            .map(|p| name_rv(p))
            .collect()
    };

    let mut rows = Vec::new();
    let phases: [(&str, Duration, Duration); 4] = [
        ("cut", Duration::ZERO, Duration::from_secs(15)),
        ("stall 5 s", Duration::from_secs(5), Duration::from_secs(15)),
        (
            "black hole 10 s",
            Duration::from_secs(10),
            Duration::from_secs(20),
        ),
        (
            "half-open 30 s",
            Duration::from_secs(30),
            Duration::from_secs(40),
        ),
    ];
    for (name, length, bound) in phases {
        let churn = writer.churn();
        tokio::time::sleep(Duration::from_secs(3)).await;
        match name {
            "cut" => proxy.cut(),
            n if n.starts_with("stall") => proxy.stall(),
            n if n.starts_with("black") => {
                proxy.cut();
                proxy.partition();
            }
            _ => proxy.partition(),
        }
        tokio::time::sleep(length).await;
        proxy.resume();
        proxy.heal();
        let healed = Instant::now();
        let writes = churn.stop().await?;
        let truth = writer.list().await?;

        let (mut kcache_at, mut client_go_at) = (None, None);
        while healed.elapsed() < bound + Duration::from_secs(20)
            && (kcache_at.is_none() || client_go_at.is_none())
        {
            if kcache_at.is_none() && cache() == truth && *rebuilt.lock().unwrap() == truth {
                kcache_at = Some(healed.elapsed());
            }
            if client_go_at.is_none() && peer.snapshot().await? == truth {
                client_go_at = Some(healed.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let show = |t: Option<Duration>| {
            t.map_or("did not converge".into(), |t| {
                format!("{:.1} s", t.as_secs_f64())
            })
        };
        eprintln!(
            "fault proxy: {name:<16} {writes:>4} writes  kcache {:>18}  client-go {:>18}",
            show(kcache_at),
            show(client_go_at)
        );
        rows.push((name, kcache_at, client_go_at));
        let Some(t) = kcache_at else {
            let (c, r) = (cache(), rebuilt.lock().unwrap().clone());
            bail!(
                "{name}: the kcache informer did not converge within {}s of the fault's end: \
                 {} (cache) / {} (handler) of {} objects differ",
                (bound + Duration::from_secs(20)).as_secs(),
                differing(&c, &truth),
                differing(&r, &truth),
                truth.len()
            );
        };
        ensure!(
            t <= bound,
            "{name}: the kcache informer converged {:.1} s after the fault ended (bound {} s)",
            t.as_secs_f64(),
            bound.as_secs()
        );
    }
    peer.stop().await?;
    Ok(())
}

/// The transport negotiates HTTP/2 with kube-apiserver over TLS (ALPN, as client-go does: the
/// connection health pings above need it) and stays on HTTP/1.1 with a plain-HTTP server.
#[tokio::test]
async fn tls_servers_are_spoken_to_in_http2_and_plain_http_ones_in_http1() -> Result<()> {
    let version = |client: Client| async move {
        let req = http::Request::get("/version").body(kube_client::client::Body::empty())?;
        anyhow::Ok(client.kube().send(req).await?.version())
    };
    let embedded = kcache_apiserver::ApiServer::builder().start().await?;
    let v = version(Client::from_url(&embedded.url())?).await?;
    ensure!(
        v == http::Version::HTTP_11,
        "the embedded server answered in {v:?}"
    );
    let Some(s) = TestServer::upstream().await? else {
        return common::upstream_missing();
    };
    let v = version(s.client.clone()).await?;
    ensure!(
        v == http::Version::HTTP_2,
        "kube-apiserver answered in {v:?}"
    );
    Ok(())
}

fn name_rv(p: &Pod) -> (String, String) {
    (
        p.metadata.name.clone().unwrap_or_default(),
        p.metadata.resource_version.clone().unwrap_or_default(),
    )
}

/// Objects missing, extra or at another resourceVersion.
fn differing(a: &State, b: &State) -> usize {
    let mut n = a.iter().filter(|(k, v)| b.get(*k) != Some(v)).count();
    n += b.keys().filter(|k| !a.contains_key(*k)).count();
    n
}

fn tempdir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("kcache-fault-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The admin kubeconfig with every cluster's server pointed at the proxy (JSON, which kubectl
/// and client-go read as YAML).
fn write_proxied_kubeconfig(
    from: &std::path::Path,
    proxy: SocketAddr,
    to: &std::path::Path,
) -> Result<()> {
    let mut config = kube_client::config::Kubeconfig::read_from(from)?;
    for c in &mut config.clusters {
        if let Some(cluster) = c.cluster.as_mut() {
            cluster.server = Some(format!("https://{proxy}"));
        }
    }
    std::fs::write(to, serde_json::to_vec(&config)?)?;
    Ok(())
}

/// Writes to the server directly (not through the proxy).
#[derive(Clone)]
struct Writer {
    client: Client,
    pods: String,
    next: Arc<Mutex<usize>>,
}

/// A running churn; [`Churn::stop`] ends it and says how many writes it made.
struct Churn {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<Result<usize>>,
}

impl Churn {
    async fn stop(self) -> Result<usize> {
        self.cancel.cancel();
        self.task.await?
    }
}

impl Writer {
    fn new(s: &TestServer) -> Self {
        Self {
            client: s.client.clone(),
            pods: format!("/api/v1/namespaces/{}/pods", s.ns),
            next: Arc::new(Mutex::new(PODS)),
        }
    }

    async fn create(&self, i: usize) -> Result<()> {
        let body = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p-{i}"), "labels": {"gen": "0"}},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/none:1"}]}});
        self.send("POST", &self.pods, "application/json", body)
            .await
            .map(drop)
    }

    /// Patches a label of one of the live pods; every 10th write deletes one and creates
    /// another instead.
    fn churn(&self) -> Churn {
        let cancel = CancellationToken::new();
        let me = self.clone();
        let c = cancel.clone();
        let task = tokio::spawn(async move {
            let mut writes = 0usize;
            let mut live: Vec<usize> = Vec::new();
            let mut tick = tokio::time::interval(WRITE_EVERY);
            while !c.is_cancelled() {
                tick.tick().await;
                if live.is_empty() {
                    live = me.live().await?;
                }
                let i = live[writes % live.len()];
                if writes % 10 == 9 {
                    me.send(
                        "DELETE",
                        &format!("{}/p-{i}", me.pods),
                        "application/json",
                        json!({}),
                    )
                    .await?;
                    live.retain(|&j| j != i);
                    let n = {
                        let mut next = me.next.lock().unwrap();
                        *next += 1;
                        *next
                    };
                    me.create(n).await?;
                    live.push(n);
                } else {
                    let patch = json!({"metadata": {"labels": {"gen": writes.to_string()}}});
                    me.send(
                        "PATCH",
                        &format!("{}/p-{i}", me.pods),
                        "application/merge-patch+json",
                        patch,
                    )
                    .await?;
                }
                writes += 1;
            }
            Ok(writes)
        });
        Churn { cancel, task }
    }

    async fn live(&self) -> Result<Vec<usize>> {
        Ok(self
            .list()
            .await?
            .keys()
            .filter_map(|n| n.strip_prefix("p-")?.parse().ok())
            .collect())
    }

    /// A fresh LIST (the truth).
    async fn list(&self) -> Result<State> {
        let list = self
            .send("GET", &self.pods, "application/json", Value::Null)
            .await?;
        let items = list["items"]
            .as_array()
            .context("a pod list without items")?;
        Ok(items
            .iter()
            .map(|p| {
                let m = &p["metadata"];
                (
                    m["name"].as_str().unwrap_or_default().to_owned(),
                    m["resourceVersion"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect())
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Value,
    ) -> Result<Value> {
        let body = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&body)?
        };
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .header("accept", "application/json")
            .body(kube_client::client::Body::from(body))?;
        let resp = self.client.kube_for_writes().send(req).await?;
        let status = resp.status();
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await?
            .to_bytes();
        ensure!(
            status.is_success(),
            "{method} {path}: {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        );
        Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
}
