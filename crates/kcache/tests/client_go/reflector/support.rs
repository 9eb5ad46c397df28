//! A scripted lister-watcher, a rendezvous fake watch and a run harness (the pieces of
//! client-go's `ListWatch`, `watch.NewFake()` and `ListAndWatch` these ports need).

use std::{
    collections::BTreeMap,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures::{Stream, StreamExt, stream};
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ListMeta};
use kcache::{
    ListerWatcher,
    lister_watcher::{
        INITIAL_EVENTS_END_ANNOTATION, ListParams, ObjectList, Status, WatchEvent, WatchParams,
        WatchStream,
    },
    reflector::{Config, Error, Reflector, ReflectorHandle, ReflectorStore},
};
use kube_core::{
    ObjectMeta, TypeMeta,
    watch::{Bookmark, BookmarkMeta},
};
use parking_lot::Mutex;
use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
    time::Instant,
};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

#[path = "../support/requests.rs"]
mod requests;
pub(crate) use requests::{LwError, Opts, PATIENCE};

/// One request to the lister-watcher.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) watch: bool,
    pub(crate) opts: Opts,
    pub(crate) at: Instant,
}

type ListFn = Box<dyn FnMut(&Opts) -> Result<ObjectList<Pod>, LwError> + Send>;
type WatchFn = Box<dyn FnMut(&Opts) -> Result<WatchStream<Pod>, LwError> + Send>;

/// client-go's `ListWatch` with `ListFunc` and `WatchFunc`: every request is recorded,
/// then answered by the script.
#[derive(Clone)]
pub(crate) struct Lw {
    list: Arc<Mutex<ListFn>>,
    watch: Arc<Mutex<WatchFn>>,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Lw {
    pub(crate) fn new(
        list: impl FnMut(&Opts) -> Result<ObjectList<Pod>, LwError> + Send + 'static,
        watch: impl FnMut(&Opts) -> Result<WatchStream<Pod>, LwError> + Send + 'static,
    ) -> Self {
        Self {
            list: Arc::new(Mutex::new(Box::new(list))),
            watch: Arc::new(Mutex::new(Box::new(watch))),
            calls: Arc::default(),
        }
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().clone()
    }

    pub(crate) fn lists(&self) -> Vec<Opts> {
        self.calls()
            .into_iter()
            .filter(|c| !c.watch)
            .map(|c| c.opts)
            .collect()
    }

    pub(crate) fn watches(&self) -> Vec<Opts> {
        self.calls()
            .into_iter()
            .filter(|c| c.watch)
            .map(|c| c.opts)
            .collect()
    }

    fn record(&self, watch: bool, opts: &Opts) {
        self.calls.lock().push(Call {
            watch,
            opts: opts.clone(),
            at: Instant::now(),
        });
    }
}

impl ListerWatcher<Pod> for Lw {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, LwError> {
        let opts = Opts::of_list(params);
        self.record(false, &opts);
        let mut f = self.list.lock();
        (*f)(&opts)
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<Pod>, LwError> {
        let opts = Opts::of_watch(params, resource_version);
        self.record(true, &opts);
        let mut f = self.watch.lock();
        (*f)(&opts)
    }

    fn describe(&self) -> String {
        "pods".into()
    }
}

/// The producer side of a fake watch. As client-go's `FakeWatcher` is unbuffered, a send
/// returns once the reflector has taken the event (and, the runtime being single-threaded,
/// handled it); dropping the producer closes the watch.
pub(crate) struct FakeWatch {
    tx: mpsc::Sender<(WatchEvent<Pod>, oneshot::Sender<()>)>,
}

pub(crate) fn fake_watch() -> (FakeWatch, WatchStream<Pod>) {
    let (tx, rx) = mpsc::channel(1);
    let stream = ReceiverStream::new(rx).map(|(event, taken): (_, oneshot::Sender<()>)| {
        let _ = taken.send(());
        Ok(event)
    });
    (FakeWatch { tx }, stream.boxed())
}

impl FakeWatch {
    /// Hands `event` to the reader and waits until it took it.
    pub(crate) async fn send(&self, event: WatchEvent<Pod>) {
        let taken = tokio::time::timeout(PATIENCE, async {
            let (ack, taken) = oneshot::channel();
            self.tx.send((event, ack)).await.is_ok() && taken.await.is_ok()
        })
        .await;
        assert!(
            matches!(taken, Ok(true)),
            "the reflector did not take the watch event (the watch is stopped or never read)"
        );
    }

    /// Whether the reader stopped the watch (dropped the stream).
    pub(crate) fn is_stopped(&self) -> bool {
        self.tx.is_closed()
    }

    /// Waits until the reader stopped the watch.
    pub(crate) async fn stopped(&self) {
        tokio::time::timeout(PATIENCE, self.tx.closed())
            .await
            .expect("the reflector never stopped the watch");
    }
}

/// What happened to a probed stream: `"ResultChan"` when first read, `"Stop"` when
/// dropped (client-go's `MockWatcher` call log).
pub(crate) type ProbeLog = Arc<Mutex<Vec<&'static str>>>;

struct Probe {
    inner: WatchStream<Pod>,
    log: ProbeLog,
    read: bool,
    on_drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Stream for Probe {
    type Item = Result<WatchEvent<Pod>, LwError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if !self.read {
            self.read = true;
            self.log.lock().push("ResultChan");
        }
        self.inner.poll_next_unpin(cx)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.log.lock().push("Stop");
        if let Some(f) = self.on_drop.take() {
            f();
        }
    }
}

pub(crate) fn probe(inner: WatchStream<Pod>) -> (ProbeLog, WatchStream<Pod>) {
    let log = ProbeLog::default();
    let stream = Probe {
        inner,
        log: log.clone(),
        read: false,
        on_drop: None,
    };
    (log, stream.boxed())
}

/// `inner`, calling `on_drop` when the reflector stops it.
pub(crate) fn probe_with_drop(
    inner: WatchStream<Pod>,
    on_drop: impl FnOnce() + Send + 'static,
) -> WatchStream<Pod> {
    Probe {
        inner,
        log: ProbeLog::default(),
        read: false,
        on_drop: Some(Box::new(on_drop)),
    }
    .boxed()
}

/// A watch that never sends anything and never ends.
pub(crate) fn pending() -> WatchStream<Pod> {
    stream::pending().boxed()
}

/// A watch that is already closed (client-go: a stopped `FakeWatcher`).
pub(crate) fn closed() -> WatchStream<Pod> {
    stream::empty().boxed()
}

/// A watch that sends `events` at once, then stays open.
pub(crate) fn events_then_hold(events: Vec<WatchEvent<Pod>>) -> WatchStream<Pod> {
    stream::iter(events.into_iter().map(Ok))
        .chain(stream::pending())
        .boxed()
}

/// A pod named `name` (no name if empty) at `rv` (none if empty).
pub(crate) fn pod(name: &str, rv: &str) -> Pod {
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Pod {
        metadata: ObjectMeta {
            name: non_empty(name),
            resource_version: non_empty(rv),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

pub(crate) fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

pub(crate) fn rv(p: &Pod) -> String {
    p.metadata.resource_version.clone().unwrap_or_default()
}

/// A page of a list at `rv`, continued by `continue_token` unless it is empty.
pub(crate) fn page(rv: &str, continue_token: &str, items: Vec<Pod>) -> ObjectList<Pod> {
    ObjectList {
        types: TypeMeta {
            api_version: "v1".into(),
            kind: "PodList".into(),
        },
        metadata: ListMeta {
            resource_version: Some(rv.into()),
            continue_: (!continue_token.is_empty()).then(|| continue_token.into()),
            ..ListMeta::default()
        },
        items,
    }
}

pub(crate) fn pod_list(rv: &str, items: Vec<Pod>) -> ObjectList<Pod> {
    page(rv, "", items)
}

pub(crate) fn added(p: Pod) -> WatchEvent<Pod> {
    WatchEvent::Added(p)
}

pub(crate) fn modified(p: Pod) -> WatchEvent<Pod> {
    WatchEvent::Modified(p)
}

pub(crate) fn deleted(p: Pod) -> WatchEvent<Pod> {
    WatchEvent::Deleted(p)
}

/// A BOOKMARK at `rv`, with the `k8s.io/initial-events-end` annotation set to the value
/// given, if any.
pub(crate) fn bookmark(rv: &str, initial_events_end: Option<&str>) -> WatchEvent<Pod> {
    let annotations: BTreeMap<String, String> = initial_events_end
        .map(|v| (INITIAL_EVENTS_END_ANNOTATION.to_owned(), v.to_owned()))
        .into_iter()
        .collect();
    WatchEvent::Bookmark(Bookmark {
        types: TypeMeta {
            api_version: "v1".into(),
            kind: "Pod".into(),
        },
        metadata: BookmarkMeta {
            resource_version: rv.into(),
            annotations,
        },
    })
}

pub(crate) fn status(code: u16, reason: &str, message: &str) -> Status {
    kcache::testing::status(code, reason, message)
}

fn status_with_details(
    code: u16,
    reason: &str,
    message: &str,
    details: serde_json::Value,
) -> Status {
    serde_json::from_value(serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code, "details": details,
    }))
    .expect("a Status literal always deserializes")
}

/// `apierrors.NewTooManyRequests("too many requests", 1)`.
pub(crate) fn too_many_requests() -> Status {
    status_with_details(
        429,
        "TooManyRequests",
        "Too many requests: too many requests",
        serde_json::json!({"retryAfterSeconds": 1}),
    )
}

/// `apierrors.NewInternalError(errors.New(cause))`.
pub(crate) fn internal_error(cause: &str) -> Status {
    status_with_details(
        500,
        "InternalError",
        &format!("Internal error occurred: {cause}"),
        serde_json::json!({"causes": [{"message": cause}]}),
    )
}

/// `apierrors.NewResourceExpired(message)`.
pub(crate) fn expired(message: &str) -> Status {
    status(410, "Expired", message)
}

/// `apierrors.NewTimeoutError(message, 1)`, with `causes` in its details unless null.
pub(crate) fn timeout_status(message: &str, causes: serde_json::Value) -> Status {
    let mut details = serde_json::json!({"retryAfterSeconds": 1});
    if !causes.is_null() {
        details["causes"] = causes;
    }
    status_with_details(504, "Timeout", &format!("Timeout: {message}"), details)
}

pub(crate) fn api_error(status: Status) -> LwError {
    LwError::api(status, None)
}

/// An error that is neither a server `Status` nor a transport failure (client-go's
/// `fmt.Errorf` in a `ListFunc` / `WatchFunc`).
pub(crate) fn plain_error(message: &str) -> LwError {
    LwError::protocol(message)
}

/// client-go's `syscall.ECONNREFUSED`.
pub(crate) fn refused() -> LwError {
    LwError::transport("connection refused")
}

/// An error the reflector reported to its watch error handler.
#[derive(Debug, Clone)]
pub(crate) struct Reported {
    pub(crate) kind: &'static str,
    pub(crate) text: String,
    pub(crate) transport: bool,
}

impl Reported {
    fn of(e: &Error) -> Self {
        let kind = match e {
            Error::List { .. } => "list",
            Error::WatchOpen { .. } => "watch open",
            Error::WatchList { .. } => "streaming list",
            Error::WatchStream { .. } => "watch stream",
            Error::VeryShortWatch { .. } => "very short watch",
            Error::ShortWatch { .. } => "short watch",
            Error::StreamingListEndedEarly { .. } => "streaming list ended early",
            Error::Store { .. } => "store",
            _ => "other",
        };
        Self {
            kind,
            text: e.to_string(),
            transport: e.lister_watcher_error().is_some_and(LwError::is_transport),
        }
    }
}

/// Never ends the run on an error.
pub(crate) fn never(_: &Reported) -> bool {
    false
}

/// A running reflector.
pub(crate) struct Running {
    pub(crate) handle: ReflectorHandle,
    pub(crate) errors: Arc<Mutex<Vec<Reported>>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    /// Waits until the reflector stopped by itself (it was cancelled from the script).
    pub(crate) async fn finished(self) {
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the reflector did not stop")
            .expect("the reflector task panicked");
    }

    /// Cancels the reflector and waits until it stopped.
    pub(crate) async fn stop(self) {
        self.cancel.cancel();
        self.finished().await;
    }
}

/// Runs a reflector over `lw` into `store`; errors are recorded, and the run is cancelled
/// from the error handler when `stop_on` says so (where client-go's round returns it).
pub(crate) fn start(
    lw: Lw,
    store: Arc<dyn ReflectorStore<Pod>>,
    config: Config,
    cancel: &CancellationToken,
    stop_on: impl Fn(&Reported) -> bool + Send + Sync + 'static,
) -> Running {
    start_with(lw, store, config, cancel, stop_on, |r| r)
}

pub(crate) fn start_with(
    lw: Lw,
    store: Arc<dyn ReflectorStore<Pod>>,
    config: Config,
    cancel: &CancellationToken,
    stop_on: impl Fn(&Reported) -> bool + Send + Sync + 'static,
    customize: impl FnOnce(Reflector<Pod, Lw>) -> Reflector<Pod, Lw>,
) -> Running {
    let errors: Arc<Mutex<Vec<Reported>>> = Arc::default();
    let (errs, c) = (errors.clone(), cancel.clone());
    let reflector =
        Reflector::new(lw, store, config).with_error_handler(Arc::new(move |e: &Error| {
            let reported = Reported::of(e);
            let stop = stop_on(&reported);
            errs.lock().push(reported);
            if stop {
                c.cancel();
            }
        }));
    let reflector = customize(reflector);
    let handle = reflector.handle();
    Running {
        handle,
        errors,
        cancel: cancel.clone(),
        task: tokio::spawn(reflector.run(cancel.clone())),
    }
}

/// Waits (in virtual time) until `cond` holds.
pub(crate) async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(PATIENCE, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for {what}");
}
