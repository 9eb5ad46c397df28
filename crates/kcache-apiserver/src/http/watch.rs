//! `watch`: a chunked stream of newline-delimited JSON events (or length-prefixed protobuf
//! `WatchEvent` frames, see [`protobuf::encode`](super::protobuf::encode)), fed from the
//! store's event history, with bookmarks, timeouts, streaming initial lists, selector
//! semantics and the fault hooks (drop, stall, truncate).

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::HeaderValue;
use http::header::CONTENT_TYPE;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::negotiate::Output;
use super::params::ListParams;
use super::table::{IncludeObject, partial_metadata, table};
use super::{AppState, Target, protobuf};
use crate::object::StoredObject;
use crate::resource::ResourceInfo;
use crate::status::ApiError;
use crate::store::{EventType, ListQuery, ReadAt, StoreError, StoreEvent};

/// Events read from the history per store lock.
const BATCH: usize = 256;
/// Chunks buffered between the producer task and the connection. Small on purpose: a slow
/// client stops the producer, which then simply reads further back in the history (the
/// history window bounds memory; a client slower than the window gets 410 Expired).
const CHANNEL_CHUNKS: usize = 16;
/// The pre-timeout bookmark is sent this long before the deadline, as kube-apiserver does.
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);

type Chunk = Result<Bytes, io::Error>;

fn streaming_response(rx: mpsc::Receiver<Chunk>, protobuf: bool) -> Response {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    let content_type = if protobuf {
        protobuf::CONTENT_TYPE_WATCH
    } else {
        "application/json"
    };
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut buf = Vec::with_capacity(object.len() + 32);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(kind.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    buf.extend_from_slice(object);
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

/// An ERROR event carrying `err`'s Status, as a JSON line or a protobuf frame.
fn error_event(err: &ApiError, protobuf: bool) -> Bytes {
    if protobuf {
        return protobuf::encode::watch_frame("ERROR", protobuf::encode::status(err));
    }
    line(
        "ERROR",
        &serde_json::to_vec(&err.to_status()).unwrap_or_default(),
    )
}

/// HTTP 200 with a single ERROR event carrying `err`, then the end of the stream.
pub(crate) fn error_stream(err: &ApiError, protobuf: bool) -> Response {
    let (tx, rx) = mpsc::channel(1);
    let _ = tx.try_send(Ok(error_event(err, protobuf)));
    streaming_response(rx, protobuf)
}

struct Renderer {
    info: Arc<ResourceInfo>,
    out: Output,
    include: IncludeObject,
}

impl Renderer {
    fn protobuf(&self) -> bool {
        self.out == Output::Protobuf
    }

    fn error(&self, err: &ApiError) -> Bytes {
        error_event(err, self.protobuf())
    }

    fn event(&self, kind: &str, obj: &StoredObject) -> Bytes {
        let defaulted = crate::registry::crd::defaulted_on_read(&self.info, obj);
        let obj = defaulted.as_ref().unwrap_or(obj);
        match self.out {
            Output::Protobuf => match protobuf::encode::object(obj) {
                Ok(env) => protobuf::encode::watch_frame(kind, env),
                Err(e) => self.error(&e),
            },
            Output::Json | Output::Discovery => line(kind, obj.json()),
            Output::Table(api_version) => {
                let meta = json!({"resourceVersion": obj.rv().to_string()});
                let t = table(
                    &self.info,
                    [&Arc::new(obj.clone())],
                    api_version,
                    self.include,
                    meta,
                );
                line(kind, &serde_json::to_vec(&t).unwrap_or_default())
            }
            Output::Metadata(api_version) => {
                let m = partial_metadata(&obj.value(), api_version);
                line(kind, &serde_json::to_vec(&m).unwrap_or_default())
            }
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        if self.protobuf() {
            let obj = protobuf::encode::bookmark_object(
                &self.info.api_version(),
                &self.info.kind,
                rv,
                initial_end,
            );
            return protobuf::encode::watch_frame("BOOKMARK", obj);
        }
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": meta});
        line("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
    }
}

struct Filter {
    prefix: Option<String>,
    params: ListParams,
}

impl Filter {
    fn matches(&self, v: &Value) -> bool {
        self.params.labels.matches(v) && self.params.fields.matches(v)
    }

    /// How a change looks to this watch: selector exits become DELETED, entries ADDED.
    fn visible(&self, ev: &StoreEvent) -> Option<(EventType, Arc<StoredObject>)> {
        if let Some(p) = &self.prefix
            && !ev.key.starts_with(p.as_str())
        {
            return None;
        }
        if self.params.labels.is_empty() && self.params.fields.is_empty() {
            return Some((ev.kind, ev.object.clone()));
        }
        match ev.kind {
            EventType::Added | EventType::Deleted => self
                .matches(&ev.object.value())
                .then(|| (ev.kind, ev.object.clone())),
            EventType::Modified => {
                let now = self.matches(&ev.object.value());
                let before = ev.prev.as_ref().is_some_and(|p| self.matches(&p.value()));
                match (before, now) {
                    (true, true) => Some((EventType::Modified, ev.object.clone())),
                    (false, true) => Some((EventType::Added, ev.object.clone())),
                    (true, false) => ev.prev.as_ref().map(|p| {
                        (
                            EventType::Deleted,
                            Arc::new(StoredObject::new(p.value().clone(), ev.rv)),
                        )
                    }),
                    (false, false) => None,
                }
            }
        }
    }
}

/// Handles a watch request.
pub(crate) async fn watch(
    state: &Arc<AppState>,
    target: &Target,
    p: ListParams,
    out: Output,
    query: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let id = target.info.id();
    let store = &state.store;
    let timeout = p.timeout.unwrap_or(state.config.default_watch_timeout);
    let filter = Filter {
        prefix: target.namespace.as_ref().map(|ns| format!("{ns}/")),
        params: p,
    };
    let p = &filter.params;
    // Subscribe before reading anything so no notification is missed.
    let notify = store.subscribe(&id);
    let snapshot = match p.send_initial_events {
        Some(true) => true,
        Some(false) => false,
        None => matches!(p.rv, None | Some(0)),
    };
    let mut initial = Vec::new();
    let start_rv = if snapshot {
        let unfiltered = filter.params.labels.is_empty() && filter.params.fields.is_empty();
        let f = |o: &StoredObject| unfiltered || filter.matches(&o.value());
        let q = ListQuery {
            namespace: target.namespace.as_deref(),
            at: ReadAt::Latest,
            start_after: None,
            limit: None,
            filter: &f,
            count_remaining: false,
        };
        let page = store
            .list(&id, &q)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        initial = page.items;
        page.rv
    } else {
        match p.rv {
            Some(rv) if rv > 0 => rv,
            _ => store.current_rv(),
        }
    };
    if let Err(StoreError::TooOld { requested, oldest }) = store.events_since(&id, start_rv, 0) {
        return Ok(error_stream(
            &ApiError::watch_too_old(requested, oldest),
            out == Output::Protobuf,
        ));
    }
    let renderer = Renderer {
        info: target.info.clone(),
        out,
        include: IncludeObject::parse(query.get("includeObject").map(String::as_str)),
    };
    // The watch cache ends the initial events with a bookmark for a streaming list, and also
    // for a plain RV=0 watch that allows bookmarks.
    let snapshot_end_bookmark = snapshot
        && (p.send_initial_events == Some(true)
            || (p.send_initial_events.is_none() && p.rv == Some(0) && p.allow_bookmarks));
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let job = WatchJob {
        state: state.clone(),
        id,
        filter,
        renderer,
        tx,
        notify,
        initial,
        snapshot_end_bookmark,
        start_rv,
        deadline: Instant::now() + timeout,
    };
    tokio::spawn(job.run());
    Ok(streaming_response(rx, out == Output::Protobuf))
}

struct WatchJob {
    state: Arc<AppState>,
    id: crate::resource::ResourceId,
    filter: Filter,
    renderer: Renderer,
    tx: mpsc::Sender<Chunk>,
    notify: tokio::sync::watch::Receiver<u64>,
    initial: Vec<Arc<StoredObject>>,
    snapshot_end_bookmark: bool,
    start_rv: u64,
    deadline: Instant,
}

/// Why the producer stopped.
enum Stop {
    /// The client went away or the stream was aborted.
    Gone,
}

impl WatchJob {
    async fn send(&self, chunk: Bytes) -> Result<(), Stop> {
        if self.state.faults.take_truncate() {
            let cut = chunk.slice(..chunk.len() / 2);
            let _ = self.tx.send(Ok(cut)).await;
            // Let the connection take and flush the half event before aborting it: hyper
            // flushes when the body has nothing more to give.
            while self.tx.capacity() < self.tx.max_capacity() && !self.tx.is_closed() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = self
                .tx
                .send(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "injected truncation",
                )))
                .await;
            self.state
                .faults
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(Stop::Gone);
        }
        self.tx.send(Ok(chunk)).await.map_err(|_| Stop::Gone)
    }

    async fn run(mut self) {
        let _ = self.run_inner().await;
    }

    async fn run_inner(&mut self) -> Result<(), Stop> {
        let faults = self.state.faults.clone();
        let drop_token = faults.watch_token();
        let shutdown = self.state.shutdown.clone();
        let mut stall = faults.stall_receiver();
        let allow_bookmarks = self.filter.params.allow_bookmarks;
        let interval = self
            .state
            .config
            .bookmark_interval
            .max(Duration::from_millis(10));
        let mut next_periodic = Instant::now() + interval;
        let now = Instant::now();
        // Like the watch cache: no pre-timeout bookmark when it would be due at once.
        let mut pre_timeout = self
            .deadline
            .checked_sub(PRE_TIMEOUT_BOOKMARK)
            .filter(|t| *t > now);

        let initial = std::mem::take(&mut self.initial);
        for obj in &initial {
            self.send(self.renderer.event("ADDED", obj)).await?;
        }
        drop(initial);
        if self.snapshot_end_bookmark && allow_bookmarks {
            self.send(self.renderer.bookmark(self.start_rv, true))
                .await?;
        }
        let mut cursor = self.start_rv;
        let mut notify = self.notify.clone();
        loop {
            if !*stall.borrow_and_update() {
                match self.state.store.events_since(&self.id, cursor, BATCH) {
                    Err(StoreError::TooOld { requested, oldest }) => {
                        let err = ApiError::watch_too_old(requested, oldest);
                        self.send(self.renderer.error(&err)).await?;
                        return Ok(());
                    }
                    Err(StoreError::TooLarge { .. }) => return Ok(()),
                    Ok(events) if !events.is_empty() => {
                        for ev in events {
                            cursor = ev.rv;
                            if let Some((kind, obj)) = self.filter.visible(&ev) {
                                let plain = kind == ev.kind
                                    && Arc::ptr_eq(&obj, &ev.object)
                                    && matches!(self.renderer.out, Output::Json);
                                let chunk = if plain {
                                    ev.json_line(|| self.renderer.event(kind.as_str(), &obj))
                                } else {
                                    self.renderer.event(kind.as_str(), &obj)
                                };
                                self.send(chunk).await?;
                            }
                        }
                        continue;
                    }
                    Ok(_) => {}
                }
            }
            let stalled = *stall.borrow();
            let bookmark_at = match pre_timeout {
                Some(t) if t < next_periodic => t,
                _ => next_periodic,
            };
            tokio::select! {
                changed = notify.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                }
                () = sleep_until(bookmark_at), if allow_bookmarks && !stalled => {
                    if Some(bookmark_at) == pre_timeout {
                        pre_timeout = None;
                    } else {
                        next_periodic += interval;
                    }
                    if cursor > self.start_rv {
                        self.send(self.renderer.bookmark(cursor, false)).await?;
                    }
                }
                () = sleep_until(self.deadline) => return Ok(()),
                () = drop_token.cancelled() => {
                    faults.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Ok(());
                }
                () = shutdown.cancelled() => return Ok(()),
                () = self.tx.closed() => return Err(Stop::Gone),
                _ = stall.changed() => {}
            }
        }
    }
}
