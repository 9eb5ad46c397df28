//! `kcache serve`: run the embedded Kubernetes-compatible API server on its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use kcache_apiserver::ApiServer;
use serde_json::json;

/// Arguments of `kcache serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (loopback by default; use 0.0.0.0:PORT to expose it).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Write a kubeconfig for kubectl / client-go / kube-rs to this path.
    #[arg(long)]
    pub write_kubeconfig: Option<PathBuf>,
    /// Require this bearer token (also written into the kubeconfig). Over HTTPS (the default)
    /// a random admin token is generated when unset. Note: kubectl and client-go never send a
    /// token over plain HTTP, so with --insecure-http leave it unset for them.
    #[arg(long, env = "KCACHE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Serve plain HTTP without credentials instead of HTTPS (by default the server
    /// generates a CA and a serving certificate for 127.0.0.1/localhost and an admin token,
    /// all written into the kubeconfig).
    #[arg(long)]
    pub insecure_http: bool,
    /// Create this many pods in the `default` namespace at start.
    #[arg(long, default_value_t = 0)]
    pub seed_pods: usize,
    /// History events kept per resource type (older RVs answer 410 Expired).
    #[arg(long, default_value_t = 10_000)]
    pub history_events: usize,
    /// Seconds between periodic watch bookmarks.
    #[arg(long, default_value_t = 60)]
    pub bookmark_interval: u64,
    /// Serve the fault-injection endpoints under /debug/kcache/.
    #[arg(long)]
    pub enable_faults: bool,
    /// Run the garbage collector over ownerReferences, as kube-controller-manager's
    /// --enable-garbage-collector; `--enable-garbage-collector=false` leaves owned objects and
    /// the orphan/foregroundDeletion finalizers alone, as envtest's bare kube-apiserver does.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub enable_garbage_collector: bool,
    /// Create the objects of every *.json / *.yaml / *.yml manifest in this directory at start
    /// (CustomResourceDefinitions and Namespaces first).
    #[arg(long, value_name = "DIR")]
    pub manifests: Option<PathBuf>,
}

/// A small but realistic pod for seeding.
fn seed_pod(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "labels": {"app": format!("app-{}", i % 10), "seed": "true"}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                 "restartPolicy": "Always"}
    })
}

/// Runs the server until Ctrl-C.
///
/// # Errors
/// When the address cannot be bound, seeding fails or the kubeconfig cannot be written.
pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut builder = ApiServer::builder()
        .listen(args.listen)
        .history_events(args.history_events)
        .bookmark_interval(Duration::from_secs(args.bookmark_interval.max(1)))
        .enable_faults_http(args.enable_faults)
        .garbage_collector(args.enable_garbage_collector)
        .https(!args.insecure_http);
    if let Some(t) = &args.token {
        builder = builder.token(t.clone());
    }
    let server = builder.start().await.context("starting the API server")?;
    for i in 0..args.seed_pods {
        server
            .handle()
            .create("/api/v1/namespaces/default/pods", seed_pod(i))
            .context("seeding pods")?;
    }
    if let Some(dir) = &args.manifests {
        let n = kcache_apiserver::manifests::load_dir(server.handle(), dir)
            .with_context(|| format!("loading the manifests of {}", dir.display()))?;
        println!("created {n} objects from {}", dir.display());
    }
    println!("kcache API server listening on {}", server.url());
    if let Some(path) = &args.write_kubeconfig {
        server
            .write_kubeconfig(path)
            .with_context(|| format!("writing kubeconfig {}", path.display()))?;
        println!("kubeconfig written to {}", path.display());
        println!("try: kubectl --kubeconfig {} get pods", path.display());
    }
    if args.enable_faults {
        println!(
            "fault injection enabled under {}/debug/kcache/",
            server.url()
        );
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    println!("shutting down");
    server.shutdown().await;
    Ok(())
}
