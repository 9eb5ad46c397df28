//! Reflector semantics, each pinned by a test named after it (DESIGN.md §4 items 1–5), against
//! [`FakeSource`] with paused time.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::*;
use crate::testing::{Call, FakeSource, RecordingStore, StoreOp, status};
use crate::{
    lister_watcher::{self, WatchEvent},
    store::ObjectKey,
};

use crate::testing::config_map as cm;

mod metrics;

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("ns"), name)
}

struct Harness {
    src: FakeSource<ConfigMap>,
    store: Arc<RecordingStore<ConfigMap>>,
    handle: ReflectorHandle,
    errors: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Harness {
    fn start(src: &FakeSource<ConfigMap>, config: Config) -> Self {
        Self::start_with(src, config, |r| r)
    }

    fn start_with(
        src: &FakeSource<ConfigMap>,
        config: Config,
        customize: impl FnOnce(
            Reflector<ConfigMap, FakeSource<ConfigMap>>,
        ) -> Reflector<ConfigMap, FakeSource<ConfigMap>>,
    ) -> Self {
        let store = Arc::new(RecordingStore::new());
        let errors = Arc::new(Mutex::new(Vec::new()));
        let errs = Arc::clone(&errors);
        let reflector = Reflector::new(src.clone(), store.clone(), config)
            .with_error_handler(Arc::new(move |e: &Error| errs.lock().push(e.to_string())));
        let reflector = customize(reflector);
        let handle = reflector.handle();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(reflector.run(cancel.clone()));
        Self {
            src: src.clone(),
            store,
            handle,
            errors,
            cancel,
            task,
        }
    }

    async fn wait_calls(&self, pred: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        for _ in 0..100_000 {
            let calls = self.src.calls();
            if pred(&calls) {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("condition on calls never held: {:?}", self.src.calls());
    }

    async fn wait_watching(&self) {
        for _ in 0..100_000 {
            if self.src.watcher_count() > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the reflector never opened a watch: {:?}", self.src.calls());
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
    }
}

fn lists(calls: &[Call]) -> Vec<&Call> {
    calls
        .iter()
        .filter(|c| matches!(c, Call::List { .. }))
        .collect()
}

fn watches(calls: &[Call]) -> Vec<&Call> {
    calls
        .iter()
        .filter(|c| matches!(c, Call::Watch { .. }))
        .collect()
}

fn list_config() -> Config {
    Config::default().initial_list(InitialList::List)
}

mod list;
mod reuse;
mod store;
mod watch;
