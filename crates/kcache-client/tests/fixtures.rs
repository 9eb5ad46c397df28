//! Every JSON response body and watch event recorded from kube-apiserver v1.36
//! (`testdata/kube-apiserver-v1.36/`, protobuf bodies excepted) goes through this crate's
//! decoders — lists and watches over real HTTP, replayed byte for byte by a local server.
//!
//! The fixtures normalise timestamps to `"<time>"`, which no time type parses; the loader puts a
//! real RFC 3339 timestamp back before serving. Everything else is served as recorded.

mod common;

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, Result, bail, ensure};
use axum::{Router, body::Body, response::Response};
use bytes::Bytes;
use futures::{StreamExt, stream};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Pod},
};
use kcache::{
    ListerWatcher,
    lister_watcher::{ListParams, WatchEvent, WatchParams},
};
use kcache_client::{
    Client, HttpListerWatcher,
    decode::{Typed, decode_object},
};
use kube_core::{DynamicObject, PartialObjectMeta, Status};
use serde_json::Value;

/// What the replay server answers next.
#[derive(Clone, Default)]
struct Served {
    status: u16,
    headers: Vec<(String, String)>,
    chunks: Vec<Bytes>,
}

async fn start_replay() -> Result<(SocketAddr, Arc<Mutex<Served>>)> {
    let current = Arc::new(Mutex::new(Served::default()));
    let state = current.clone();
    let app = Router::new().fallback(move || {
        let served = state.lock().unwrap().clone();
        async move {
            let mut resp = Response::builder().status(served.status);
            for (k, v) in &served.headers {
                resp = resp.header(k, v);
            }
            let body = Body::from_stream(stream::iter(
                served.chunks.into_iter().map(Ok::<_, std::io::Error>),
            ));
            resp.body(body).unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, current))
}

/// Undoes the `<time>` normalisation so that timestamps parse.
fn denormalise(v: &Value) -> Result<Vec<u8>> {
    let s = serde_json::to_string(v)?;
    Ok(s.replace("\"<time>\"", "\"2026-01-01T00:00:00Z\"")
        .into_bytes())
}

/// Splits `bytes` into chunks of awkward, varying sizes.
fn awkward_chunks(bytes: &[u8]) -> Vec<Bytes> {
    let sizes = [1usize, 7, 64, 3, 500, 13];
    let mut out = Vec::new();
    let mut i = 0;
    let mut k = 0;
    while i < bytes.len() {
        let n = sizes[k % sizes.len()].min(bytes.len() - i);
        out.push(Bytes::copy_from_slice(&bytes[i..i + n]));
        i += n;
        k += 1;
    }
    out
}

#[derive(Default, Debug)]
struct Counts {
    lists: usize,
    watch_events: usize,
    statuses: usize,
    objects: usize,
    text: usize,
    protobuf_skipped: usize,
}

struct Harness {
    client: Client,
    served: Arc<Mutex<Served>>,
    counts: Counts,
}

impl Harness {
    fn serve(&self, status: u16, headers: &Value, chunks: Vec<Bytes>) {
        let mut hs = Vec::new();
        if let Some(map) = headers.as_object() {
            for (k, v) in map {
                if k.eq_ignore_ascii_case("Transfer-Encoding") {
                    continue;
                }
                hs.push((k.clone(), v.as_str().unwrap_or_default().to_owned()));
            }
        }
        *self.served.lock().unwrap() = Served {
            status,
            headers: hs,
            chunks,
        };
    }

    fn lw<K>(&self) -> HttpListerWatcher<K> {
        HttpListerWatcher::at_path(self.client.clone(), "/replay".to_owned(), false)
    }

    async fn check_step(&mut self, file: &str, step: &Value) -> Result<()> {
        let name = step["name"].as_str().unwrap_or("?");
        let resp = &step["response"];
        let status = resp["status"].as_u64().context("status")? as u16;
        let headers = &resp["headers"];
        let ctx = || format!("{file}: {name}");
        if resp.get("body_base64").is_some() {
            self.counts.protobuf_skipped += 1;
            return Ok(());
        }
        if let Some(events) = resp.get("events").and_then(Value::as_array) {
            return self
                .check_watch(status, headers, events)
                .await
                .with_context(ctx);
        }
        if let Some(text) = resp.get("body_text").and_then(Value::as_str) {
            self.serve(status, headers, vec![Bytes::from(text.to_owned())]);
            let err = self
                .lw::<DynamicObject>()
                .list(&ListParams::default())
                .await;
            let err = err
                .err()
                .with_context(|| format!("{}: expected an error", ctx()))?;
            ensure!(err.code() == Some(status), "{}: {err}", ctx());
            self.counts.text += 1;
            return Ok(());
        }
        let body = &resp["body"];
        if body.is_null() {
            return Ok(());
        }
        let kind = body["kind"].as_str().unwrap_or_default();
        if kind == "Status" && status >= 400 {
            return self
                .check_status(status, headers, body)
                .await
                .with_context(ctx);
        }
        if kind.ends_with("List") && body.get("items").is_some() {
            return self
                .check_list(status, headers, body)
                .await
                .with_context(ctx);
        }
        // Single objects, discovery documents, tables and success Statuses.
        let bytes = denormalise(body)?;
        match kind {
            "Status" => {
                let s: Status = decode_object(&bytes, &Typed::new())?;
                ensure!(s.is_success() || s.code < 400, "{}", ctx());
            }
            "ConfigMap" => {
                let cm: ConfigMap = decode_object(&bytes, &Typed::new()).with_context(ctx)?;
                ensure!(cm.metadata.name.is_some(), "{}", ctx());
            }
            "Pod" => {
                let _: Pod = decode_object(&bytes, &Typed::new()).with_context(ctx)?;
            }
            "Lease" => {
                let _: Lease = decode_object(&bytes, &Typed::new()).with_context(ctx)?;
            }
            _ => {}
        }
        let dynamic: DynamicObject = decode_object(&bytes, &Typed::new()).with_context(ctx)?;
        let stripped: DynamicObject =
            decode_object(&bytes, &Typed::new().strip_managed_fields(true)).with_context(ctx)?;
        ensure!(stripped.metadata.managed_fields.is_none(), "{}", ctx());
        ensure!(dynamic.metadata.name == stripped.metadata.name, "{}", ctx());
        self.counts.objects += 1;
        Ok(())
    }

    async fn check_status(&mut self, status: u16, headers: &Value, body: &Value) -> Result<()> {
        let expected: Status = serde_json::from_value(body.clone())?;
        for watch in [false, true] {
            self.serve(status, headers, vec![Bytes::from(denormalise(body)?)]);
            let err = if watch {
                self.lw::<ConfigMap>()
                    .watch(&WatchParams::default(), "1")
                    .await
                    .err()
            } else {
                self.lw::<ConfigMap>()
                    .list(&ListParams::default())
                    .await
                    .err()
            };
            let err = err.context("expected an API error")?;
            let got = err.status().context("expected a Status")?;
            ensure!(got.code == status, "code {} != {status}", got.code);
            ensure!(got.reason == expected.reason, "reason {:?}", got.reason);
            if status != 401 && status != 403 {
                ensure!(got.message == expected.message, "message {:?}", got.message);
            }
            ensure!(got.details == expected.details, "details");
            let header_retry = headers["Retry-After"].as_str().map(|s| s.parse::<u64>());
            if let Some(secs) = header_retry {
                ensure!(
                    err.retry_after() == Some(Duration::from_secs(secs?)),
                    "retry-after"
                );
            }
            match status {
                410 => ensure!(err.is_expired(), "410 not recognised as expired: {err}"),
                504 if expected.message.contains("Too large resource version") => {
                    ensure!(
                        err.is_too_large_resource_version(),
                        "504 not too-large: {err}"
                    );
                    ensure!(!err.is_expired(), "504 seen as expired");
                }
                429 => ensure!(err.is_too_many_requests(), "429"),
                _ => ensure!(!err.is_expired(), "{status} seen as expired"),
            }
        }
        self.counts.statuses += 1;
        Ok(())
    }

    async fn check_list(&mut self, status: u16, headers: &Value, body: &Value) -> Result<()> {
        let bytes = Bytes::from(denormalise(body)?);
        let items = body["items"].as_array().map_or(0, Vec::len);
        let names: Vec<Option<String>> = body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        let rv = body["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_owned);
        let cont = body["metadata"]["continue"].as_str().map(str::to_owned);

        self.serve(status, headers, awkward_chunks(&bytes));
        let list = self
            .lw::<DynamicObject>()
            .list(&ListParams::default())
            .await?;
        ensure!(list.items.len() == items, "dynamic items");
        let got: Vec<_> = list.items.iter().map(|o| o.metadata.name.clone()).collect();
        ensure!(got == names, "names {got:?} != {names:?}");
        ensure!(list.metadata.resource_version == rv, "list RV");
        ensure!(list.metadata.continue_ == cont, "continue token");

        let kind = body["kind"].as_str().unwrap_or_default();
        self.serve(status, headers, awkward_chunks(&bytes));
        let typed_len = match kind {
            "ConfigMapList" => self
                .lw::<ConfigMap>()
                .list(&ListParams::default())
                .await?
                .items
                .len(),
            "PodList" => self
                .lw::<Pod>()
                .list(&ListParams::default())
                .await?
                .items
                .len(),
            "PartialObjectMetadataList" => self
                .lw::<PartialObjectMeta<ConfigMap>>()
                .metadata_only(true)
                .list(&ListParams::default())
                .await?
                .items
                .len(),
            "APIGroupDiscoveryList" => self
                .lw::<kube_core::discovery::v2::APIGroupDiscovery>()
                .list(&ListParams::default())
                .await?
                .items
                .len(),
            other => bail!("unexpected list kind {other}"),
        };
        ensure!(typed_len == items, "typed items");
        self.counts.lists += 1;
        Ok(())
    }

    async fn check_watch(&mut self, status: u16, headers: &Value, events: &[Value]) -> Result<()> {
        let mut body = Vec::new();
        for e in events {
            body.extend(denormalise(e)?);
            body.push(b'\n');
        }
        let object_kind = events
            .iter()
            .find_map(|e| e["object"]["kind"].as_str().filter(|k| *k != "Status"))
            .unwrap_or("ConfigMap")
            .to_owned();
        self.serve(status, headers, awkward_chunks(&body));
        let got: Vec<_> = match object_kind.as_str() {
            "ConfigMap" => {
                collect_kinds(
                    self.lw::<ConfigMap>()
                        .watch(&WatchParams::default(), "1")
                        .await?,
                )
                .await?
            }
            "Pod" => {
                collect_kinds(self.lw::<Pod>().watch(&WatchParams::default(), "1").await?).await?
            }
            _ => {
                collect_kinds(
                    self.lw::<DynamicObject>()
                        .watch(&WatchParams::default(), "1")
                        .await?,
                )
                .await?
            }
        };
        ensure!(
            got.len() == events.len(),
            "{} events decoded of {}",
            got.len(),
            events.len()
        );
        for (g, e) in got.iter().zip(events) {
            let ty = e["type"].as_str().unwrap_or_default();
            ensure!(g.0 == ty, "event type {} != {ty}", g.0);
            if ty == "ERROR" {
                let code = e["object"]["code"].as_u64().unwrap_or_default();
                ensure!(g.1 == Some(code as u16), "ERROR code");
                ensure!(code != 410 || g.2, "ERROR 410 not recognised as expired");
            }
            if ty == "BOOKMARK" {
                let rv = e["object"]["metadata"]["resourceVersion"].as_str();
                ensure!(g.3.as_deref() == rv, "bookmark RV");
            }
        }
        // The same stream through the dynamic decoder.
        self.serve(status, headers, awkward_chunks(&body));
        let dynamic = collect_kinds(
            self.lw::<DynamicObject>()
                .watch(&WatchParams::default(), "1")
                .await?,
        )
        .await?;
        ensure!(dynamic == got, "dynamic decode differs");
        self.counts.watch_events += events.len();
        Ok(())
    }
}

/// (type, ERROR code, ERROR is expired, BOOKMARK RV) per event; a stream error fails.
type Seen = (String, Option<u16>, bool, Option<String>);

async fn collect_kinds<K>(mut stream: kcache::lister_watcher::WatchStream<K>) -> Result<Vec<Seen>> {
    let mut out = Vec::new();
    while let Some(item) = stream.next().await {
        out.push(match item? {
            WatchEvent::Added(_) => ("ADDED".into(), None, false, None),
            WatchEvent::Modified(_) => ("MODIFIED".into(), None, false, None),
            WatchEvent::Deleted(_) => ("DELETED".into(), None, false, None),
            WatchEvent::Bookmark(b) => (
                "BOOKMARK".into(),
                None,
                false,
                Some(b.metadata.resource_version),
            ),
            WatchEvent::Error(s) => {
                let expired = kcache::lister_watcher::Error::api(*s.clone(), None).is_expired();
                ("ERROR".into(), Some(s.code), expired, None)
            }
        });
    }
    Ok(out)
}

fn steps_of(step: &Value) -> Vec<&Value> {
    let mut out = vec![step];
    if let Some(cs) = step.get("concurrent_steps").and_then(Value::as_array) {
        for c in cs {
            out.extend(steps_of(c));
        }
    }
    out
}

#[tokio::test]
async fn every_json_response_and_watch_event_in_the_fixtures_decodes() -> Result<()> {
    let dir = common::fixtures_dir();
    let (addr, served) = start_replay().await?;
    let mut h = Harness {
        client: Client::from_url(&format!("http://{addr}"))?,
        served,
        counts: Counts::default(),
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| format!("fixtures at {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    ensure!(
        files.len() >= 14,
        "expected the 14 fixture files in {}",
        dir.display()
    );
    for path in &files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let doc: Value = serde_json::from_slice(&std::fs::read(path)?)?;
        for top in doc["steps"].as_array().context("steps")? {
            for step in steps_of(top) {
                let name = step["name"].as_str().unwrap_or("?");
                tokio::time::timeout(Duration::from_secs(20), h.check_step(&file, step))
                    .await
                    .with_context(|| format!("{file}: {name}: timed out"))??;
            }
        }
    }
    let c = &h.counts;
    eprintln!("{c:?}");
    // The recorded totals: nothing may be skipped silently.
    // (Counted independently from the fixture files: 24 ConfigMapList + 1 PodList +
    // 1 PartialObjectMetadataList + 2 APIGroupDiscoveryList; 99 JSON watch events; 71 non-2xx
    // Status bodies; 1 plain-text 404; 6 protobuf bodies.)
    ensure!(c.lists == 28, "lists {c:?}");
    ensure!(c.watch_events == 99, "watch events {c:?}");
    ensure!(c.text == 1, "text {c:?}");
    ensure!(c.statuses == 71, "statuses {c:?}");
    ensure!(c.objects == 92, "objects {c:?}");
    ensure!(c.protobuf_skipped == 6, "protobuf {c:?}");
    Ok(())
}
