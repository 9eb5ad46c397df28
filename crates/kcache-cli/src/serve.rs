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
    /// Add a user with a fresh bearer token and write a kubeconfig for it, `NAME.kubeconfig`
    /// next to --write-kubeconfig's file (or in the current directory): `NAME` or
    /// `NAME:GROUP,GROUP`. Repeatable. What the user may do is what the server's RBAC objects
    /// grant it (create Roles and bindings with the admin kubeconfig or --manifests).
    #[arg(long = "user", value_name = "NAME[:GROUP,...]")]
    pub users: Vec<String>,
    /// How requests are authorized, as kube-apiserver's flag: `RBAC` (the default, as
    /// envtest's kube-apiserver) or `AlwaysAllow`. The admin is in `system:masters` either way.
    #[arg(long, default_value = "RBAC", value_parser = ["RBAC", "AlwaysAllow"])]
    pub authorization_mode: String,
    /// On exit (SIGINT or SIGTERM), write what each user did to this file: every distinct
    /// request the server authorized or refused, per user (YAML when the name ends in `.yaml`
    /// or `.yml`, else JSON). Beyond kube-apiserver: the input of a least-privilege Role.
    #[arg(long, value_name = "FILE")]
    pub permissions_report: Option<PathBuf>,
}

/// `NAME[:GROUP,GROUP]` as a name and groups.
fn parse_user(spec: &str) -> anyhow::Result<(String, Vec<String>)> {
    let (name, groups) = spec.split_once(':').unwrap_or((spec, ""));
    anyhow::ensure!(
        !name.is_empty() && !name.contains(['/', '\\']),
        "--user {spec:?}: the user name must be non-empty and contain no '/'"
    );
    let groups = groups
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(str::to_owned)
        .collect();
    Ok((name.to_owned(), groups))
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

/// Writes `text` to `path`, readable by the owner only on Unix (it holds a token).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// Waits for SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("listening for SIGTERM")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}

/// Writes `record` to `path`: YAML for `*.yaml` / `*.yml`, else JSON.
fn write_permissions(
    record: &kcache_apiserver::auth::permissions::Record,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let yaml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml"));
    let text = if yaml {
        record.to_yaml()?
    } else {
        serde_json::to_string_pretty(record)?
    };
    std::fs::write(path, text)?;
    Ok(())
}

/// Runs the server until Ctrl-C or SIGTERM.
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
        .https(!args.insecure_http)
        .authorization(args.authorization_mode == "RBAC");
    let users = args
        .users
        .iter()
        .map(|u| parse_user(u))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(t) = &args.token {
        builder = builder.token(t.clone());
    }
    let server = builder
        .build()
        .start()
        .await
        .context("starting the API server")?;
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
    let user_dir = args
        .write_kubeconfig
        .as_deref()
        .and_then(std::path::Path::parent)
        .map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf);
    for (name, groups) in users {
        let added = server.add_user(&name, groups);
        let path = user_dir.join(format!("{name}.kubeconfig"));
        write_private(&path, &added.kubeconfig)
            .with_context(|| format!("writing kubeconfig {}", path.display()))?;
        println!(
            "user {name} (groups {}): kubeconfig written to {}",
            added.user.groups.join(","),
            path.display()
        );
    }
    if args.enable_faults {
        println!(
            "fault injection enabled under {}/debug/kcache/",
            server.url()
        );
    }
    shutdown_signal().await?;
    println!("shutting down");
    if let Some(path) = &args.permissions_report {
        write_permissions(&server.permissions(), path)
            .with_context(|| format!("writing the permissions report {}", path.display()))?;
        println!("permissions report written to {}", path.display());
    }
    server.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn users_are_names_and_groups() {
        let (n, g) = super::parse_user("alice:dev,ops").unwrap();
        assert_eq!(
            (n.as_str(), g),
            ("alice", vec!["dev".to_owned(), "ops".to_owned()])
        );
        let (n, g) = super::parse_user("bob").unwrap();
        assert_eq!((n.as_str(), g.len()), ("bob", 0));
        assert!(super::parse_user(":dev").is_err());
        assert!(super::parse_user("a/b").is_err());
    }
}
