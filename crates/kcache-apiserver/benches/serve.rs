//! Throughput of the embedded server (a measurement, not a test):
//!
//! * `list`: one GET of 100,000 pods (about 1 KiB each) as a single JSON list, in MB/s;
//! * `fanout`: 10,000 events written while 100 watchers stream them, in events/s
//!   delivered (10,000 × 100 = 1,000,000 event deliveries).
//!
//! Run with `cargo bench -p kcache-apiserver --bench serve`.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kcache_apiserver::ApiServer;
use serde_json::json;
use tokio::net::TcpStream;

const PODS: usize = 100_000;
const EVENTS: usize = 10_000;
const WATCHERS: usize = 100;
const RUNS: usize = 3;

fn pod(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "labels": {"app": format!("app-{}", i % 50), "team": "bench"},
                     "annotations": {"kcache.io/note": "x".repeat(200)}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "args": ["--port", "8080", "--verbose"],
                 "env": [{"name": "MODE", "value": "bench"}, {"name": "INDEX", "value": i.to_string()}],
                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}}],
                 "nodeName": format!("node-{}", i % 100), "restartPolicy": "Always"},
        "status": {"phase": "Running", "podIP": format!("10.0.{}.{}", (i / 250) % 250, i % 250)}
    })
}

async fn get(addr: SocketAddr, path: &str) -> hyper::Response<Incoming> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", addr.to_string())
        .header("accept", "application/json")
        .body(Empty::<Bytes>::new())
        .unwrap();
    sender.send_request(req).await.unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn bench_list() {
    let server = ApiServer::builder().build().start().await.unwrap();
    for i in 0..PODS {
        server
            .handle()
            .create("/api/v1/namespaces/default/pods", pod(i))
            .unwrap();
    }
    let mut rates = Vec::new();
    let mut bytes_total = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let resp = get(server.addr(), "/api/v1/namespaces/default/pods").await;
        let mut body = resp.into_body();
        let mut bytes = 0usize;
        while let Some(frame) = body.frame().await {
            if let Ok(d) = frame.unwrap().into_data() {
                bytes += d.len();
            }
        }
        let secs = t.elapsed().as_secs_f64();
        bytes_total = bytes;
        rates.push(bytes as f64 / secs / 1e6);
    }
    println!(
        "list: {PODS} pods, {:.1} MB per list, median {:.0} MB/s over {RUNS} runs ({:.0} pods/s)",
        bytes_total as f64 / 1e6,
        median(rates.clone()),
        median(rates) * 1e6 / (bytes_total as f64 / PODS as f64)
    );
    server.shutdown().await;
}

async fn bench_fanout() {
    let mut rates = Vec::new();
    for _ in 0..RUNS {
        let server = ApiServer::builder()
            .history_events(EVENTS * 2)
            .build()
            .start()
            .await
            .unwrap();
        let start_rv = server.handle().resource_version();
        let mut readers = Vec::new();
        for _ in 0..WATCHERS {
            let resp = get(
                server.addr(),
                &format!(
                    "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={start_rv}"
                ),
            )
            .await;
            let mut body = resp.into_body();
            readers.push(tokio::spawn(async move {
                let mut lines = 0usize;
                while lines < EVENTS {
                    let Some(frame) = body.frame().await else {
                        break;
                    };
                    if let Ok(d) = frame.unwrap().into_data() {
                        lines += d.iter().filter(|b| **b == b'\n').count();
                    }
                }
                lines
            }));
        }
        let t = Instant::now();
        let h = server.handle().clone();
        tokio::task::spawn_blocking(move || {
            for i in 0..EVENTS {
                h.create("/api/v1/namespaces/default/configmaps",
                    json!({"metadata": {"name": format!("cm-{i:05}")}, "data": {"k": "v".repeat(100)}})).unwrap();
            }
        })
        .await
        .unwrap();
        let mut delivered = 0;
        for r in readers {
            delivered += r.await.unwrap();
        }
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(delivered, EVENTS * WATCHERS);
        rates.push(delivered as f64 / secs);
        server.shutdown().await;
    }
    println!(
        "fanout: {EVENTS} events x {WATCHERS} watchers, median {:.0} events/s delivered over {RUNS} runs",
        median(rates)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        bench_list().await;
        bench_fanout().await;
    });
}
