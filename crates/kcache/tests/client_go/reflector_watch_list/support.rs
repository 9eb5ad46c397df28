//! client-go's `fakeListWatcher` and the pieces around it.

use std::{collections::BTreeMap, sync::Arc};

use futures::StreamExt;
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
pub(crate) struct Request {
    pub(crate) opts: Opts,
    pub(crate) at: Instant,
}

/// Decides whether a watch request fails (client-go's `watchOptionsPredicate`).
pub(crate) type Predicate = Box<dyn FnMut(&Opts) -> Result<(), LwError> + Send>;

type Event = (WatchEvent<Pod>, oneshot::Sender<()>);

/// The current fake watch: the producer, and the stream until a request takes it.
struct Watcher {
    tx: mpsc::Sender<Event>,
    stream: Option<WatchStream<Pod>>,
}

impl Watcher {
    fn new() -> Self {
        let (tx, rx) = mpsc::channel(1);
        let stream = ReceiverStream::new(rx).map(|(event, taken): Event| {
            let _ = taken.send(());
            Ok(event)
        });
        Self {
            tx,
            stream: Some(stream.boxed()),
        }
    }
}

struct State {
    watcher: Watcher,
    list_counter: usize,
    watch_counter: usize,
    close_after_watch_requests: usize,
    close_after_list_requests: usize,
    requests: Vec<Request>,
    custom_list_response: Option<ObjectList<Pod>>,
    watch_options_predicate: Option<Predicate>,
}

/// client-go's `fakeListWatcher`. Its one `FakeWatcher` is handed out by every watch
/// request; a Rust stream has one reader, so a second request for the same watch fails
/// (none of the scenarios makes one when the reflector behaves as client-go's).
#[derive(Clone)]
pub(crate) struct FakeLw {
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
}

impl FakeLw {
    pub(crate) fn new(cancel: &CancellationToken) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                watcher: Watcher::new(),
                list_counter: 0,
                watch_counter: 0,
                close_after_watch_requests: 0,
                close_after_list_requests: 0,
                requests: Vec::new(),
                custom_list_response: None,
                watch_options_predicate: None,
            })),
            stop: cancel.clone(),
        }
    }

    pub(crate) fn configure(
        &self,
        watch_options_predicate: Option<Predicate>,
        close_after_watch_requests: usize,
        custom_list_response: Option<ObjectList<Pod>>,
        close_after_list_requests: usize,
    ) {
        let mut st = self.state.lock();
        st.watch_options_predicate = watch_options_predicate;
        st.close_after_watch_requests = close_after_watch_requests;
        st.custom_list_response = custom_list_response;
        st.close_after_list_requests = close_after_list_requests;
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.state.lock().requests.clone()
    }

    pub(crate) fn list_counter(&self) -> usize {
        self.state.lock().list_counter
    }

    pub(crate) fn watch_counter(&self) -> usize {
        self.state.lock().watch_counter
    }

    /// Sends `event` on the current watch and waits until the reflector took it (client-go's
    /// `FakeWatcher` is unbuffered); `false` if the watch was stopped first.
    pub(crate) async fn send(&self, event: WatchEvent<Pod>) -> bool {
        let tx = self.state.lock().watcher.tx.clone();
        let (ack, taken) = oneshot::channel();
        tx.send((event, ack)).await.is_ok() && taken.await.is_ok()
    }

    /// Closes the current watch; later requests get a new one.
    pub(crate) fn stop_and_recreate_watch(&self) {
        self.state.lock().watcher = Watcher::new();
    }
}

impl ListerWatcher<Pod> for FakeLw {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, LwError> {
        let opts = Opts::of_list(params);
        let mut st = self.state.lock();
        st.list_counter += 1;
        st.requests.push(Request {
            opts,
            at: Instant::now(),
        });
        if st.list_counter == st.close_after_list_requests {
            self.stop.cancel();
        }
        st.custom_list_response
            .clone()
            .ok_or_else(|| plain_error("not implemented"))
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<Pod>, LwError> {
        let opts = Opts::of_watch(params, resource_version);
        let mut st = self.state.lock();
        st.watch_counter += 1;
        st.requests.push(Request {
            opts: opts.clone(),
            at: Instant::now(),
        });
        if st.watch_counter == st.close_after_watch_requests {
            self.stop.cancel();
        }
        if let Some(predicate) = st.watch_options_predicate.as_mut() {
            predicate(&opts)?;
        }
        st.watcher
            .stream
            .take()
            .ok_or_else(|| plain_error("the fake watch was already handed out"))
    }

    fn describe(&self) -> String {
        "pods".into()
    }
}

/// client-go's `makePod`.
pub(crate) fn make_pod(name: &str, rv: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some(rv.into()),
            uid: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

pub(crate) fn page(rv: &str, items: Vec<Pod>) -> ObjectList<Pod> {
    ObjectList {
        types: TypeMeta {
            api_version: "v1".into(),
            kind: "PodList".into(),
        },
        metadata: ListMeta {
            resource_version: Some(rv.into()),
            ..ListMeta::default()
        },
        items,
    }
}

pub(crate) fn added(p: Pod) -> WatchEvent<Pod> {
    WatchEvent::Added(p)
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

fn status(code: u16, reason: &str, message: &str, details: serde_json::Value) -> Status {
    serde_json::from_value(serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code, "details": details,
    }))
    .expect("a Status literal always deserializes")
}

/// `apierrors.NewInvalid(schema.GroupKind{}, name, nil)`.
pub(crate) fn invalid(name: &str) -> Status {
    status(
        422,
        "Invalid",
        &format!(" {name:?} is invalid"),
        serde_json::json!({"name": name}),
    )
}

/// `apierrors.NewTooManyRequests(message, 1)`.
pub(crate) fn too_many_requests(message: &str) -> Status {
    status(
        429,
        "TooManyRequests",
        &format!("Too many requests: {message}"),
        serde_json::json!({"retryAfterSeconds": 1}),
    )
}

/// `apierrors.NewResourceExpired(message)`.
pub(crate) fn expired(message: &str) -> Status {
    status(410, "Expired", message, serde_json::Value::Null)
}

pub(crate) fn api_error(status: Status) -> LwError {
    LwError::api(status, None)
}

/// An error that is neither a server `Status` nor a transport failure (client-go's
/// `fmt.Errorf`).
pub(crate) fn plain_error(message: &str) -> LwError {
    LwError::protocol(message)
}

/// An error the reflector reported to its watch error handler.
#[derive(Debug, Clone)]
pub(crate) struct Reported {
    pub(crate) text: String,
}

/// A running reflector.
pub(crate) struct Running {
    pub(crate) handle: ReflectorHandle,
    pub(crate) errors: Arc<Mutex<Vec<Reported>>>,
    task: JoinHandle<()>,
}

impl Running {
    /// Waits until the reflector stopped (it is cancelled by the scenario).
    pub(crate) async fn finished(self) {
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the reflector did not stop")
            .expect("the reflector task panicked");
    }
}

/// Runs a reflector over `lw` into `store`; errors are recorded, and the first one whose
/// text contains `stop_on` cancels the run (where client-go's round returns it).
pub(crate) fn start(
    lw: FakeLw,
    store: Arc<dyn ReflectorStore<Pod>>,
    config: Config,
    cancel: &CancellationToken,
    stop_on: Option<&'static str>,
) -> Running {
    let errors: Arc<Mutex<Vec<Reported>>> = Arc::default();
    let (errs, c) = (errors.clone(), cancel.clone());
    let reflector =
        Reflector::new(lw, store, config).with_error_handler(Arc::new(move |e: &Error| {
            let text = e.to_string();
            let stop = stop_on.is_some_and(|s| text.contains(s));
            errs.lock().push(Reported { text });
            if stop {
                c.cancel();
            }
        }));
    let handle = reflector.handle();
    Running {
        handle,
        errors,
        task: tokio::spawn(reflector.run(cancel.clone())),
    }
}
