//! Randomized convergence: random creates/updates/deletes interleaved with random faults
//! (dropped and broken watches, compaction forcing 410s, ERROR events, failing lists and
//! watches, a short history window, a slow handler, a coalescing handler), over many seeds.
//! At the end the informer's cache equals the source's state, and the state rebuilt from the
//! events each handler saw equals it too: nothing lost, nothing phantom.
//!
//! `KCACHE_CONVERGENCE_SEEDS` sets the number of seeds (default 200).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    fifo::QueueKind,
    informer::{self, BufferMode, DeletedObject, EventHandler, SharedIndexInformer},
    reflector,
    store::{ObjectKey, meta_namespace_key},
    testing::{FakeSource, status},
};
use kube_core::ObjectMeta;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng, rngs::StdRng};
use tokio_util::sync::CancellationToken;

fn cm(name: &str, data: u32) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_owned(), data.to_string())].into()),
        ..ConfigMap::default()
    }
}

fn rv(o: &ConfigMap) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}

/// Rebuilds key → resourceVersion from the notifications it receives.
struct Rebuilder {
    state: Mutex<BTreeMap<ObjectKey, String>>,
    slow: bool,
}

impl Rebuilder {
    fn new(slow: bool) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(BTreeMap::new()),
            slow,
        })
    }

    fn pause(&self) {
        if self.slow {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl EventHandler<ConfigMap> for Rebuilder {
    fn on_add(&self, obj: &Arc<ConfigMap>, _initial: bool) {
        self.pause();
        let k = meta_namespace_key(&**obj).unwrap();
        let prev = self.state.lock().insert(k.clone(), rv(obj));
        assert!(prev.is_none(), "add of a key the handler already had: {k}");
    }

    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.pause();
        let k = meta_namespace_key(&**new).unwrap();
        let mut state = self.state.lock();
        let prev = state.insert(k.clone(), rv(new));
        assert_eq!(
            prev.as_deref(),
            Some(rv(old).as_str()),
            "update's old state is not what the handler last saw for {k}"
        );
    }

    fn on_delete(&self, obj: &DeletedObject<ConfigMap>) {
        self.pause();
        let k = meta_namespace_key(&**obj.object()).unwrap();
        let prev = self.state.lock().remove(&k);
        assert!(prev.is_some(), "delete of a key the handler never had: {k}");
    }
}

fn source_state(src: &FakeSource<ConfigMap>) -> BTreeMap<ObjectKey, String> {
    src.objects()
        .iter()
        .map(|o| (meta_namespace_key(o).unwrap(), rv(o)))
        .collect()
}

async fn run_seed(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let src = FakeSource::new();
    let names: Vec<String> = (0..24).map(|i| format!("cm-{i:02}")).collect();
    for name in names.iter().take(rng.random_range(0..12)) {
        src.upsert(cm(name, 0));
    }
    if rng.random_bool(0.3) {
        src.set_history_limit(rng.random_range(3..20));
    }
    let queue = [
        QueueKind::RealFifo,
        QueueKind::RealFifoNonAtomic,
        QueueKind::DeltaFifo,
    ][rng.random_range(0..3)];
    let rconfig = reflector::Config::default()
        .initial_list(if rng.random_bool(0.5) {
            kcache::reflector::InitialList::Stream
        } else {
            kcache::reflector::InitialList::List
        })
        .page_size(rng.random_range(1..8));
    if rng.random_bool(0.5) {
        src.set_paginate_at_rv0(true);
    }
    let config = informer::Config::default()
        .queue(queue)
        .reflector(rconfig)
        .resync_period(Duration::from_secs(rng.random_range(0..3) * 7));
    let informer = SharedIndexInformer::new(src.clone(), config);
    let fast = Rebuilder::new(false);
    let coalescing = Rebuilder::new(false);
    let slow = Rebuilder::new(true);
    let regs = [
        informer
            .add_event_handler_with_config(
                Arc::clone(&fast),
                informer::HandlerConfig::default().delivery(informer::Delivery::Inline),
            )
            .unwrap(),
        informer
            .add_event_handler_with_config(
                Arc::clone(&coalescing),
                informer::HandlerConfig::default().buffer(BufferMode::Coalescing),
            )
            .unwrap(),
        informer.add_event_handler(Arc::clone(&slow)).unwrap(),
    ];
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });

    let mut late = None;
    for step in 0..120 {
        let name = &names[rng.random_range(0..names.len())];
        let key = ObjectKey::new(Some("ns"), name);
        match rng.random_range(0..100) {
            0..40 => {
                src.upsert(cm(name, step));
            }
            40..55 => {
                src.delete(&key);
            }
            55..60 => src.drop_watches(),
            60..63 => src.break_watches(),
            63..67 => src.compact(),
            67..70 => {
                src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"))
            }
            70..73 => src.fail_lists(1, status(500, "InternalError", "etcd is sad")),
            73..76 => src.fail_watches(1, status(429, "TooManyRequests", "slow down")),
            76..80 => src.bookmark(),
            80..82 if late.is_none() => {
                // A handler registered while the informer runs.
                let h = Rebuilder::new(false);
                late = Some((Arc::clone(&h), informer.add_event_handler(h).unwrap()));
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..400))).await;
    }

    let want = source_state(&src);
    let mut converged = false;
    for _ in 0..2_000 {
        let cache: BTreeMap<ObjectKey, String> = informer
            .indexer()
            .list()
            .iter()
            .map(|o| (meta_namespace_key(&**o).unwrap(), rv(o)))
            .collect();
        let handlers_done = regs.iter().all(|r| r.pending() == 0)
            && late.as_ref().is_none_or(|(_, r)| r.pending() == 0);
        if cache == want && handlers_done {
            converged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let cache: BTreeMap<ObjectKey, String> = informer
        .indexer()
        .list()
        .iter()
        .map(|o| (meta_namespace_key(&**o).unwrap(), rv(o)))
        .collect();
    assert!(
        converged,
        "seed {seed} ({queue:?}): cache never converged\ncache {cache:?}\nwant  {want:?}"
    );
    assert_eq!(
        *fast.state.lock(),
        want,
        "seed {seed} ({queue:?}): fast handler"
    );
    assert_eq!(
        *coalescing.state.lock(),
        want,
        "seed {seed} ({queue:?}): coalescing handler"
    );
    assert_eq!(
        *slow.state.lock(),
        want,
        "seed {seed} ({queue:?}): slow handler"
    );
    if let Some((h, _)) = &late {
        assert_eq!(
            *h.state.lock(),
            want,
            "seed {seed} ({queue:?}): handler added late"
        );
    }
    cancel.cancel();
    task.await.unwrap();
}

#[test]
fn informer_converges_under_random_churn_and_faults() {
    let seeds: u64 = std::env::var("KCACHE_CONVERGENCE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    for seed in 0..seeds {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(run_seed(seed));
    }
}
