//! What every fault scenario shares: the writer that churns pods straight on the server, the
//! kcache informer (its cache and the state its handler rebuilds from events), client-go's
//! informer ([`Peer`]), and the convergence measurement against a fresh LIST.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kcache::informer::{self, HandlerFns, SharedIndexInformer};
use kcache_client::{Client, HttpListerWatcher};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::peer::Peer;

/// Pods in the namespace at any time.
pub(crate) const PODS: usize = 40;
/// Least pause between two writes of the churn (each also waits for its answer).
const WRITE_EVERY: Duration = Duration::from_millis(20);
/// How long past its bound a phase keeps watching for convergence (for the report).
const GRACE: Duration = Duration::from_secs(20);

/// name → resourceVersion.
pub(crate) type State = BTreeMap<String, String>;

/// The writer, both informers, and the namespace they watch.
pub(crate) struct Rig {
    pub(crate) writer: Writer,
    informer: SharedIndexInformer<Pod>,
    rebuilt: Arc<Mutex<State>>,
    peer: Peer,
    _stop: tokio_util::sync::DropGuard,
}

impl Rig {
    /// Creates [`PODS`] pods through `writer`, then starts and syncs the kcache informer and
    /// client-go's, both through `kubeconfig`.
    pub(crate) async fn start(writer: Writer, kubeconfig: &Path, ns: &str) -> Result<Self> {
        for i in 0..PODS {
            writer.create(i).await?;
        }
        let client = Client::from_kubeconfig(kubeconfig).await?;
        let informer = SharedIndexInformer::new(
            HttpListerWatcher::<Pod>::namespaced(client, ns),
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
        tokio::spawn({
            let (i, c) = (informer.clone(), cancel.clone());
            async move { i.run(c).await }
        });
        tokio::time::timeout(Duration::from_secs(60), reg.synced())
            .await
            .context("the kcache informer did not sync within 60 s")?;
        let peer = Peer::start(kubeconfig, ns, PODS).await?;
        Ok(Self {
            writer,
            informer,
            rebuilt,
            peer,
            _stop: cancel.drop_guard(),
        })
    }

    fn cache(&self) -> State {
        self.informer
            .indexer()
            .list()
            .iter()
            .map(|p| name_rv(p))
            .collect()
    }

    /// After a fault ended at `ended` (and the churn stopped): waits until the kcache cache,
    /// its handler's state and client-go's cache equal a fresh LIST, prints the times, and fails
    /// unless kcache converged within `bound` of `ended`.
    pub(crate) async fn converge(
        &mut self,
        phase: &str,
        writes: (usize, usize),
        ended: Instant,
        bound: Duration,
    ) -> Result<()> {
        let truth = self.writer.list().await?;
        let (mut kcache_at, mut client_go_at) = (None, None);
        while ended.elapsed() < bound + GRACE && (kcache_at.is_none() || client_go_at.is_none()) {
            if kcache_at.is_none()
                && self.cache() == truth
                && *self.rebuilt.lock().unwrap() == truth
            {
                kcache_at = Some(ended.elapsed());
            }
            if client_go_at.is_none() && self.peer.snapshot().await? == truth {
                client_go_at = Some(ended.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let show = |t: Option<Duration>| {
            t.map_or("did not converge".into(), |t| {
                format!("{:.1} s", t.as_secs_f64())
            })
        };
        eprintln!(
            "fault proxy: {phase:<26} {:>4} writes ({:>3} failed)  kcache {:>16}  client-go {:>16}",
            writes.0,
            writes.1,
            show(kcache_at),
            show(client_go_at)
        );
        let Some(t) = kcache_at else {
            let (c, r) = (self.cache(), self.rebuilt.lock().unwrap().clone());
            bail!(
                "{phase}: the kcache informer did not converge within {} s of the fault's end; \
                 at the deadline {} (cache) / {} (handler) of {} objects differed",
                (bound + GRACE).as_secs(),
                differing(&c, &truth),
                differing(&r, &truth),
                truth.len()
            );
        };
        ensure!(
            t <= bound,
            "{phase}: the kcache informer converged {:.1} s after the fault ended (bound {} s)",
            t.as_secs_f64(),
            bound.as_secs()
        );
        Ok(())
    }

    /// Stops client-go's informer (it must exit cleanly).
    pub(crate) async fn stop(self) -> Result<()> {
        self.peer.stop().await
    }
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

/// Writes to the server directly (never through the proxy).
#[derive(Clone)]
pub(crate) struct Writer {
    client: Client,
    pods: String,
    next: Arc<Mutex<usize>>,
}

/// A running churn; [`Churn::stop`] ends it.
pub(crate) struct Churn {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<(usize, usize)>,
}

impl Churn {
    /// Ends the churn: (writes made, writes that failed).
    pub(crate) async fn stop(self) -> Result<(usize, usize)> {
        self.cancel.cancel();
        Ok(self.task.await?)
    }
}

impl Writer {
    pub(crate) fn new(client: Client, ns: &str) -> Self {
        Self {
            client,
            pods: format!("/api/v1/namespaces/{ns}/pods"),
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
    /// another instead. A write that fails (the server is down) is counted and skipped.
    pub(crate) fn churn(&self) -> Churn {
        let cancel = CancellationToken::new();
        let (me, c) = (self.clone(), cancel.clone());
        let task = tokio::spawn(async move {
            let (mut writes, mut failed) = (0usize, 0usize);
            let mut live: Vec<usize> = Vec::new();
            let mut tick = tokio::time::interval(WRITE_EVERY);
            while !c.is_cancelled() {
                tick.tick().await;
                if live.is_empty() {
                    live = me.live().await.unwrap_or_default();
                    if live.is_empty() {
                        failed += 1;
                        continue;
                    }
                }
                let i = live[writes % live.len()];
                let ok = if writes % 10 == 9 {
                    me.replace(i, &mut live).await
                } else {
                    let patch = json!({"metadata": {"labels": {"gen": writes.to_string()}}});
                    let path = format!("{}/p-{i}", me.pods);
                    me.send("PATCH", &path, "application/merge-patch+json", patch)
                        .await
                        .map(drop)
                };
                writes += 1;
                if ok.is_err() {
                    failed += 1;
                    // The server may be down: look again at what is live once it is back.
                    live.clear();
                }
            }
            (writes, failed)
        });
        Churn { cancel, task }
    }

    async fn replace(&self, i: usize, live: &mut Vec<usize>) -> Result<()> {
        let path = format!("{}/p-{i}", self.pods);
        self.send("DELETE", &path, "application/json", json!({}))
            .await?;
        live.retain(|&j| j != i);
        let n = {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            *next
        };
        self.create(n).await?;
        live.push(n);
        Ok(())
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
    pub(crate) async fn list(&self) -> Result<State> {
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
        let resp = tokio::time::timeout(
            Duration::from_secs(10),
            self.client.kube_for_writes().send(req),
        )
        .await
        .context("a write took over 10 s")??;
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
