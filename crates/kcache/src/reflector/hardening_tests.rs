//! The reflector against a source that misbehaves: every storm-prone fault backs off, every
//! server-controlled delay is capped, protocol errors leave the cache untouched, panics are
//! caught. A [`Scripted`] source wraps [`FakeSource`] and overrides its next answers.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

use super::*;
use crate::{
    lister_watcher::{self, ListParams, ObjectList, WatchEvent, WatchParams},
    testing::{Call, FakeSource, RecordingStore, StoreOp, status},
};

use crate::testing::config_map as cm;

type ListRewrite = Box<dyn FnMut(ObjectList<ConfigMap>) -> ObjectList<ConfigMap> + Send>;
type WatchAnswer = Box<
    dyn FnMut() -> Result<
            Vec<Result<WatchEvent<ConfigMap>, lister_watcher::Error>>,
            lister_watcher::Error,
        > + Send,
>;

/// A [`FakeSource`] whose answers can be overridden: every list answer rewritten while a
/// rewrite is set, every watch answered by a script while one is set.
#[derive(Clone)]
struct Scripted {
    inner: FakeSource<ConfigMap>,
    list_rewrite: Arc<Mutex<Option<ListRewrite>>>,
    watch_script: Arc<Mutex<Option<WatchAnswer>>>,
    list_calls: Arc<AtomicUsize>,
    watch_calls: Arc<AtomicUsize>,
    panic_lists: Arc<AtomicUsize>,
}

impl Scripted {
    fn new(inner: &FakeSource<ConfigMap>) -> Self {
        Self {
            inner: inner.clone(),
            list_rewrite: Arc::default(),
            watch_script: Arc::default(),
            list_calls: Arc::default(),
            watch_calls: Arc::default(),
            panic_lists: Arc::default(),
        }
    }

    fn rewrite_lists(
        &self,
        f: impl FnMut(ObjectList<ConfigMap>) -> ObjectList<ConfigMap> + Send + 'static,
    ) {
        *self.list_rewrite.lock() = Some(Box::new(f));
    }

    fn script_watches(
        &self,
        f: impl FnMut() -> Result<
            Vec<Result<WatchEvent<ConfigMap>, lister_watcher::Error>>,
            lister_watcher::Error,
        > + Send
        + 'static,
    ) {
        *self.watch_script.lock() = Some(Box::new(f));
    }

    /// The server behaves again.
    fn heal(&self) {
        *self.list_rewrite.lock() = None;
        *self.watch_script.lock() = None;
    }

    fn requests(&self) -> usize {
        self.list_calls.load(Ordering::SeqCst) + self.watch_calls.load(Ordering::SeqCst)
    }
}

impl ListerWatcher<ConfigMap> for Scripted {
    async fn list(
        &self,
        params: &ListParams,
    ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error> {
        self.list_calls.fetch_add(1, Ordering::SeqCst);
        if self
            .panic_lists
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            panic!("the lister-watcher blew up");
        }
        let list = self.inner.list(&for_inner_source(params)).await?;
        Ok(match self.list_rewrite.lock().as_mut() {
            Some(f) => f(list),
            None => list,
        })
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<lister_watcher::WatchStream<ConfigMap>, lister_watcher::Error> {
        self.watch_calls.fetch_add(1, Ordering::SeqCst);
        let scripted = self.watch_script.lock().as_mut().map(|f| f());
        match scripted {
            Some(Ok(items)) => Ok(futures::stream::iter(items).boxed()),
            Some(Err(e)) => Err(e),
            None => self.inner.watch(params, resource_version).await,
        }
    }

    fn describe(&self) -> String {
        "configmaps in namespace ns".into()
    }
}

/// `params` for the inner source of a rewriting test source: a continue token made up by a
/// rewrite (`fake-…`) means nothing to it, so it lists from the start (shared with
/// `recovery_tests` and `pager_tests`).
pub(super) fn for_inner_source(params: &ListParams) -> ListParams {
    let mut params = params.clone();
    if params
        .continue_token
        .as_deref()
        .is_some_and(|t| t.starts_with("fake-"))
    {
        params.continue_token = None;
        params.resource_version = Some(String::new());
    }
    params
}

/// A running reflector over a recording store, with the errors it reported (shared with
/// `recovery_tests`).
pub(super) struct Run {
    pub(super) store: Arc<RecordingStore<ConfigMap>>,
    pub(super) handle: ReflectorHandle,
    pub(super) errors: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

pub(super) fn start<L: ListerWatcher<ConfigMap> + Clone>(src: &L, config: Config) -> Run {
    start_with(src, config, |r| r)
}

fn start_with<L: ListerWatcher<ConfigMap> + Clone>(
    src: &L,
    config: Config,
    customize: impl FnOnce(Reflector<ConfigMap, L>) -> Reflector<ConfigMap, L>,
) -> Run {
    let store = Arc::new(RecordingStore::new());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let errs = Arc::clone(&errors);
    let reflector = customize(
        Reflector::new(src.clone(), store.clone(), config)
            .with_error_handler(Arc::new(move |e: &Error| errs.lock().push(e.to_string()))),
    );
    let handle = reflector.handle();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    Run {
        store,
        handle,
        errors,
        cancel,
        task,
    }
}

impl Run {
    pub(super) async fn stop(self) {
        self.cancel.cancel();
        self.task.await.expect("the reflector task ends cleanly");
    }

    pub(super) fn has_error(&self, needle: &str) -> bool {
        self.errors.lock().iter().any(|e| e.contains(needle))
    }

    /// The names the store holds after the last replace and the events since.
    pub(super) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .store
            .snapshot()
            .into_keys()
            .map(|k| k.name().to_owned())
            .collect();
        names.sort();
        names
    }
}

/// Requests made during one virtual minute of a fault: the storm bound.
async fn requests_in_a_minute(src: &Scripted) -> usize {
    let before = src.requests();
    tokio::time::sleep(Duration::from_secs(60)).await;
    src.requests() - before
}

/// At most this many requests in a virtual minute while a fault lasts: with the server
/// backoff (800 ms doubling to 30 s) a failing reflector makes about 7.
const STORM_BOUND: usize = 15;

fn list_config() -> Config {
    Config::default().initial_list(InitialList::List)
}

async fn settle() {
    tokio::time::sleep(Duration::from_secs(120)).await;
}

mod bad_answers;
mod limits;
mod stalls_and_panics;
