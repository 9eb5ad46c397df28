//! A small hostile API server: raw HTTP/1.1 over a `TcpListener` on 127.0.0.1:0 (raw, so that it
//! can stall, trickle, reset and break the chunked encoding at will), serving ConfigMaps at
//! `/api/v1/namespaces/ns/configmaps` from an in-memory model, with one switchable
//! [`Misbehaviour`] applied to the next N matching requests or until healed.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::watch,
};

pub(crate) const PATH: &str = "/api/v1/namespaces/ns/configmaps";
/// What the hostile bodies "echo" from the request; it must never reach an error message.
pub(crate) const SECRET: &str = "secret-token";
const MB: usize = 1024 * 1024;

/// Which requests a misbehaviour applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// LIST requests.
    List,
    /// LIST requests that carry a `continue` token.
    Continue,
    /// Watches without `sendInitialEvents`.
    Watch,
    /// Streaming lists (watches with `sendInitialEvents=true`).
    Streaming,
    /// Every request.
    Any,
}

/// A canned error body.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ErrBody {
    Empty,
    Html,
    Binary,
    /// NUL bytes and terminal escape sequences.
    Control,
    /// 1 MB of text.
    Mega,
    /// Echoes the request's `Authorization: Bearer secret-token`.
    Secret,
    /// A JSON `Status` whose message echoes the secret, with control characters, 1 MB long.
    StatusSecret,
    /// The same, 2 KB long (under the client's 64 KB error-body limit, so it parses).
    StatusSecretSmall,
    /// A JSON `Status` with `retryAfterSeconds` of `u32::MAX`.
    StatusRetryHuge,
    /// kube-apiserver's 504 "Too large resource version" `Status` (cause
    /// `ResourceVersionTooLarge`).
    StatusTooLarge,
    /// 100 MB of text.
    Huge,
    /// Protobuf magic followed by garbage.
    ProtobufGarbage,
}

/// How a server misbehaves on a matching request.
#[derive(Clone, Debug)]
pub(crate) enum Misbehaviour {
    /// Answers `code` with `body` (and a `Retry-After` header if given).
    Status {
        code: u16,
        body: ErrBody,
        retry_after: Option<&'static str>,
    },
    /// A 302 to somewhere else.
    Redirect,
    /// Answers 200 with this content type and body (Content-Length).
    Body {
        content_type: &'static str,
        body: Bytes,
    },
    /// 200 with a valid list, cut in the middle (then the connection is closed).
    TruncatedList,
    /// A valid list without `metadata.resourceVersion`.
    ListWithoutRv,
    /// A valid list plus one item of kind Pod.
    ListWithWrongKind,
    /// A list streamed up to `mb` MB of valid-looking items, then cut.
    HugeList { mb: usize },
    /// A list of one object whose data is `mb` MB, then cut.
    HugeObjectList { mb: usize },
    /// A list with one item nested `depth` levels deep.
    DeepList { depth: usize },
    /// Reads the request and never answers.
    StallNoAnswer,
    /// Sends the response head and never the body.
    StallAfterHead,
    /// A valid list, one byte per 100 ms.
    Trickle,
    /// Half a list, then a TCP reset.
    ResetMidList,
    /// Closes the connection as soon as the request is read.
    CloseAtOnce,
    /// Every page has a fresh `continue` token.
    EndlessContinue,
    /// Every page has a fresh `continue` token and one object never seen before.
    EndlessFreshContinue,
    /// Every page has the same `continue` token.
    RepeatingContinue,
    /// A healthy watch prefix (events from the RV), then these raw lines, then `end`.
    WatchLines { lines: Vec<Bytes>, end: End },
    /// The watch body uses a broken chunked encoding.
    BadChunking,
    /// A healthy watch whose every line is split across three chunks (legal: no error).
    SplitLines,
    /// A healthy watch that closes after one event.
    CloseAfterOneEvent,
    /// A watch that closes at once without events.
    CloseEmpty,
    /// A watch that sends its head and then nothing (no bookmarks either).
    Silent,
    /// A watch that sends its events and then a TCP reset.
    ResetMidWatch,
    /// A streaming list that sends its ADDED events and closes before the end bookmark.
    StreamingCloseEarly,
    /// A streaming list that sends its ADDED events and then goes on as a healthy watch,
    /// never sending the end bookmark.
    StreamingNoEndBookmark,
    /// A watch event of `mb` MB.
    HugeEvent { mb: usize },
}

/// How a watch-line misbehaviour ends.
#[derive(Clone, Copy, Debug)]
pub(crate) enum End {
    /// Close the response cleanly.
    Close,
    /// Carry on as a healthy watch.
    Continue,
}

struct Fault {
    what: Misbehaviour,
    scope: Scope,
    /// `None`: until healed.
    remaining: Option<u32>,
}

/// What the healthy watches are told to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kick {
    None,
    /// End cleanly (the reflector re-watches).
    Close(u64),
    /// Send an `ERROR` 410 event (the reflector relists).
    Expire(u64),
}

/// The message of the `ERROR` 410 a kick sends, to tell it from the faults' own errors.
pub(crate) const KICK_MESSAGE: &str = "hostile-test kick: too old resource version";

#[derive(Default)]
struct Model {
    objects: BTreeMap<String, Value>,
    rv: u64,
    /// Every event: (rv, type, object).
    log: Vec<(u64, &'static str, Value)>,
}

struct State {
    model: Mutex<Model>,
    log_len: watch::Sender<usize>,
    kick: watch::Sender<Kick>,
    fault: Mutex<Option<Fault>>,
    requests: AtomicU64,
    faulty_responses: AtomicU64,
}

/// A running hostile server; dropping it does not stop the accept loop (the test process ends).
#[derive(Clone)]
pub(crate) struct Server {
    pub url: String,
    state: Arc<State>,
    accept: Arc<tokio::task::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if Arc::strong_count(&self.accept) == 1 {
            self.accept.abort();
        }
    }
}

impl Server {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State {
            model: Mutex::default(),
            log_len: watch::channel(0).0,
            kick: watch::channel(Kick::None).0,
            fault: Mutex::new(None),
            requests: AtomicU64::new(0),
            faulty_responses: AtomicU64::new(0),
        });
        let st = Arc::clone(&state);
        let accept = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let _ = sock.set_nodelay(true);
                tokio::spawn(connection(Arc::clone(&st), sock));
            }
        });
        Self {
            url,
            state,
            accept: Arc::new(accept),
        }
    }

    /// Requests received so far.
    pub(crate) fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::Relaxed)
    }

    /// Responses that misbehaved so far.
    pub(crate) fn faulty_responses(&self) -> u64 {
        self.state.faulty_responses.load(Ordering::Relaxed)
    }

    /// Misbehave on the next `times` requests in `scope` (`None`: until healed).
    pub(crate) fn misbehave(&self, what: Misbehaviour, scope: Scope, times: Option<u32>) {
        *self.state.fault.lock().unwrap() = Some(Fault {
            what,
            scope,
            remaining: times,
        });
    }

    pub(crate) fn heal(&self) {
        *self.state.fault.lock().unwrap() = None;
    }

    /// Ends every open healthy watch cleanly.
    pub(crate) fn kick_close(&self) {
        self.state
            .kick
            .send_modify(|k| *k = Kick::Close(next_gen(*k)));
    }

    /// Sends an `ERROR` 410 on every open healthy watch.
    pub(crate) fn kick_expire(&self) {
        self.state
            .kick
            .send_modify(|k| *k = Kick::Expire(next_gen(*k)));
    }

    /// Creates or replaces `name` with `data`.
    pub(crate) fn put(&self, name: &str, data: Value) {
        let mut m = self.state.model.lock().unwrap();
        m.rv += 1;
        let rv = m.rv;
        let ty = if m.objects.contains_key(name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let obj = object(name, rv, data);
        m.objects.insert(name.to_owned(), obj.clone());
        m.log.push((rv, ty, obj));
        let len = m.log.len();
        drop(m);
        self.state.log_len.send_replace(len);
    }

    pub(crate) fn delete(&self, name: &str) {
        let mut m = self.state.model.lock().unwrap();
        let Some(mut obj) = m.objects.remove(name) else {
            return;
        };
        m.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(m.rv.to_string());
        let rv = m.rv;
        m.log.push((rv, "DELETED", obj));
        let len = m.log.len();
        drop(m);
        self.state.log_len.send_replace(len);
    }

    /// The model's objects: name → (resourceVersion, data).
    pub(crate) fn objects(&self) -> BTreeMap<String, (String, BTreeMap<String, String>)> {
        let m = self.state.model.lock().unwrap();
        m.objects
            .iter()
            .map(|(name, o)| {
                let data = serde_json::from_value(o["data"].clone()).unwrap_or_default();
                let rv = o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                (name.clone(), (rv, data))
            })
            .collect()
    }
}

fn next_gen(k: Kick) -> u64 {
    match k {
        Kick::None => 1,
        Kick::Close(g) | Kick::Expire(g) => g + 1,
    }
}

fn object(name: &str, rv: u64, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string(),
            "uid": format!("uid-{name}")},
        "data": data})
}

mod healthy;
mod http;
mod misbehave;

use healthy::*;
use http::*;
use misbehave::*;
