//! The Website operator of `examples/operator.rs`, written on kube-rs's own crates.
//!
//! A `Website` (`demo.kcache.dev/v1`, namespaced) asks for a static site: its `content` goes
//! into a ConfigMap, served by a Deployment of `image` with `replicas` pods. The operator
//! owns both (owner references, server-side apply), keeps the Website's `status`, records
//! Events, guards the Website with a finalizer (its cleanup deletes the Deployment first),
//! elects a leader with kube-lease-manager (a standby does not reconcile), and serves
//! `/metrics`, `/healthz` and `/readyz`. SIGINT or SIGTERM: the reconciles in flight finish,
//! the lease is released, the process exits.
//!
//! ```text
//! cargo run -p kube-runtime-operator -- --kubeconfig ~/.kube/config -n mon
//! ```
use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, http::StatusCode, routing::get};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use kube::{
    Api, Client, CustomResource, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{
        Controller, Predicate, WatchStreamExt,
        controller::{self, Action},
        events::{Event, EventType, Recorder},
        finalizer::{self, finalizer},
        predicates, reflector, watcher,
    },
};
use kube_lease_manager::LeaseManagerBuilder;
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The operator's name: field manager, Lease, Events' reporting controller.
const NAME: &str = "website-operator";
/// The finalizer guarding every Website.
pub(crate) const FINALIZER: &str = "demo.kcache.dev/cleanup";

/// A static website: `image` serves `content` as its index page, with `replicas` pods.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "demo.kcache.dev",
    version = "v1",
    kind = "Website",
    namespaced,
    status = "WebsiteStatus"
)]
pub(crate) struct WebsiteSpec {
    pub(crate) image: String,
    pub(crate) replicas: i32,
    pub(crate) content: String,
}

/// What the operator reports.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebsiteStatus {
    pub(crate) ready_replicas: i32,
    pub(crate) observed_generation: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

/// The metrics on `/metrics`, with controller-runtime's names.
#[derive(Clone, Debug)]
struct Metrics {
    reconciles: Family<Outcome, Counter>,
    errors: Counter,
    durations: Histogram,
    leader: Gauge,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    result: &'static str,
}

impl Metrics {
    fn register(registry: &mut Registry) -> Self {
        let buckets = prometheus_client::metrics::histogram::exponential_buckets(0.005, 2.0, 12);
        let metrics = Self {
            reconciles: Family::default(),
            errors: Counter::default(),
            durations: Histogram::new(buckets),
            leader: Gauge::default(),
        };
        let r = registry;
        r.register(
            "controller_runtime_reconcile",
            "Reconciles by result",
            metrics.reconciles.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Failed reconciles",
            metrics.errors.clone(),
        );
        let time = "controller_runtime_reconcile_time_seconds";
        r.register(time, "Reconcile durations", metrics.durations.clone());
        let leader = "leader_election_master_status";
        r.register(
            leader,
            "1 on the leader, 0 on a standby",
            metrics.leader.clone(),
        );
        metrics
    }
}

/// What every reconcile gets.
struct Ctx {
    client: Client,
    recorder: Recorder,
    metrics: Metrics,
}

/// The operator: serves metrics and probes on `listener`, waits for the lease
/// `website-operator` of `namespace` (`lease_secs` long, renewed every 2/15 of it as
/// client-go does), then reconciles the Websites of `namespace` until `shutdown`.
///
/// # Errors
/// The Kubernetes API's at start, or the lease was lost (the process should restart, as a
/// client-go leader does).
pub(crate) async fn run(
    client: Client,
    namespace: &str,
    listener: TcpListener,
    lease_secs: u64,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let ready = Arc::new(AtomicBool::new(false));
    let server = axum::serve(listener, router(registry, ready.clone()))
        .with_graceful_shutdown(shutdown.clone().cancelled_owned());
    let server = tokio::spawn(server.into_future());

    let leases = LeaseManagerBuilder::new(client.clone(), NAME)
        .with_namespace(namespace)
        .with_duration(lease_secs)
        .with_grace(lease_secs - (lease_secs * 2 / 15).max(1))
        .build()
        .await?;
    ready.store(true, Ordering::Relaxed);
    let (mut leader, lease_task) = leases.watch().await;
    let won = tokio::select! {
        _ = shutdown.cancelled() => false,
        won = leader.wait_for(|l| *l) => won.map(|_| true)?,
    };
    let lost = if won {
        info!("leading");
        metrics.leader.set(1);
        // Reconciles stop (those in flight finish) on shutdown or when the lease is lost.
        let stop = shutdown.child_token();
        let (mut lease, on_loss) = (leader.clone(), stop.clone());
        let losing = tokio::spawn(async move {
            let lost = on_loss.run_until_cancelled(lease.wait_for(|l| !*l)).await;
            on_loss.cancel();
            lost.is_some()
        });
        control(client, namespace, metrics, stop.clone().cancelled_owned()).await;
        stop.cancel();
        losing.await?
    } else {
        false
    };
    drop(leader); // the lease manager's task releases the lease and ends
    lease_task.await??;
    shutdown.cancel();
    server.await??;
    anyhow::ensure!(!lost, "lost the lease");
    Ok(())
}

fn router(registry: Registry, ready: Arc<AtomicBool>) -> Router {
    let registry = Arc::new(registry);
    let metrics = move || async move {
        let mut text = String::new();
        encode(&mut text, &registry).map_or(Err(StatusCode::INTERNAL_SERVER_ERROR), |()| Ok(text))
    };
    let readyz = move || async move {
        match ready.load(Ordering::Relaxed) {
            true => (StatusCode::OK, "ok"),
            false => (StatusCode::SERVICE_UNAVAILABLE, "starting"),
        }
    };
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
}

/// One controller of Websites owning ConfigMaps and Deployments, until `stop`.
async fn control(
    client: Client,
    namespace: &str,
    metrics: Metrics,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let websites = Api::<Website>::namespaced(client.clone(), namespace);
    let (store, writer) = reflector::store();
    // Spec changes (the deletion mark bumps the generation too) and finalizer changes:
    // finalizer() adds ours and waits for that change. Our status patches do not requeue.
    let changes = watcher(websites, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            predicates::generation.combine(predicates::finalizers),
            Default::default(),
        );
    let ctx = Arc::new(Ctx {
        recorder: Recorder::new(client.clone(), NAME.into()),
        client: client.clone(),
        metrics,
    });
    let owned = watcher::Config::default();
    Controller::for_stream(changes, store)
        .owns(
            Api::<ConfigMap>::namespaced(client.clone(), namespace),
            owned.clone(),
        )
        .owns(Api::<Deployment>::namespaced(client, namespace), owned)
        .with_config(controller::Config::default().concurrency(2))
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                warn!("reconcile failed: {e}");
            }
        })
        .await;
}

async fn reconcile(site: Arc<Website>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let start = Instant::now();
    let ns = site.namespace().unwrap_or_default();
    let websites = Api::<Website>::namespaced(ctx.client.clone(), &ns);
    let result = finalizer(&websites, FINALIZER, site, |event| async {
        match event {
            finalizer::Event::Apply(site) => apply(&site, &ctx).await,
            finalizer::Event::Cleanup(site) => cleanup(&site, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    let outcome = Outcome {
        result: if result.is_ok() { "success" } else { "error" },
    };
    ctx.metrics.reconciles.get_or_create(&outcome).inc();
    ctx.metrics.durations.observe(start.elapsed().as_secs_f64());
    result
}

fn error_policy(site: Arc<Website>, error: &Error, ctx: Arc<Ctx>) -> Action {
    warn!("reconciling Website {}: {error}", site.name_any());
    ctx.metrics.errors.inc();
    Action::requeue(Duration::from_secs(5))
}

/// Makes the ConfigMap and the Deployment match the Website, and reports.
async fn apply(site: &Website, ctx: &Ctx) -> Result<Action, Error> {
    let (name, ns) = (site.name_any(), site.namespace().unwrap_or_default());
    let deployments = Api::<Deployment>::namespaced(ctx.client.clone(), &ns);
    let pages = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns);
    // A live GET: `owns` keeps no cache we could read, and a cache would not hold our own
    // apply of a moment ago (no read-your-own-writes), so a reconcile right after the create
    // would "create" it again and record a second Created Event.
    let created = deployments.get_opt(&name).await?.is_none();
    let owners: Vec<_> = site.controller_owner_ref(&()).into_iter().collect();
    let ssa = PatchParams::apply(NAME).force();
    pages
        .patch(&name, &ssa, &Patch::Apply(page(site, &owners)))
        .await?;
    let deployment = deployments
        .patch(&name, &ssa, &Patch::Apply(deployment(site, &owners)))
        .await?;
    if created {
        let note = format!("Deployment {name} serves {}", site.spec.image);
        publish(ctx, site, "Created", "Create", note).await?;
    }
    let status = WebsiteStatus {
        ready_replicas: deployment
            .status
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0),
        observed_generation: site.metadata.generation,
    };
    if site.status.as_ref() != Some(&status) {
        let websites = Api::<Website>::namespaced(ctx.client.clone(), &ns);
        let patch = Patch::Merge(json!({ "status": status }));
        websites
            .patch_status(&name, &PatchParams::default(), &patch)
            .await?;
    }
    // Owned objects' changes requeue on their own; this is a safety net.
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// The Website is being deleted: stop its pods first, then let it go.
async fn cleanup(site: &Website, ctx: &Ctx) -> Result<Action, Error> {
    let (name, ns) = (site.name_any(), site.namespace().unwrap_or_default());
    let dp = DeleteParams::default();
    for deleted in [
        Api::<Deployment>::namespaced(ctx.client.clone(), &ns)
            .delete(&name, &dp)
            .await
            .map(drop),
        Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
            .delete(&name, &dp)
            .await
            .map(drop),
    ] {
        match deleted {
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            other => other?,
        }
    }
    let note = format!("Deployment and ConfigMap {name} deleted");
    publish(ctx, site, "Deleted", "Delete", note).await?;
    Ok(Action::await_change())
}

async fn publish(
    ctx: &Ctx,
    site: &Website,
    reason: &str,
    action: &str,
    note: String,
) -> Result<(), Error> {
    let event = Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    Ok(ctx.recorder.publish(&event, &site.object_ref(&())).await?)
}

/// The page, as a ConfigMap.
fn page(site: &Website, owners: &[impl Serialize]) -> Value {
    let labels = json!({"app.kubernetes.io/instance": site.name_any()});
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": site.name_any(), "labels": labels, "ownerReferences": owners},
        "data": {"index.html": site.spec.content}})
}

/// `image` serving the page, as a Deployment.
fn deployment(site: &Website, owners: &[impl Serialize]) -> Value {
    let (name, spec) = (site.name_any(), &site.spec);
    let labels = json!({"app.kubernetes.io/instance": name});
    let pod = json!({
        "containers": [{"name": "web", "image": spec.image,
            "volumeMounts": [{"name": "page", "mountPath": "/usr/share/nginx/html"}]}],
        "volumes": [{"name": "page", "configMap": {"name": name}}]});
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "ownerReferences": owners},
        "spec": {"replicas": spec.replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod}}})
}

/// Command line.
#[derive(Debug, Parser)]
#[command(about = "The Website operator (kube-runtime version)")]
struct Args {
    /// The kubeconfig (default: $KUBECONFIG, ~/.kube/config, else in-cluster).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// The namespace whose Websites are reconciled (and where the Lease lives).
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: SocketAddr,
    /// Seconds a standby waits for the leader's lease to expire before it takes over.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..))]
    lease_duration: u64,
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
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    let client = Client::try_from(config)?;
    let listener = TcpListener::bind(args.metrics_addr).await?;
    eprintln!("metrics and probes on http://{}", listener.local_addr()?);
    let shutdown = CancellationToken::new();
    let mut term = signal(SignalKind::terminate())?;
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        on_signal.cancel();
    });
    run(
        client,
        &args.namespace,
        listener,
        args.lease_duration,
        shutdown,
    )
    .await
}
