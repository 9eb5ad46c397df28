//! Informer semantics (DESIGN.md §4 items 10–14), each pinned by a named test against
//! [`FakeSource`] with paused time.

use crate::test_support::eventually;
use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::{
    fifo::QueueKind,
    reflector,
    store::{ObjectKey, meta_namespace_key},
    testing::FakeSource,
};

use crate::testing::config_map as cm;

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("ns"), name)
}

fn rv(o: &ConfigMap) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}

/// Records every notification as a line, and rebuilds the state from them.
#[derive(Default)]
struct Recorder {
    log: Mutex<Vec<String>>,
    state: Mutex<BTreeMap<ObjectKey, String>>,
}

impl EventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: &Arc<ConfigMap>, initial: bool) {
        let k = meta_namespace_key(&**obj).unwrap();
        self.log
            .lock()
            .push(format!("add {k} {} {initial}", rv(obj)));
        self.state.lock().insert(k, rv(obj));
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let k = meta_namespace_key(&**new).unwrap();
        self.log
            .lock()
            .push(format!("update {k} {}->{}", rv(old), rv(new)));
        self.state.lock().insert(k, rv(new));
    }
    fn on_delete(&self, obj: &DeletedObject<ConfigMap>) {
        let k = meta_namespace_key(&**obj.object()).unwrap();
        let tomb = if obj.is_final_state_unknown() {
            " tombstone"
        } else {
            ""
        };
        self.log.lock().push(format!("delete {k}{tomb}"));
        self.state.lock().remove(&k);
    }
}

fn source_state(src: &FakeSource<ConfigMap>) -> BTreeMap<ObjectKey, String> {
    src.objects()
        .iter()
        .map(|o| (meta_namespace_key(o).unwrap(), rv(o)))
        .collect()
}

fn cache_state(i: &SharedIndexInformer<ConfigMap>) -> BTreeMap<ObjectKey, String> {
    i.indexer()
        .list()
        .iter()
        .map(|o| (meta_namespace_key(&**o).unwrap(), rv(o)))
        .collect()
}

struct Running {
    informer: SharedIndexInformer<ConfigMap>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(informer: &SharedIndexInformer<ConfigMap>) -> Self {
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let i = informer.clone();
            let c = cancel.clone();
            async move { i.run(c).await }
        });
        Self {
            informer: informer.clone(),
            cancel,
            task,
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
        assert!(self.informer.is_stopped());
    }
}

fn config() -> Config {
    Config::default()
}

mod delivery;
mod events;
mod handlers;
mod removal;
