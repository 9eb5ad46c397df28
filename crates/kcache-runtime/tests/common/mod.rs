//! Shared by the integration tests: the embedded server with a namespace, HTTP scrapes of
//! the manager's endpoints, and a bounded wait.
#![allow(dead_code, reason = "each test binary uses a part")]

use std::{collections::HashMap, net::SocketAddr, time::Duration};

use anyhow::{Context as _, Result, anyhow};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The namespace the tests work in.
pub(crate) const NS: &str = "apps";

/// A guard against a hung wait; not a performance assertion.
pub(crate) const HANG_GUARD: Duration = Duration::from_secs(60);

/// The embedded server, with the namespace [`NS`].
pub(crate) async fn server() -> Result<RunningServer> {
    let server = ApiServer::builder().build().start().await?;
    server
        .handle()
        .create("/api/v1/namespaces", json!({"metadata": {"name": NS}}))
        .map_err(|e| anyhow!("creating namespace {NS}: {e}"))?;
    Ok(server)
}

/// Waits (polling every 20 ms) until `cond` holds.
pub(crate) async fn eventually(what: &str, mut cond: impl FnMut() -> bool) -> Result<()> {
    tokio::time::timeout(HANG_GUARD, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .with_context(|| format!("waiting for {what}"))
}

/// GET `path` on `addr`: (status code, body).
pub(crate) async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).await?;
    let (head, body) = raw.split_once("\r\n\r\n").context("an HTTP response")?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("a status code")?;
    Ok((code, body.to_owned()))
}

/// Samples by `name{k=v,…}` (labels sorted); a histogram's count as `NAME_count{…}`.
pub(crate) fn samples(body: &str) -> HashMap<String, f64> {
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("the exposition parses");
    let mut out = HashMap::new();
    for s in scrape.samples {
        let mut labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        let labels = labels.join(",");
        let value = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(buckets) => {
                let count = buckets.iter().map(|b| b.count).fold(0.0, f64::max);
                out.insert(format!("{}_count{{{labels}}}", s.metric), count);
                continue;
            }
            _ => continue,
        };
        out.insert(format!("{}{{{labels}}}", s.metric), value);
    }
    out
}

/// Scrapes `/metrics` on `addr`.
pub(crate) async fn metrics(addr: SocketAddr) -> Result<HashMap<String, f64>> {
    let (code, body) = get(addr, "/metrics").await?;
    anyhow::ensure!(code == 200, "/metrics answered {code}: {body}");
    Ok(samples(&body))
}

/// The sample `key` (`name{k=v,…}`, labels sorted), or an error listing the family's.
pub(crate) fn sample(m: &HashMap<String, f64>, key: &str) -> Result<f64> {
    m.get(key).copied().with_context(|| {
        let family = key.split('{').next().unwrap_or(key);
        let mut near: Vec<&String> = m.keys().filter(|k| k.starts_with(family)).collect();
        near.sort();
        format!("no sample {key}; the family has {near:?}")
    })
}

/// A TCP proxy in front of a server that counts the `409` answers it carries (the status
/// lines of HTTP/1.1 responses): what a test asserts about conflicts seen on the wire.
pub(crate) struct ConflictCounter {
    addr: SocketAddr,
    conflicts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl ConflictCounter {
    /// Proxies to `upstream`.
    pub(crate) async fn start(upstream: SocketAddr) -> Result<Self> {
        use std::sync::{Arc, atomic::AtomicUsize};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let conflicts = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&conflicts);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let counter = Arc::clone(&counter);
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut client_rd, mut client_wr) = client.into_split();
                    let (mut server_rd, mut server_wr) = server.into_split();
                    let up = tokio::io::copy(&mut client_rd, &mut server_wr);
                    let down = async {
                        const STATUS: &[u8] = b"HTTP/1.1 409 ";
                        let mut buf = vec![0u8; 16 * 1024];
                        // The tail of the previous read: a status line split between reads.
                        let mut carry: Vec<u8> = Vec::new();
                        loop {
                            let n = match server_rd.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            carry.extend_from_slice(&buf[..n]);
                            let found =
                                carry.windows(STATUS.len()).filter(|w| *w == STATUS).count();
                            counter.fetch_add(found, std::sync::atomic::Ordering::SeqCst);
                            let keep = carry.len().min(STATUS.len() - 1);
                            carry.drain(..carry.len() - keep);
                            if client_wr.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    };
                    tokio::select! {
                        _ = up => {}
                        () = down => {}
                    }
                });
            }
        });
        Ok(Self {
            addr,
            conflicts,
            task,
        })
    }

    /// The proxy's URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The 409 answers carried so far.
    pub(crate) fn conflicts(&self) -> usize {
        self.conflicts.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for ConflictCounter {
    fn drop(&mut self) {
        self.task.abort();
    }
}
