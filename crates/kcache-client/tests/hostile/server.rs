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

struct Request {
    path: String,
    query: HashMap<String, String>,
}

impl Request {
    fn is_watch(&self) -> bool {
        matches!(
            self.query.get("watch").map(String::as_str),
            Some("1" | "true")
        )
    }

    fn is_streaming(&self) -> bool {
        self.is_watch() && self.query.get("sendInitialEvents").map(String::as_str) == Some("true")
    }

    fn matches(&self, scope: Scope) -> bool {
        match scope {
            Scope::Any => true,
            Scope::List => !self.is_watch(),
            Scope::Continue => !self.is_watch() && self.query.contains_key("continue"),
            Scope::Watch => self.is_watch() && !self.is_streaming(),
            Scope::Streaming => self.is_streaming(),
        }
    }
}

async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..pos]).into_owned();
            buf.drain(..pos + 4);
            let target = head.lines().next()?.split(' ').nth(1)?.to_owned();
            let (path, q) = target.split_once('?').unwrap_or((&target, ""));
            let query = q
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.replace("%3A", ":").replace("%2F", "/")))
                .collect();
            return Some(Request {
                path: path.to_owned(),
                query,
            });
        }
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// Serves one connection (keep-alive); returns when it is closed or spoiled.
async fn connection(state: Arc<State>, mut sock: TcpStream) {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        state.requests.fetch_add(1, Ordering::Relaxed);
        let fault = {
            let mut f = state.fault.lock().unwrap();
            match f.as_mut() {
                Some(fault) if req.matches(fault.scope) => {
                    let what = fault.what.clone();
                    if let Some(n) = &mut fault.remaining {
                        *n -= 1;
                        if *n == 0 {
                            *f = None;
                        }
                    }
                    Some(what)
                }
                _ => None,
            }
        };
        let keep = if req.path != PATH {
            write_full(&mut sock, 404, "text/plain", &[], b"404 page not found\n").await
        } else if let Some(what) = fault {
            state.faulty_responses.fetch_add(1, Ordering::Relaxed);
            misbehave(&state, &req, &mut sock, what).await
        } else if req.is_watch() {
            healthy_watch(&state, &req, &mut sock, Prefix::default()).await
        } else {
            healthy_list(&state, &req, &mut sock).await
        };
        if !keep {
            return;
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Whatever",
    }
}

fn head(code: u16, content_type: &str, extra: &[(&str, &str)], length: Option<usize>) -> Vec<u8> {
    let mut h = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\n",
        reason(code)
    );
    for (k, v) in extra {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    match length {
        Some(n) => h.push_str(&format!("Content-Length: {n}\r\n\r\n")),
        None => h.push_str("Transfer-Encoding: chunked\r\n\r\n"),
    }
    h.into_bytes()
}

async fn write_full(
    sock: &mut TcpStream,
    code: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> bool {
    let h = head(code, content_type, extra, Some(body.len()));
    sock.write_all(&h).await.is_ok() && sock.write_all(body).await.is_ok()
}

async fn chunk(sock: &mut TcpStream, data: &[u8]) -> bool {
    if data.is_empty() {
        return true;
    }
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    sock.write_all(&out).await.is_ok()
}

async fn end_chunks(sock: &mut TcpStream) -> bool {
    sock.write_all(b"0\r\n\r\n").await.is_ok()
}

fn list_json(m: &Model, items: &[&Value], cont: Option<String>, rv: bool) -> Value {
    let mut meta = serde_json::Map::new();
    if rv {
        meta.insert("resourceVersion".into(), json!(m.rv.to_string()));
    }
    if let Some(c) = cont {
        meta.insert("continue".into(), json!(c));
    }
    json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": meta, "items": items})
}

fn healthy_list_body(state: &State, req: &Request) -> Vec<u8> {
    let m = state.model.lock().unwrap();
    let all: Vec<&Value> = m.objects.values().collect();
    let limit = req
        .query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let offset = req
        .query
        .get("continue")
        .and_then(|c| c.strip_prefix("off-"))
        .and_then(|o| o.parse::<usize>().ok())
        .unwrap_or(0)
        .min(all.len());
    let (items, cont) = match limit {
        Some(l) if offset + l < all.len() => (
            &all[offset..offset + l],
            Some(format!("off-{}", offset + l)),
        ),
        _ => (&all[offset..], None),
    };
    serde_json::to_vec(&list_json(&m, items, cont, true)).unwrap()
}

async fn healthy_list(state: &State, req: &Request, sock: &mut TcpStream) -> bool {
    // A token this server did not issue (one a fault made up) is refused as kube-apiserver
    // refuses a continue token it cannot decode.
    if let Some(token) = req.query.get("continue")
        && token
            .strip_prefix("off-")
            .is_none_or(|o| o.parse::<usize>().is_err())
    {
        let body = serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1",
            "metadata": {}, "status": "Failure", "reason": "BadRequest", "code": 400,
            "message": "continue key is not valid: incorrect encoded start resourceVersion"}))
        .unwrap();
        return write_full(sock, 400, "application/json", &[], &body).await;
    }
    let body = healthy_list_body(state, req);
    write_full(sock, 200, "application/json", &[], &body).await
}

fn line(v: &Value) -> Vec<u8> {
    let mut l = serde_json::to_vec(v).unwrap();
    l.push(b'\n');
    l
}

/// Tweaks of a healthy watch.
#[derive(Default)]
struct Prefix {
    /// Raw lines sent right after the initial events.
    lines: Vec<Bytes>,
    /// Close after the lines.
    close_after_lines: bool,
    /// Close after this many events.
    close_after: Option<usize>,
    /// Close before the initial-events-end bookmark.
    no_end_bookmark: bool,
    /// Split every line into three chunks.
    split: bool,
    /// Reset the connection instead of closing.
    reset: bool,
}

async fn send(sock: &mut TcpStream, data: &[u8], split: bool) -> bool {
    if split && data.len() >= 3 {
        let a = data.len() / 3;
        let b = 2 * data.len() / 3;
        // Separate writes with a pause, so that they arrive as separate reads.
        for part in [&data[..a], &data[a..b], &data[b..]] {
            if !chunk(sock, part).await {
                return false;
            }
            let _ = sock.flush().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    } else {
        chunk(sock, data).await
    }
}

/// A watch as the API server does it (with bookmarks every second when asked for), tweaked by
/// `p`. Returns whether the connection can be reused.
async fn healthy_watch(state: &State, req: &Request, sock: &mut TcpStream, p: Prefix) -> bool {
    let mut kick = state.kick.subscribe();
    kick.borrow_and_update();
    let mut log_len = state.log_len.subscribe();
    if sock
        .write_all(&head(200, "application/json", &[], None))
        .await
        .is_err()
    {
        return false;
    }
    let bookmarks = req.query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let mut sent_events = 0usize;
    // Initial events (a streaming list's ADDED events and end bookmark), or the replay from
    // the asked resourceVersion.
    let (mut next, mut last_rv, initial) = {
        let m = state.model.lock().unwrap();
        if req.is_streaming() {
            let initial: Vec<Vec<u8>> = m
                .objects
                .values()
                .map(|o| line(&json!({"type": "ADDED", "object": o})))
                .collect();
            (m.log.len(), m.rv, initial)
        } else {
            let from = req
                .query
                .get("resourceVersion")
                .and_then(|rv| rv.parse::<u64>().ok())
                .filter(|rv| *rv > 0)
                .unwrap_or(m.rv);
            (
                m.log.partition_point(|(rv, ..)| *rv <= from),
                from,
                Vec::new(),
            )
        }
    };
    for l in initial {
        if !send(sock, &l, p.split).await {
            return false;
        }
        sent_events += 1;
    }
    if req.is_streaming() && !p.no_end_bookmark {
        let b = json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"resourceVersion": last_rv.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"}}}});
        if !send(sock, &line(&b), p.split).await {
            return false;
        }
    }
    for l in &p.lines {
        if !chunk(sock, l).await {
            return false;
        }
    }
    if p.close_after_lines || p.close_after.is_some_and(|n| sent_events >= n) {
        return finish(sock, p.reset).await;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        let batch: Vec<(u64, Vec<u8>)> = {
            let m = state.model.lock().unwrap();
            let b = m.log[next..]
                .iter()
                .map(|(rv, ty, o)| (*rv, line(&json!({"type": ty, "object": o}))))
                .collect();
            next = m.log.len();
            b
        };
        for (rv, l) in batch {
            if !send(sock, &l, p.split).await {
                return false;
            }
            last_rv = rv;
            sent_events += 1;
            if p.close_after.is_some_and(|n| sent_events >= n) {
                return finish(sock, p.reset).await;
            }
        }
        tokio::select! {
            _ = log_len.changed() => {}
            _ = tick.tick() => {
                if bookmarks {
                    let b = json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap",
                        "apiVersion": "v1", "metadata": {"resourceVersion": last_rv.to_string()}}});
                    if !send(sock, &line(&b), p.split).await {
                        return false;
                    }
                }
            }
            r = kick.changed() => {
                if r.is_err() {
                    return false;
                }
                let k = *kick.borrow_and_update();
                match k {
                    Kick::None => {}
                    Kick::Close(_) => return end_chunks(sock).await,
                    Kick::Expire(_) => {
                        let e = json!({"type": "ERROR", "object": {"kind": "Status",
                            "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": KICK_MESSAGE, "reason": "Expired", "code": 410}});
                        return chunk(sock, &line(&e)).await && end_chunks(sock).await;
                    }
                }
            }
        }
    }
}

async fn finish(sock: &mut TcpStream, rst: bool) -> bool {
    if rst {
        let _ = sock.flush().await;
        // The caller drops the socket; make that a reset.
        #[allow(
            deprecated,
            reason = "the blocking-close caveat does not apply to a zero linger"
        )]
        let _ = sock.set_linger(Some(Duration::ZERO));
        return false;
    }
    end_chunks(sock).await
}

fn err_body(body: ErrBody, code: u16) -> (&'static str, Vec<u8>) {
    match body {
        ErrBody::Empty => ("text/plain", Vec::new()),
        ErrBody::Html => (
            "text/html",
            format!("<html><head><title>{code}</title></head><body><h1>{code} {}</h1><p>nginx</p></body></html>", reason(code)).into_bytes(),
        ),
        ErrBody::Binary => ("application/octet-stream", (0..=255u8).cycle().take(4096).collect()),
        ErrBody::Control => (
            "text/plain",
            b"bad\0gateway\x1b[31mRED\x1b[0m\x07\x08\r\n\x1b]0;pwned\x07 end".to_vec(),
        ),
        ErrBody::Mega => ("text/plain", "all work and no play ".repeat(MB / 21).into_bytes()),
        ErrBody::Secret => (
            "text/plain",
            format!("upstream rejected GET {PATH}\nAuthorization: Bearer {SECRET}\nCookie: session={SECRET}\n").into_bytes(),
        ),
        ErrBody::StatusSecret | ErrBody::StatusSecretSmall => {
            let pad = if matches!(body, ErrBody::StatusSecret) { MB } else { 2048 };
            let message = format!(
                "denied \u{1b}[31m\0 request with Authorization: Bearer {SECRET} {}",
                "x".repeat(pad)
            );
            (
                "application/json",
                serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": message, "reason": "InternalError", "code": code}))
                .unwrap(),
            )
        }
        ErrBody::StatusRetryHuge => (
            "application/json",
            serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "slow down", "reason": "TooManyRequests",
                "details": {"retryAfterSeconds": u32::MAX}, "code": code}))
            .unwrap(),
        ),
        ErrBody::StatusTooLarge => (
            "application/json",
            serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure",
                "message": "Timeout: Too large resource version: 99999999, current: 8",
                "reason": "Timeout", "code": code,
                "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                    "message": "Too large resource version"}], "retryAfterSeconds": 1}}))
            .unwrap(),
        ),
        ErrBody::Huge => ("text/plain", Vec::new()),
        ErrBody::ProtobufGarbage => (
            "application/vnd.kubernetes.protobuf",
            b"k8s\0\xff\xff\xff\xff\x0f garbage \x00\x01".to_vec(),
        ),
    }
}

/// A repeated 64 KB block of `unit`, for streaming huge bodies without holding them.
fn block(unit: &[u8]) -> Bytes {
    let n = (64 * 1024 / unit.len()).max(1);
    Bytes::from(unit.repeat(n))
}

async fn stream_blocks(sock: &mut TcpStream, block: &Bytes, total: usize) -> bool {
    let mut sent = 0;
    while sent < total {
        if !chunk(sock, block).await {
            return false;
        }
        sent += block.len();
    }
    true
}

/// Never answers; holds the connection until the client gives up.
async fn hold(sock: &mut TcpStream) -> bool {
    let mut tmp = [0u8; 1024];
    loop {
        match sock.read(&mut tmp).await {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

async fn misbehave(state: &State, req: &Request, sock: &mut TcpStream, what: Misbehaviour) -> bool {
    match what {
        Misbehaviour::Status {
            code,
            body,
            retry_after,
        } => {
            let extra: Vec<(&str, &str)> = retry_after
                .map(|r| ("Retry-After", r))
                .into_iter()
                .collect();
            if matches!(body, ErrBody::Huge) {
                let h = head(code, "text/plain", &extra, None);
                return sock.write_all(&h).await.is_ok()
                    && stream_blocks(sock, &block(b"error "), 100 * MB).await
                    && end_chunks(sock).await;
            }
            let (ct, b) = err_body(body, code);
            write_full(sock, code, ct, &extra, &b).await
        }
        Misbehaviour::Redirect => {
            write_full(
                sock,
                302,
                "text/html",
                &[("Location", "http://192.0.2.1/elsewhere")],
                b"<a href=\"http://192.0.2.1/elsewhere\">Found</a>",
            )
            .await
        }
        Misbehaviour::Body { content_type, body } => {
            write_full(sock, 200, content_type, &[], &body).await
        }
        Misbehaviour::TruncatedList => {
            let body = healthy_list_body(state, req);
            let h = head(200, "application/json", &[], Some(body.len()));
            let _ = sock.write_all(&h).await;
            let _ = sock.write_all(&body[..body.len() / 2]).await;
            false
        }
        Misbehaviour::ListWithoutRv | Misbehaviour::ListWithWrongKind => {
            let body = {
                let m = state.model.lock().unwrap();
                let mut items: Vec<Value> = m.objects.values().cloned().collect();
                let rv = matches!(what, Misbehaviour::ListWithWrongKind);
                if rv {
                    items.push(json!({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "not-a-configmap", "namespace": "ns",
                            "resourceVersion": m.rv.to_string()},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}));
                }
                serde_json::to_vec(&list_json(&m, &items.iter().collect::<Vec<_>>(), None, rv))
                    .unwrap()
            };
            write_full(sock, 200, "application/json", &[], &body).await
        }
        Misbehaviour::HugeList { mb } => {
            let h = head(200, "application/json", &[], None);
            let start = br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":["#;
            let item = br#"{"metadata":{"name":"pad","namespace":"ns","resourceVersion":"1"},"data":{"k":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"}},"#;
            let _ = sock.write_all(&h).await.is_ok()
                && chunk(sock, start).await
                && stream_blocks(sock, &block(item), mb * MB).await;
            false
        }
        Misbehaviour::HugeObjectList { mb } => {
            let h = head(200, "application/json", &[], None);
            let start = br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"huge","namespace":"ns","resourceVersion":"1"},"data":{"k":""#;
            let _ = sock.write_all(&h).await.is_ok()
                && chunk(sock, start).await
                && stream_blocks(sock, &block(b"x"), mb * MB).await;
            false
        }
        Misbehaviour::DeepList { depth } => {
            let mut body = br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"deep","namespace":"ns","resourceVersion":"1"},"data":"#.to_vec();
            body.extend(std::iter::repeat_n(b'[', depth));
            body.extend(std::iter::repeat_n(b']', depth));
            body.extend_from_slice(b"}]}");
            write_full(sock, 200, "application/json", &[], &body).await
        }
        Misbehaviour::StallNoAnswer => hold(sock).await,
        Misbehaviour::StallAfterHead => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            hold(sock).await
        }
        Misbehaviour::Trickle => {
            let body = healthy_list_body(state, req);
            if sock
                .write_all(&head(200, "application/json", &[], Some(body.len())))
                .await
                .is_err()
            {
                return false;
            }
            for b in body {
                if sock.write_all(&[b]).await.is_err() {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            true
        }
        Misbehaviour::ResetMidList => {
            let body = healthy_list_body(state, req);
            let h = head(200, "application/json", &[], Some(body.len()));
            let _ = sock.write_all(&h).await;
            let _ = sock.write_all(&body[..body.len() / 2]).await;
            let _ = sock.flush().await;
            #[allow(
                deprecated,
                reason = "the blocking-close caveat does not apply to a zero linger"
            )]
            let _ = sock.set_linger(Some(Duration::ZERO));
            false
        }
        Misbehaviour::CloseAtOnce => false,
        Misbehaviour::EndlessFreshContinue => {
            let body = {
                let m = state.model.lock().unwrap();
                let n = state.requests.load(Ordering::Relaxed);
                let mut item = m.objects.values().next().cloned().unwrap_or_default();
                item["metadata"]["name"] = json!(format!("endless-{n}"));
                serde_json::to_vec(&list_json(&m, &[&item], Some(format!("fresh-{n}")), true))
                    .unwrap()
            };
            write_full(sock, 200, "application/json", &[], &body).await
        }
        Misbehaviour::EndlessContinue | Misbehaviour::RepeatingContinue => {
            let body = {
                let m = state.model.lock().unwrap();
                let items: Vec<&Value> = m.objects.values().take(1).collect();
                let n = state.requests.load(Ordering::Relaxed);
                let token = if matches!(what, Misbehaviour::EndlessContinue) {
                    format!("endless-{n}")
                } else {
                    "again".to_owned()
                };
                serde_json::to_vec(&list_json(&m, &items, Some(token), true)).unwrap()
            };
            write_full(sock, 200, "application/json", &[], &body).await
        }
        Misbehaviour::WatchLines { lines, end } => {
            let p = Prefix {
                lines,
                close_after_lines: matches!(end, End::Close),
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::BadChunking => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            let _ = sock
                .write_all(b"zz\r\n{\"type\":\"ADDED\"}\r\n-5\r\nnope\r\n")
                .await;
            false
        }
        Misbehaviour::SplitLines => {
            let p = Prefix {
                split: true,
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::CloseAfterOneEvent => {
            let p = Prefix {
                close_after: Some(1),
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::CloseEmpty => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            end_chunks(sock).await
        }
        Misbehaviour::Silent => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            hold(sock).await
        }
        Misbehaviour::ResetMidWatch => {
            let p = Prefix {
                close_after: Some(1),
                reset: true,
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await;
            false
        }
        Misbehaviour::StreamingCloseEarly => {
            let p = Prefix {
                no_end_bookmark: true,
                close_after_lines: true,
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::StreamingNoEndBookmark => {
            let p = Prefix {
                no_end_bookmark: true,
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::HugeEvent { mb } => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            let start = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"huge","namespace":"ns","resourceVersion":"1"},"data":{"k":""#;
            let ok = chunk(sock, start).await
                && stream_blocks(sock, &block(b"x"), mb * MB).await
                && chunk(sock, b"\"}}}\n").await;
            ok && end_chunks(sock).await
        }
    }
}
