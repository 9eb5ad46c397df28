//! A production operator in one page, on kcache-runtime's `Manager`.
//!
//! A `Website` (`demo.kcache.dev/v1`, namespaced) asks for a static site: its `content` goes
//! into a ConfigMap, served by a Deployment of `image` with `replicas` pods. The operator
//! owns both (owner references), keeps the Website's `status`, records Events, guards the
//! Website with a finalizer (its cleanup deletes the Deployment first, so the pods are gone
//! before the Website), elects a leader (the other replicas stay warm), and serves
//! `/metrics`, `/healthz` and `/readyz`. SIGINT or SIGTERM: the reconciles in flight
//! finish, the lease is released, the process exits.
//!
//! ```text
//! cargo run -p kcache-examples --example operator -- --embedded   # API server in-process
//! cargo run -p kcache-examples --example operator -- --kubeconfig ~/.kube/config -n mon
//! ```
use std::{net::SocketAddr, sync::Arc, time::Duration};

use clap::Parser;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use kcache_client::Client;
use kcache_runtime::{
    Action, Context, Event, EventType, FinalizerEvent, Manager,
    api::{self, Applied},
    filter,
    manager::{self, LeaderElection},
};
use kube::{CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The finalizer guarding every Website.
pub(crate) const FINALIZER: &str = "demo.kcache.dev/cleanup";

/// A static website: `image` serves `content` as its index page, with `replicas` pods.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[kube(
    group = "demo.kcache.dev",
    version = "v1",
    kind = "Website",
    namespaced,
    status = "WebsiteStatus",
    schema = "disabled"
)]
pub(crate) struct WebsiteSpec {
    pub(crate) image: String,
    pub(crate) replicas: i32,
    pub(crate) content: String,
}

/// What the operator reports.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebsiteStatus {
    pub(crate) ready_replicas: i32,
    pub(crate) observed_generation: Option<i64>,
}

/// The CustomResourceDefinition (installed by `--embedded`; in a cluster, with kubectl).
pub(crate) fn crd() -> serde_json::Value {
    let int = json!({"type": "integer"});
    let string = json!({"type": "string"});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "websites.demo.kcache.dev"},
        "spec": {"group": "demo.kcache.dev", "scope": "Namespaced",
            "names": {"plural": "websites", "singular": "website", "kind": "Website"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["image", "replicas", "content"],
                        "properties": {"image": string, "replicas": int, "content": string}},
                    "status": {"type": "object", "properties": {
                        "readyReplicas": int, "observedGeneration": int}}}}}}]}
    })
}

/// The operator's settings: Websites of `namespace` only, leader election on the Lease
/// `website-operator` lasting `lease` (client-go's 15 s; renew deadline and retry period in
/// client-go's proportions, 2/3 and 2/15 of it), metrics and probes on `metrics`.
pub(crate) fn config(namespace: &str, metrics: SocketAddr, lease: Duration) -> manager::Config {
    let election =
        LeaderElection::new("website-operator").timings(lease, lease * 2 / 3, lease * 2 / 15);
    manager::Config::new("website-operator")
        .namespace(namespace)
        .leader_election(election)
        .metrics_addr(metrics)
}

/// The operator with client-go's lease timings; see [`operator_with`].
///
/// # Errors
/// As [`operator_with`].
#[allow(
    dead_code,
    reason = "the tests' entry point; main takes the timings from the flags"
)]
pub(crate) fn operator(
    client: Client,
    namespace: &str,
    metrics: SocketAddr,
) -> Result<Manager, manager::Error> {
    operator_with(client, config(namespace, metrics, Duration::from_secs(15)))
}

/// The operator: one controller of Websites, owning ConfigMaps and Deployments.
///
/// # Errors
/// The manager's: invalid settings, or a metrics address that cannot be bound.
pub(crate) fn operator_with(
    client: Client,
    config: manager::Config,
) -> Result<Manager, manager::Error> {
    let manager = Manager::new(client, config)?;
    // Only what this operator made (it labels all of it) is cached, not every ConfigMap;
    // stored lean (wire bytes and metadata; the reconcile's reads decode), memory accounted.
    let labelled = "app.kubernetes.io/instance";
    manager.cache::<ConfigMap>(
        manager::Cache::new()
            .label_selector(labelled)
            .account_memory(),
    )?;
    manager.cache::<Deployment>(
        manager::Cache::new()
            .label_selector(labelled)
            .account_memory(),
    )?;
    manager
        .controller::<Website>()
        .owns::<ConfigMap>()
        .owns::<Deployment>()
        // Spec changes and deletions; our own status and finalizer patches do not requeue.
        .with_event_filter(|old: &Website, new: &Website| {
            filter::generation_changed(old, new)
                || old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        })
        .workers(2)
        .build(reconcile)?;
    Ok(manager)
}

async fn reconcile(_site: Arc<Website>, ctx: Context<Website>) -> Result<Action, api::Error> {
    ctx.finalizer(FINALIZER, |event| async {
        match event {
            FinalizerEvent::Apply(site) => apply(&site, &ctx).await,
            FinalizerEvent::Cleanup(site) => cleanup(&site, &ctx).await,
        }
    })
    .await
}

/// Makes the ConfigMap and the Deployment match the Website, and reports.
async fn apply(site: &Website, ctx: &Context<Website>) -> Result<Action, api::Error> {
    let name = site.name_any();
    ctx.apply_owned(page(site)).await?;
    // Created, Updated or Unchanged; a reconcile right after the create reads it from the
    // cache (read-your-own-writes), so it does not report "Created" twice.
    let applied = ctx.apply_owned(deployment(site)).await?;
    if let Applied::Created(_) = applied {
        let note = format!("Deployment {name} serves {}", site.spec.image);
        publish(ctx, "Created", "Create", note).await;
    }
    let deployment = applied.into_object();
    let status = WebsiteStatus {
        ready_replicas: deployment
            .status
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0),
        observed_generation: site.metadata.generation,
    };
    if site.status.as_ref() != Some(&status) {
        ctx.patch_status(&status).await?;
    }
    // Owned objects' changes requeue on their own; this is a safety net.
    Ok(Action::RequeueAfter(Duration::from_secs(300)))
}

/// The Website is being deleted: stop its pods first, then let it go.
async fn cleanup(site: &Website, ctx: &Context<Website>) -> Result<Action, api::Error> {
    let name = site.name_any();
    for deleted in [
        ctx.api::<Deployment>().delete(&name).await.map(drop),
        ctx.api::<ConfigMap>().delete(&name).await.map(drop),
    ] {
        match deleted {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {}
        }
    }
    let note = format!("Deployment and ConfigMap {name} deleted");
    publish(ctx, "Deleted", "Delete", note).await;
    Ok(Action::Done)
}

async fn publish(ctx: &Context<Website>, reason: &str, action: &str, note: String) {
    let event = Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    ctx.publish(event).await;
}

/// The page, as a ConfigMap.
fn page(site: &Website) -> ConfigMap {
    let labels = json!({"app.kubernetes.io/instance": site.name_any()});
    let page = json!({"metadata": {"name": site.name_any(), "labels": labels},
        "data": {"index.html": site.spec.content}});
    serde_json::from_value(page).expect("a valid ConfigMap")
}

/// `image` serving the page, as a Deployment.
fn deployment(site: &Website) -> Deployment {
    let (name, spec) = (site.name_any(), &site.spec);
    let labels = json!({"app.kubernetes.io/instance": name});
    let pod = json!({
        "containers": [{"name": "web", "image": spec.image,
            "volumeMounts": [{"name": "page", "mountPath": "/usr/share/nginx/html"}]}],
        "volumes": [{"name": "page", "configMap": {"name": name}}]});
    let deployment = json!({"metadata": {"name": name, "labels": labels},
        "spec": {"replicas": spec.replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod}}});
    serde_json::from_value(deployment).expect("a valid Deployment")
}

/// Command line.
#[derive(Debug, Parser)]
#[command(about = "The Website operator (kcache-runtime example)")]
struct Args {
    /// The kubeconfig (default: $KUBECONFIG, ~/.kube/config, else in-cluster).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Start an embedded API server with the CRD and one Website, instead of a cluster.
    #[arg(long)]
    embedded: bool,
    /// The namespace whose Websites are reconciled (and where the Lease lives).
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: SocketAddr,
    /// Seconds a standby waits for the leader's lease to expire before it takes over.
    #[arg(long, default_value_t = 15.0)]
    lease_duration: f64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let mut embedded = None;
    let client = if args.embedded {
        let server = kcache_apiserver::ApiServer::builder()
            .auto_create_namespaces(true)
            .build()
            .start()
            .await?;
        let h = server.handle();
        let spec = WebsiteSpec {
            image: "nginx:1.27".into(),
            replicas: 2,
            content: "<h1>Hello from kcache</h1>".into(),
        };
        let site = serde_json::to_value(Website::new("hello", spec))?;
        h.create(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd(),
        )
        .and_then(|_| {
            let path = format!(
                "/apis/demo.kcache.dev/v1/namespaces/{}/websites",
                args.namespace
            );
            h.create(&path, site)
        })
        .map_err(|e| anyhow::anyhow!("seeding the embedded server: {e}"))?;
        let client = Client::from_url(&server.url())?;
        embedded = Some(server);
        client
    } else if let Some(path) = &args.kubeconfig {
        Client::from_kubeconfig(path).await?
    } else {
        Client::infer().await?
    };
    let lease = Duration::try_from_secs_f64(args.lease_duration)?;
    let manager = operator_with(client, config(&args.namespace, args.metrics_addr, lease))?;
    let addr = manager.metrics_addr().unwrap_or(args.metrics_addr);
    eprintln!("metrics and probes on http://{addr}");
    manager.run().await?;
    if let Some(server) = embedded {
        server.shutdown().await;
    }
    Ok(())
}
