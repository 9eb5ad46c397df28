//! The Team operator on kube-runtime 5's Controller: reflector stores of Teams, ConfigMaps and
//! Pods fed by the controller's own watch streams, and an index of Teams and Pods by namespace
//! (kube-runtime's stores have none) kept from the same streams.
//!
//! The reconciles wait for the Pod and ConfigMap stores' first lists through one [`Ready`]
//! gate, never each on `Store::wait_until_ready`: kube-runtime 5's store readiness wakes only
//! the last task that polled it (a oneshot receiver keeps one waker), so with concurrent
//! reconciles all but one of those waiting would sleep forever, each holding a worker.

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use futures::{StreamExt, TryStreamExt, future};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{Patch, PatchParams},
    client::{Body, ClientBuilder},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{
        Controller, WatchStreamExt,
        controller::{self, Action},
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};

use crate::{FIELD_MANAGER, TEAM_LABEL, Team, Tracker, config_map, held, is_watch};

/// Names of the objects of each namespace, kept from a watcher's events as the reflector
/// keeps its store (a relist replaces it at its end).
#[derive(Debug, Default)]
struct NsIndex {
    live: HashMap<String, HashSet<String>>,
    building: Option<HashMap<String, HashSet<String>>>,
}

type Index = Arc<parking_lot::RwLock<NsIndex>>;

fn apply<K: Resource>(index: &Index, event: &watcher::Event<K>) {
    let key = |o: &K| {
        let m = o.meta();
        (
            m.namespace.clone().unwrap_or_default(),
            m.name.clone().unwrap_or_default(),
        )
    };
    let mut index = index.write();
    match event {
        watcher::Event::Init => index.building = Some(HashMap::new()),
        watcher::Event::InitApply(o) => {
            let (ns, name) = key(o);
            if let Some(b) = index.building.as_mut() {
                b.entry(ns).or_default().insert(name);
            }
        }
        watcher::Event::InitDone => {
            if let Some(b) = index.building.take() {
                index.live = b;
            }
        }
        watcher::Event::Apply(o) => {
            let (ns, name) = key(o);
            index.live.entry(ns).or_default().insert(name);
        }
        watcher::Event::Delete(o) => {
            let (ns, name) = key(o);
            if let Some(names) = index.live.get_mut(&ns) {
                names.remove(&name);
            }
        }
    }
}

/// Set once the Pod and ConfigMap stores hold their first lists; any number of tasks may wait
/// on it. One task waits on the stores themselves ([`Ready::watch`]).
#[derive(Debug, Default)]
struct Ready(tokio::sync::SetOnce<()>);

impl Ready {
    /// Spawns the one task that waits for the stores to be ready (as the controller's streams
    /// fill them), then opens the gate.
    fn watch(pods: Store<Pod>, cms: Store<ConfigMap>) -> Arc<Self> {
        let ready = Arc::new(Self::default());
        let gate = ready.clone();
        tokio::spawn(async move {
            if pods.wait_until_ready().await.is_ok() && cms.wait_until_ready().await.is_ok() {
                let _ = gate.0.set(());
            }
        });
        ready
    }

    /// Waits until the gate is open.
    async fn wait(&self) {
        self.0.wait().await;
    }
}

struct Ctx {
    client: Client,
    ready: Arc<Ready>,
    pod_index: Index,
    cms: Store<ConfigMap>,
    tracker: Arc<Tracker>,
}

/// Runs the operator until it fails.
pub(crate) async fn run(
    kubeconfig: PathBuf,
    workers: usize,
    tracker: Arc<Tracker>,
) -> anyhow::Result<()> {
    let kubeconfig = Kubeconfig::read_from(&kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let (requests, watches) = (tracker.requests.clone(), tracker.watches.clone());
    let count = tower::util::MapRequestLayer::new(move |req: http::Request<Body>| {
        requests.fetch_add(1, Ordering::Relaxed);
        if is_watch(req.uri()) {
            watches.fetch_add(1, Ordering::Relaxed);
        }
        req
    });
    let client = ClientBuilder::try_from(config)?.with_layer(&count).build();

    let (teams, team_writer) = reflector::store::<Team>();
    let team_index = Index::default();
    let idx = team_index.clone();
    let team_events = watcher(Api::<Team>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .inspect_ok(move |e| apply(&idx, e));
    let team_stream = reflector::reflector(team_writer, team_events).applied_objects();

    let (cms, cm_writer) = reflector::store::<ConfigMap>();
    let cm_config = watcher::Config::default().labels(TEAM_LABEL);
    let cm_events = watcher(Api::<ConfigMap>::all(client.clone()), cm_config).default_backoff();
    let cm_stream = reflector::reflector(cm_writer, cm_events).touched_objects();

    let (pods, pod_writer) = reflector::store::<Pod>();
    let pod_index = Index::default();
    let idx = pod_index.clone();
    let pod_events = watcher(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .inspect_ok(move |e| apply(&idx, e));
    let pod_stream = reflector::reflector(pod_writer, pod_events).touched_objects();

    let mapped = tracker.clone();
    let map = move |pod: Pod| {
        mapped.pod_event();
        let ns = pod.namespace().unwrap_or_default();
        let names: Vec<String> = team_index
            .read()
            .live
            .get(&ns)
            .map(|n| n.iter().cloned().collect())
            .unwrap_or_default();
        names
            .into_iter()
            .map(move |name| ObjectRef::<Team>::new(&name).within(&ns))
    };
    let ctx = Arc::new(Ctx {
        client,
        ready: Ready::watch(pods, cms.clone()),
        pod_index,
        cms,
        tracker,
    });
    Controller::for_stream(team_stream, teams)
        .owns_stream(cm_stream)
        .watches_stream(pod_stream, map)
        .with_config(controller::Config::default().concurrency(u16::try_from(workers)?))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| future::ready(()))
        .await;
    anyhow::bail!("the controller stopped")
}

async fn reconcile(team: Arc<Team>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    // The reconciles read the stores: wait until they hold their first lists.
    ctx.ready.wait().await;
    let (namespace, name) = (team.namespace().unwrap_or_default(), team.name_any());
    let count = ctx
        .pod_index
        .read()
        .live
        .get(&namespace)
        .map_or(0, HashSet::len);
    let current = ctx.cms.get(&ObjectRef::new(&name).within(&namespace));
    if held(current.as_deref()) != Some(count.to_string().as_str()) {
        let mut cm = config_map(&name, count);
        cm.metadata.namespace = Some(namespace.clone());
        cm.metadata.owner_references = team.controller_owner_ref(&()).map(|o| vec![o]);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        Api::<ConfigMap>::namespaced(ctx.client.clone(), &namespace)
            .patch(&name, &params, &Patch::Apply(&cm))
            .await?;
    }
    ctx.tracker.record(&namespace, &name, count);
    Ok(Action::await_change())
}

fn error_policy(team: Arc<Team>, error: &kube::Error, _ctx: Arc<Ctx>) -> Action {
    eprintln!(
        "operator-peer: reconcile of {} failed: {error}",
        team.name_any()
    );
    Action::requeue(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use std::{
        pin::pin,
        sync::atomic::{AtomicUsize, Ordering},
        task::{Context, Poll},
    };

    use futures::task::{ArcWake, waker};

    use super::*;

    /// Counts its wakes.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl ArcWake for Wakes {
        fn wake_by_ref(arc_self: &Arc<Self>) {
            arc_self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Why the gate exists: two tasks waiting on one store's readiness, and only the one that
    /// polled last is woken when the store becomes ready (if kube-runtime fixes this, the gate
    /// can go).
    #[test]
    fn kube_store_readiness_wakes_only_the_last_waiter() {
        let (store, mut writer) = reflector::store::<Pod>();
        let (a, b) = (Arc::new(Wakes::default()), Arc::new(Wakes::default()));
        let (wa, wb) = (waker(a.clone()), waker(b.clone()));
        let mut first = pin!(store.wait_until_ready());
        let mut second = pin!(store.wait_until_ready());
        assert!(
            first
                .as_mut()
                .poll(&mut Context::from_waker(&wa))
                .is_pending()
        );
        assert!(
            second
                .as_mut()
                .poll(&mut Context::from_waker(&wb))
                .is_pending()
        );
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        assert_eq!(b.0.load(Ordering::SeqCst), 1, "the last waiter is woken");
        assert_eq!(a.0.load(Ordering::SeqCst), 0, "the first waiter is not");
    }

    /// Every task waiting on the gate is woken once both stores hold their first lists.
    #[tokio::test]
    async fn the_gate_wakes_every_waiter() {
        let (pods, mut pod_writer) = reflector::store::<Pod>();
        let (cms, mut cm_writer) = reflector::store::<ConfigMap>();
        let ready = Ready::watch(pods, cms);
        let wakes: Vec<_> = (0..4).map(|_| Arc::new(Wakes::default())).collect();
        let mut waits: Vec<_> = (0..4).map(|_| Box::pin(ready.wait())).collect();
        for (wait, w) in waits.iter_mut().zip(&wakes) {
            let waker = waker(w.clone());
            assert!(
                wait.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending()
            );
        }
        for e in [watcher::Event::Init, watcher::Event::InitDone] {
            pod_writer.apply_watcher_event(&e);
        }
        tokio::task::yield_now().await;
        for e in [watcher::Event::Init, watcher::Event::InitDone] {
            cm_writer.apply_watcher_event(&e);
        }
        // The gate's task opens it; every waiter is then woken and done.
        ready.wait().await;
        for (wait, w) in waits.iter_mut().zip(&wakes) {
            assert_eq!(w.0.load(Ordering::SeqCst), 1, "each waiter is woken once");
            let waker = waker(w.clone());
            assert_eq!(
                wait.as_mut().poll(&mut Context::from_waker(&waker)),
                Poll::Ready(())
            );
        }
    }
}
