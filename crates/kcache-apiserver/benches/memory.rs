//! Memory the embedded server holds per stored pod (a measurement, not a test): seeds
//! `KCACHE_BENCH_PODS` pods (default 10,000) of about 4.5 KB of JSON each through the Rust
//! handle and reports the process's RSS growth per pod beside the pod's JSON size.
//!
//! Run with `cargo bench -p kcache-apiserver --bench memory` (Linux: reads
//! `/proc/self/status`).

use kcache_apiserver::ApiServer;
use serde_json::json;

fn pod(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "labels": {"app": format!("app-{}", i % 50), "team": "bench"},
                     "annotations": {"kcache.io/note": "x".repeat(3_000)}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "args": ["--port", "8080", "--verbose"],
                 "env": [{"name": "MODE", "value": "bench"}, {"name": "INDEX", "value": i.to_string()}],
                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}}],
                 "nodeName": format!("node-{}", i % 100), "restartPolicy": "Always"},
        "status": {"phase": "Running", "podIP": format!("10.0.{}.{}", (i / 250) % 250, i % 250),
                   "conditions": (0..6).map(|c| json!({"type": format!("Condition{c}"), "status": "True",
                       "lastTransitionTime": "2026-12-01T00:00:00Z", "reason": "Fine", "message": "all good here"})).collect::<Vec<_>>()}
    })
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("KCACHE_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let server = ApiServer::builder().build().start().await?;
    let json_bytes = serde_json::to_vec(&pod(0))?.len();
    let before = rss_bytes();
    for i in 0..n {
        server
            .handle()
            .create("/api/v1/namespaces/default/pods", pod(i))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let after = rss_bytes();
    let per_pod = after.saturating_sub(before) as f64 / n as f64;
    println!(
        "{n} pods of {json_bytes} JSON bytes: RSS +{:.1} MiB, {per_pod:.0} bytes per pod ({:.2}x its JSON)",
        after.saturating_sub(before) as f64 / (1024.0 * 1024.0),
        per_pod / json_bytes as f64
    );
    server.shutdown().await;
    Ok(())
}
