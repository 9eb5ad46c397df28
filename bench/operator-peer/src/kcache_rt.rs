//! The Team operator on kcache-runtime's Manager (its default lean caches).

use std::{
    path::PathBuf,
    sync::{Arc, atomic::Ordering},
};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcache::store::NAMESPACE_INDEX;
use kcache_runtime::{
    Action, ApiObject, Context, Manager, ObjectKey, api,
    manager::{self, Cached},
};
use kube::ResourceExt;
use kube_client::config::{KubeConfigOptions, Kubeconfig};

use crate::{TEAM_LABEL, Team, Tracker, config_map, held, is_watch_response};

/// The keys of the cached objects of `namespace`, from the cache's namespace index (nothing
/// decoded).
fn keys_in<C: ApiObject>(cache: &Cached<C>, namespace: &str) -> Vec<ObjectKey> {
    cache
        .index_keys(NAMESPACE_INDEX, namespace)
        .expect("every cache has the namespace index")
}

/// Runs the operator until it fails.
pub(crate) async fn run(
    kubeconfig: PathBuf,
    workers: usize,
    tracker: Arc<Tracker>,
) -> anyhow::Result<()> {
    let kubeconfig = Kubeconfig::read_from(&kubeconfig)?;
    let config =
        kube_client::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await?;
    let (requests, watches) = (tracker.requests.clone(), tracker.watches.clone());
    let client = kcache_client::Client::from_config_observed(
        config,
        Arc::new(move |_, headers| {
            requests.fetch_add(1, Ordering::Relaxed);
            if is_watch_response(headers) {
                watches.fetch_add(1, Ordering::Relaxed);
            }
        }),
    )?;
    let manager = Manager::new(client, manager::Config::new("team-operator"))?;
    manager.cache::<ConfigMap>(manager::Cache::new().label_selector(TEAM_LABEL))?;
    let pods = manager.informer::<Pod>();
    let teams = manager.informer::<Team>();
    let mapped = tracker.clone();
    manager
        .controller::<Team>()
        .owns::<ConfigMap>()
        .watches::<Pod>(move |pod| {
            mapped.pod_event();
            keys_in(
                &teams,
                pod.metadata.namespace.as_deref().unwrap_or_default(),
            )
        })
        .workers(workers)
        .build(move |team: Arc<Team>, ctx: Context<Team>| {
            let (pods, tracker) = (pods.clone(), tracker.clone());
            async move { reconcile(&team, &ctx, &pods, &tracker).await }
        })?;
    manager.run().await?;
    Ok(())
}

async fn reconcile(
    team: &Team,
    ctx: &Context<Team>,
    pods: &Cached<Pod>,
    tracker: &Tracker,
) -> Result<Action, api::Error> {
    let (namespace, name) = (team.namespace().unwrap_or_default(), team.name_any());
    let count = keys_in(pods, &namespace).len();
    let current = ctx.get::<ConfigMap>(&name);
    if held(current.as_deref()) != Some(count.to_string().as_str()) {
        ctx.apply_owned(config_map(&name, count)).await?;
    }
    tracker.record(&namespace, &name, count);
    Ok(Action::Done)
}
