//! client-go v0.36.5's `controller_test.go`, ported one for one (see `README.md` in this folder).
//!
//! client-go's `controller.go` has two layers. The low-level `Controller` (`New(&Config{Queue,
//! ListerWatcher, Process})`) is a reflector feeding a FIFO and a loop popping it into a user
//! `Process` function: kcache has the same parts in public, [`Reflector`] into a [`RealFifo`]
//! drained with [`Fifo::pop_batch`], and `example` composes them. `NewInformer` and the tests
//! whose `Process` is client-go's own `processDeltas`/`processDeltasInBatch` (apply to the store,
//! then notify a handler) are kcache's [`SharedIndexInformer`] with one handler, whose indexer
//! is the store; `README.md` lists each test with how it maps.
//!
//! Conventions as in `shared_informer.rs`: [`FakeSource`] is `FakeControllerSource` (it sets
//! resourceVersions itself); tests without threads of their own run in paused time with
//! `inline` handlers; client-go's `fifo.Replace` / `ResetWatch` (a relist) is a disruption of
//! the source — its watches dropped and its history compacted, with the changes made in between
//! — after which the reflector must relist.
//!
//! Each test is named after the Go test it ports (snake case; a subtest is `<test>__<subtest>`).

#![allow(non_snake_case)] // `<test>__<subtest>` names

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcache::{
    SharedIndexInformer,
    fifo::{DeltaObject, DeltaType, Fifo, QueueKind, RealFifo},
    informer::{self, DeletedObject, Delivery, EventHandler, HandlerConfig, HandlerFns},
    reflector::{self, Reflector, ReflectorStore},
    store::{ObjectKey, Reader, ThreadSafeStore, meta_namespace_key},
    testing::{Call, FakeSource},
};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Every bounded wait of these tests: generous, and fails loudly.
const WAIT: Duration = Duration::from_secs(60);

fn pod(namespace: Option<&str>, name: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.namespace = namespace.map(str::to_owned);
    pod.metadata.name = Some(name.to_owned());
    pod
}

fn key_of(pod: &Pod) -> ObjectKey {
    meta_namespace_key(pod).expect("test pods have names")
}

fn rv_of(pod: &Pod) -> String {
    pod.metadata.resource_version.clone().unwrap_or_default()
}

/// An informer running on its own task until [`stop`](Self::stop).
struct Running {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start<K>(informer: &SharedIndexInformer<K>) -> Self
    where
        K: kube_core::Resource + Clone + Send + Sync + 'static,
    {
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

async fn wait_for_sync<K>(informer: &SharedIndexInformer<K>)
where
    K: kube_core::Resource + Clone + Send + Sync + 'static,
{
    tokio::time::timeout(WAIT, informer.wait_for_sync())
        .await
        .expect("timed out waiting for cache sync");
}

/// Polls `cond` every millisecond until it holds; panics with `what` after [`WAIT`].
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    tokio::time::timeout(WAIT, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}"));
}

/// Receives `n` keys from `rx`, each within [`WAIT`], as a sorted set.
async fn receive_keys(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    n: usize,
) -> Vec<String> {
    let mut out = BTreeSet::new();
    for _ in 0..n {
        let key = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("a deletion was never reported")
            .expect("the reporting side went away");
        out.insert(key);
    }
    out.into_iter().collect()
}

mod examples;
mod replace_events;
mod transforms;
