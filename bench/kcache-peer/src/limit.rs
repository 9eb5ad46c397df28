//! The `limit` storage: what the server alone costs, with nothing decoded.
//!
//! It sends the request kcache's reflector sends first, through the same kube-client stack
//! (TLS, auth, HTTP version, `Accept`) as the other storages, and reads the answer to the
//! point where the reflector would be synced, skipping the objects' bytes:
//!
//! - `list-watch`: the first list (`limit=500&resourceVersion=0`, which the watch cache
//!   answers in one page), read to its end; a `continue` token is followed as the reflector
//!   follows it (`limit=500&continue=…`). Only the list's envelope is looked at (its
//!   `metadata.continue`). Items are counted without parsing them: in protobuf, each item is
//!   one length-delimited field 2 of the list (its bytes are skipped); in JSON, each item's
//!   metadata has one `"resourceVersion":"` after the list's `"items":[` (a byte search; an
//!   escaped string cannot hold that sequence).
//! - `streaming`: the watch with `sendInitialEvents=true&resourceVersionMatch=NotOlderThan&
//!   allowWatchBookmarks=true`, read until the BOOKMARK with the `k8s.io/initial-events-end`
//!   annotation. Events are told apart by their first bytes — a JSON line's
//!   `{"type":"…"`, a protobuf frame's `WatchEvent.type` (its first field; the object after
//!   it is not touched) — and only bookmarks and errors are kept whole; `n` is the number of
//!   ADDED events.
//!
//! The line has the other storages' sync figures and no update figures (`--updates` must be
//! 0), plus `body_bytes` (the body's bytes, inflated when the server answered a list in gzip),
//! `wire_bytes` (as read from the connection) and the request counters. Lists ask for gzip as
//! kcache-client's do, so a gzip answer's inflating is part of the limit.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::Pod;
use kcache_bench::{
    metrics,
    peer::{Dataset, Mode, PeerArgs, SyncTimer},
    widgets::Widget,
};
use kcache_client::{lister_watcher::ACCEPT_JSON, protobuf};
use kube_client::client::Body;
use kube_core::{
    Resource as _,
    params::{ListParams, WatchParams},
};
use memchr::memmem;

use crate::wire::WireCounts;

mod json;
mod proto;

use json::{JsonList, JsonWatch};
use proto::{ProtoList, ProtoWatch};

/// The reflector's page size for its first list (client-go's pager).
const PAGE: u32 = 500;
/// The reflector's shortest watch timeout, in seconds (it picks one in [300, 600)).
const WATCH_TIMEOUT_S: u32 = 300;
/// The annotation of the bookmark that ends a streaming list.
const INITIAL_EVENTS_END: &[u8] = b"k8s.io/initial-events-end";
/// The magic prefix of kube-apiserver's protobuf envelopes.
const MAGIC: &[u8] = b"k8s\0";

/// What was read.
#[derive(Debug, Default)]
struct Tally {
    /// Items (list) or ADDED events (streaming).
    objects: u64,
    /// Body bytes read (on the wire: gzip bytes for a gzip answer).
    bytes: u64,
    /// Body bytes after inflating a gzip answer (the bytes read otherwise): what a decoder
    /// would see.
    inflated: u64,
    /// Requests sent.
    requests: u64,
}

/// Runs the limit line: syncs as described in the module docs, prints the line.
///
/// # Errors
/// A failed request, a body that is not what the format says, a timeout, or a count or wire
/// format other than asked.
pub(crate) async fn run(
    client: kcache_client::Client,
    args: PeerArgs,
    asked_protobuf: bool,
    counts: Arc<WireCounts>,
) -> anyhow::Result<()> {
    if args.updates > 0 {
        bail!("--storage=limit times no updates: pass --updates 0");
    }
    let kube = client.kube();
    let path = match args.dataset {
        Dataset::Pods => Pod::url_path(&(), Some(&args.namespace)),
        Dataset::Widgets => Widget::url_path(&(), Some(&args.namespace)),
    };
    let timer = SyncTimer::start();
    let sync = async {
        match args.mode {
            Mode::ListWatch => list(kube, &path, asked_protobuf).await,
            Mode::Streaming => stream(kube, &path, asked_protobuf).await,
        }
    };
    let tally = tokio::time::timeout(args.timeout, sync)
        .await
        .map_err(|_| anyhow::anyhow!("not synced within --timeout={:?}", args.timeout))??;
    let mut line = timer.synced("kcache", &args, tally.objects)?;
    let wire = counts.get();
    let (lists, watch_lists) = match args.mode {
        Mode::ListWatch => (tally.requests, 0),
        Mode::Streaming => (0, tally.requests),
    };
    let extra = [
        ("storage", "limit".into()),
        ("client", "kcache-client".into()),
        ("protobuf", wire.all_protobuf().into()),
        ("protobuf_responses", wire.protobuf.into()),
        ("json_responses", wire.json.into()),
        ("other_responses", wire.other.into()),
        ("list_requests", lists.into()),
        ("watch_list_requests", watch_lists.into()),
        ("watch_requests", 0.into()),
        ("body_bytes", tally.inflated.into()),
        ("wire_bytes", tally.bytes.into()),
    ];
    for (key, value) in extra {
        line.extra.insert(key.into(), value);
    }
    if let Ok(mem) = metrics::memory() {
        line.extra
            .insert("rss_at_end_bytes".into(), mem.rss_bytes.into());
    }
    println!("{}", serde_json::to_string(&line)?);
    if line.n != args.n {
        bail!(
            "saw {} pods in namespace {:?}, expected --n={}",
            line.n,
            args.namespace,
            args.n
        );
    }
    if tally.bytes == 0 {
        bail!("the server sent an empty body");
    }
    crate::check_wire(asked_protobuf, wire)
}

/// Sends `request` and returns the response if it is 2xx.
async fn send(
    kube: &kube_client::Client,
    request: http::Request<Vec<u8>>,
    accept: &'static str,
) -> anyhow::Result<http::Response<Body>> {
    let mut request = request.map(Body::from);
    request
        .headers_mut()
        .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    let uri = request.uri().to_string();
    let response = kube
        .send(request)
        .await
        .with_context(|| format!("GET {uri}"))?;
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status();
    let body = response.into_body().collect().await.map(|c| c.to_bytes());
    let text = body.map(|b| String::from_utf8_lossy(&b[..b.len().min(2048)]).into_owned());
    bail!("GET {uri} answered {status}: {}", text.unwrap_or_default())
}

/// Reads `response`'s body into `sink` until the end or until `sink` says it is done.
async fn drain(
    response: http::Response<Body>,
    tally: &mut Tally,
    mut sink: impl FnMut(&[u8]) -> anyhow::Result<bool>,
) -> anyhow::Result<bool> {
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.context("reading the body")?;
        if let Ok(data) = frame.into_data() {
            tally.bytes += data.len() as u64;
            if sink(&data)? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// A list answer's body into `sink`, inflated first when the server sent it in gzip (lists
/// ask for gzip, as kcache-client's do; inflating is the only work done on the bytes).
async fn drain_list(
    response: http::Response<Body>,
    tally: &mut Tally,
    sink: impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    /// `sink` as an [`std::io::Write`] for the inflater, counting the inflated bytes.
    struct Sink<F>(F, u64);
    impl<F: FnMut(&[u8]) -> anyhow::Result<()>> std::io::Write for Sink<F> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            (self.0)(buf).map_err(std::io::Error::other)?;
            self.1 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let gzip = response
        .headers()
        .get(http::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    if !gzip {
        let mut sink = sink;
        let before = tally.bytes;
        drain(response, tally, |d| sink(d).map(|()| false)).await?;
        tally.inflated += tally.bytes - before;
        return Ok(());
    }
    let mut inflate = flate2::write::MultiGzDecoder::new(Sink(sink, 0));
    drain(response, tally, |d| {
        std::io::Write::write_all(&mut inflate, d).context("inflating the gzip body")?;
        Ok(false)
    })
    .await?;
    inflate.try_finish().context("inflating the gzip body")?;
    tally.inflated += inflate.get_ref().1;
    Ok(())
}

/// The reflector's first list, pages followed.
async fn list(kube: &kube_client::Client, path: &str, pb: bool) -> anyhow::Result<Tally> {
    let request = kube_core::Request::new(path);
    let mut tally = Tally::default();
    let mut token: Option<String> = None;
    loop {
        let params = ListParams {
            limit: Some(PAGE),
            continue_token: token.clone(),
            ..ListParams::default()
        };
        let mut req = request.list(&params)?;
        if token.is_none() {
            // What kcache-client's lister-watcher adds (kube-core drops RV 0 with a limit).
            *req.uri_mut() = format!("{}&resourceVersion=0", req.uri()).parse()?;
        }
        let accept = if pb {
            protobuf::ACCEPT_LIST
        } else {
            ACCEPT_JSON
        };
        req.headers_mut().insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("gzip"),
        );
        let response = send(kube, req, accept).await?;
        tally.requests += 1;
        let is_pb = is_protobuf(&response);
        let next = if is_pb {
            let mut walker = ProtoList::default();
            drain_list(response, &mut tally, |d| walker.push(d)).await?;
            tally.objects += walker.finish()?;
            walker.continue_
        } else {
            let mut counter = JsonList::default();
            drain_list(response, &mut tally, |d| counter.push(d)).await?;
            tally.objects += counter.finish()?;
            counter.continue_
        };
        match next.filter(|t| !t.is_empty()) {
            Some(t) if token.as_ref() == Some(&t) => bail!("the server repeated continue {t:?}"),
            Some(t) => token = Some(t),
            None => return Ok(tally),
        }
    }
}

/// The reflector's streaming list, read up to the initial-events-end bookmark.
async fn stream(kube: &kube_client::Client, path: &str, pb: bool) -> anyhow::Result<Tally> {
    let params = WatchParams {
        timeout: Some(WATCH_TIMEOUT_S),
        bookmarks: true,
        send_initial_events: true,
        ..WatchParams::default()
    };
    let req = kube_core::Request::new(path).watch(&params, "")?;
    let accept = if pb {
        protobuf::ACCEPT_WATCH
    } else {
        ACCEPT_JSON
    };
    let response = send(kube, req, accept).await?;
    let mut tally = Tally {
        requests: 1,
        ..Tally::default()
    };
    let ended = if is_protobuf(&response) {
        let mut frames = ProtoWatch::default();
        let ended = drain(response, &mut tally, |d| frames.push(d)).await?;
        tally.objects = frames.added;
        ended
    } else {
        let mut lines = JsonWatch::default();
        let ended = drain(response, &mut tally, |d| lines.push(d)).await?;
        tally.objects = lines.added;
        ended
    };
    if !ended {
        bail!("the watch ended before the initial-events-end bookmark");
    }
    tally.inflated = tally.bytes; // watches are never compressed
    Ok(tally)
}

fn is_protobuf(response: &http::Response<Body>) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .starts_with("application/vnd.kubernetes.protobuf")
        })
}

/// What a watch event's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not known yet (too few bytes).
    Unknown,
    Added,
    /// Kept whole: a bookmark or an error.
    Keep,
    /// Any other type: skipped.
    Other,
}

/// Classifies an event by its type string.
fn kind_of(event_type: &[u8]) -> Kind {
    match event_type {
        b"ADDED" => Kind::Added,
        b"BOOKMARK" | b"ERROR" => Kind::Keep,
        _ => Kind::Other,
    }
}

/// Whether a kept event is the end bookmark; an error event is an error.
fn end_of_initial_events(event: &[u8], bookmark: bool) -> anyhow::Result<bool> {
    if !bookmark {
        let text = String::from_utf8_lossy(&event[..event.len().min(2048)]).into_owned();
        bail!("the watch sent an ERROR event: {text}");
    }
    Ok(memmem::find(event, INITIAL_EVENTS_END).is_some())
}
