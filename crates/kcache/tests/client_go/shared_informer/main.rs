//! client-go v0.36.5's `shared_informer_test.go, processor_listener_test.go`, ported one for one
//! (see `README.md` in this folder).
//!
//! How the Go scaffolding maps (`README.md` has the table):
//!
//! - `FakeControllerSource` is [`FakeSource`]; it sets resourceVersions itself, so an expected
//!   object takes the resourceVersion its `upsert` returned.
//! - Go's `testListener` is [`TestListener`], with the same `ok()`: poll for the expected set of
//!   names for up to 2 s, then wait 1 s for stragglers and check again. The tests run in tokio's
//!   paused time, where those waits are exact and cost nothing, and register their handlers
//!   `inline` (on the listener's task) so that every delivery happens on the runtime, before
//!   paused time may move on (the blocking pool runs outside the runtime's clock).
//! - `eventHandlerCount` is `informer.handlers().len()`; `isRegistered(informer, reg)` is "one of
//!   `informer.handlers()` has `reg`'s name" (names are unique within an informer).
//! - goleak's check that every goroutine stopped is the runtime's count of live tasks.
//!
//! Each test is named after the Go test it ports (snake case; a subtest is `<test>__<subtest>`).

#![allow(non_snake_case)] // `<test>__<subtest>` names

use std::{
    collections::{BTreeSet, HashMap},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kcache::{
    SharedIndexInformer,
    informer::{
        self, Delivery, Error, EventHandler, HandlerConfig, HandlerFns, HandlerRegistration,
    },
    reflector,
    store::{IndexFunc, ObjectKey},
    testing::{FakeSource, status},
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Every bounded wait of these tests: generous, and fails loudly.
const WAIT: Duration = Duration::from_secs(60);

fn pod(name: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_owned());
    pod
}

fn pod_with_labels(name: &str, labels: &[(&str, &str)]) -> Pod {
    let mut pod = pod(name);
    pod.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    pod
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(None, name)
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn informer_with_resync(src: &FakeSource<Pod>, resync: Duration) -> SharedIndexInformer<Pod> {
    SharedIndexInformer::new(
        src.clone(),
        informer::Config::default().resync_period(resync),
    )
}

/// Go's `testListener`: records the names of the objects it is given on add and update.
struct TestListener {
    name: String,
    resync_period: Duration,
    expected: Mutex<BTreeSet<String>>,
    received: Mutex<Vec<String>>,
}

impl TestListener {
    fn new(name: &str, resync_period: Duration, expected: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            resync_period,
            expected: Mutex::new(expected.iter().map(|s| (*s).to_owned()).collect()),
            received: Mutex::new(Vec::new()),
        })
    }

    fn handle(&self, obj: &Pod) {
        self.received.lock().push(name_of(obj));
    }

    fn satisfied_expectations(&self) -> bool {
        let received: BTreeSet<String> = self.received.lock().iter().cloned().collect();
        received == *self.expected.lock()
    }

    /// Go's `ok()`: the expected names arrive within 2 s, and nothing else in the next second.
    async fn ok(&self) -> bool {
        let mut satisfied = false;
        for _ in 0..=20 {
            if self.satisfied_expectations() {
                satisfied = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !satisfied {
            return false;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.satisfied_expectations()
    }

    fn reset(&self) {
        self.received.lock().clear();
    }

    fn expect(&self, names: &[&str]) {
        *self.expected.lock() = names.iter().map(|s| (*s).to_owned()).collect();
    }

    fn report(&self) -> String {
        format!(
            "{}: expected {:?}, got {:?}",
            self.name,
            self.expected.lock(),
            self.received.lock()
        )
    }

    /// `AddEventHandlerWithResyncPeriod(l, l.resyncPeriod)`, delivered inline (see the header).
    fn register(
        self: &Arc<Self>,
        informer: &SharedIndexInformer<Pod>,
    ) -> Result<HandlerRegistration, Error> {
        informer.add_event_handler_with_config(
            Arc::clone(self),
            HandlerConfig::default()
                .resync_period(self.resync_period)
                .delivery(Delivery::Inline),
        )
    }
}

impl EventHandler<Pod> for TestListener {
    fn on_add(&self, obj: &Arc<Pod>, _: bool) {
        self.handle(obj);
    }
    fn on_update(&self, _: &Arc<Pod>, new: &Arc<Pod>) {
        self.handle(new);
    }
}

/// An informer running on its own task until [`stop`](Self::stop).
struct Running {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(informer: &SharedIndexInformer<Pod>) -> Self {
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (i, c) = (informer.clone(), cancel.clone());
            async move { i.run(c).await }
        });
        Self { cancel, task }
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the informer did not stop")
            .expect("the informer's task panicked");
    }
}

fn handler_count(informer: &SharedIndexInformer<Pod>) -> usize {
    informer.handlers().len()
}

fn is_registered(informer: &SharedIndexInformer<Pod>, reg: &HandlerRegistration) -> bool {
    informer.handlers().iter().any(|h| h.name() == reg.name())
}

async fn wait_for_sync(informer: &SharedIndexInformer<Pod>) {
    tokio::time::timeout(WAIT, informer.wait_for_sync())
        .await
        .expect("the informer never synced");
}

/// An index of a pod's label keys (Go's `"labels"` index func).
fn label_keys() -> IndexFunc<Pod> {
    Arc::new(|pod: &Pod| {
        pod.metadata
            .labels
            .iter()
            .flat_map(|labels| labels.keys().cloned())
            .collect()
    })
}

fn by_name(mut pods: Vec<Arc<Pod>>) -> Vec<Pod> {
    pods.sort_by_key(|p| name_of(p));
    pods.iter().map(|p| (**p).clone()).collect()
}

fn as_set(values: Vec<String>) -> BTreeSet<String> {
    values.into_iter().collect()
}

mod handlers;
mod lifecycle;
mod panics;
mod resync;
