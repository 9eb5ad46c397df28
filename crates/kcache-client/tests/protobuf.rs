//! Protobuf content negotiation (feature `protobuf`, on by default): what is asked for, how a
//! protobuf answer is decoded, and the clean fallback when a server answers JSON or 406.
//!
//! The protobuf server here replays the bodies recorded from kube-apiserver v1.36
//! (`testdata/kube-apiserver-v1.36/protobuf.json`) on a real socket; the embedded
//! kcache-apiserver answers protobuf for built-in kinds too, and JSON for the rest.
#![cfg(feature = "protobuf")]

mod common;

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use anyhow::{Context, Result, ensure};
use axum::{
    Router,
    body::Body,
    extract::{RawQuery, State},
    http::{HeaderMap, StatusCode},
    response::Response,
    routing::get,
};
use common::TestServer;
use common::protobuf_fixture::{body, fixture, step};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcache::{
    ListerWatcher,
    lister_watcher::{ListParams, WatchParams},
};
use kcache_client::{
    Client, HttpListerWatcher,
    compact::{Compact, CompactDecoder, Format},
    decode::ItemDecoder,
    protobuf,
};
use kube_core::WatchEvent;
use serde_json::{Value, json};

fn recorded_body(f: &Value, step_prefix: &str) -> Vec<u8> {
    body(step(f, step_prefix)).to_vec()
}

/// What the fake server does with a request.
#[derive(Clone, Copy)]
enum Mode {
    /// Answers protobuf from the fixtures when asked for it.
    Protobuf,
    /// Answers 406 to anything mentioning protobuf, JSON otherwise.
    RefuseProtobuf,
    /// As `Protobuf`, the list in 7-byte chunks.
    ListInPieces,
    /// As `ListInPieces`, the list breaking off after two thirds of its bytes.
    ListCutShort,
    /// The list gzipped, in 7-byte chunks, when the request accepts gzip (400 otherwise).
    Gzip,
    /// As `Gzip`, the gzip stream cut after two thirds of its bytes and the body ended
    /// cleanly (no transport error): only the gzip stream shows the cut.
    GzipCutShort,
    /// The list in a `Content-Encoding` that was not asked for.
    Brotli,
}

#[derive(Clone)]
struct Fake {
    mode: Mode,
    accepts: Arc<Mutex<Vec<String>>>,
    list: Arc<Vec<u8>>,
    watch: Arc<Vec<u8>>,
    status_404: Arc<Vec<u8>>,
}

async fn pods(State(fake): State<Fake>, RawQuery(query): RawQuery, headers: HeaderMap) -> Response {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    fake.accepts.lock().unwrap().push(accept.clone());
    let watch = query.unwrap_or_default().contains("watch=");
    let wants_protobuf = accept.contains("application/vnd.kubernetes.protobuf");
    let response = Response::builder();
    let accepts_gzip = headers
        .get("accept-encoding")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("gzip"));
    match (fake.mode, wants_protobuf, watch) {
        (Mode::Gzip | Mode::GzipCutShort, true, false) if !accepts_gzip => response
            .status(StatusCode::BAD_REQUEST)
            .body(Body::from("this fake only answers lists in gzip")),
        (Mode::Gzip | Mode::GzipCutShort, true, false) => {
            let mut gz =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut gz, &fake.list).unwrap();
            let mut body = gz.finish().unwrap();
            if matches!(fake.mode, Mode::GzipCutShort) {
                body.truncate(body.len() * 2 / 3);
            }
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                body.chunks(7).map(|c| Ok(c.to_vec())).collect();
            response
                .header("content-type", "application/vnd.kubernetes.protobuf")
                .header("content-encoding", "gzip")
                .body(Body::from_stream(futures::stream::iter(chunks)))
        }
        (Mode::Brotli, true, false) => response
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .header("content-encoding", "br")
            .body(Body::from(fake.list.to_vec())),
        (Mode::ListInPieces | Mode::ListCutShort, true, false) => {
            let cut = match fake.mode {
                Mode::ListCutShort => fake.list.len() * 2 / 3,
                _ => fake.list.len(),
            };
            let mut chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                fake.list[..cut].chunks(7).map(|c| Ok(c.to_vec())).collect();
            if cut < fake.list.len() {
                chunks.push(Err(std::io::Error::other("connection reset")));
            }
            response
                .header("content-type", "application/vnd.kubernetes.protobuf")
                .body(Body::from_stream(futures::stream::iter(chunks)))
        }
        (Mode::Protobuf, true, false) => response
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .body(Body::from(fake.list.to_vec())),
        (Mode::Protobuf, true, true) => {
            // Chunks that do not follow frame boundaries.
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                fake.watch.chunks(100).map(|c| Ok(c.to_vec())).collect();
            response
                .header(
                    "content-type",
                    "application/vnd.kubernetes.protobuf;stream=watch",
                )
                .body(Body::from_stream(futures::stream::iter(chunks)))
        }
        (Mode::RefuseProtobuf, true, _) => response
            .status(StatusCode::NOT_ACCEPTABLE)
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "reason": "NotAcceptable", "code": 406, "message": "only JSON here"})
                .to_string(),
            )),
        (_, _, false) => response
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
                       "items": [{"metadata": {"name": "json-pod", "namespace": "fx-proto"}}]})
                .to_string(),
            )),
        (_, _, true) => response
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"type": "ADDED", "object": {"kind": "Pod", "apiVersion": "v1",
                       "metadata": {"name": "json-pod", "namespace": "fx-proto", "resourceVersion": "10"}}})
                .to_string()
                    + "\n",
            )),
    }
    .unwrap()
}

async fn not_found(State(fake): State<Fake>) -> Response {
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(Body::from(fake.status_404.to_vec()))
        .unwrap()
}

/// Starts the fake server on 127.0.0.1:0; returns a client for it and the recorded Accepts.
async fn fake_server(mode: Mode) -> Result<(Client, Arc<Mutex<Vec<String>>>)> {
    let f = fixture();
    let fake = Fake {
        mode,
        accepts: Arc::default(),
        list: Arc::new(recorded_body(&f, "list 3 pods as protobuf")),
        watch: Arc::new(recorded_body(&f, "live protobuf watch")),
        status_404: Arc::new(recorded_body(&f, "404 with protobuf Accept")),
    };
    let accepts = fake.accepts.clone();
    let app = Router::new()
        .route("/api/v1/namespaces/fx-proto/pods", get(pods))
        .route("/api/v1/namespaces/missing/pods", get(not_found))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((Client::from_url(&format!("http://{addr}"))?, accepts))
}

#[tokio::test]
async fn built_in_types_are_listed_over_protobuf() -> Result<()> {
    let (client, accepts) = fake_server(Mode::Protobuf).await?;
    let lw = HttpListerWatcher::<Pod>::namespaced(client, "fx-proto");
    let list = lw.list(&ListParams::default()).await?;
    let names: Vec<_> = list
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    ensure!(names == ["pb-1", "pb-2", "pb-3"], "{names:?}");
    ensure!(list.types.kind == "PodList", "{:?}", list.types);
    ensure!(list.metadata.resource_version.is_some());
    let pod = &list.items[0];
    ensure!(
        pod.spec.as_ref().unwrap().containers[0].image.as_deref()
            == Some("registry.k8s.io/pause:3.10")
    );
    ensure!(accepts.lock().unwrap().as_slice() == [protobuf::ACCEPT_LIST]);
    Ok(())
}

#[tokio::test]
async fn a_protobuf_list_arriving_in_pieces_is_decoded_the_same() -> Result<()> {
    let (client, _) = fake_server(Mode::ListInPieces).await?;
    let typed = HttpListerWatcher::<Pod>::namespaced(client.clone(), "fx-proto")
        .list(&ListParams::default())
        .await?;
    let names: Vec<_> = typed
        .items
        .iter()
        .map(|p| p.metadata.name.clone())
        .collect();
    ensure!(
        names
            == [
                Some("pb-1".into()),
                Some("pb-2".into()),
                Some("pb-3".into())
            ],
        "{names:?}"
    );
    ensure!(
        typed.metadata.resource_version.is_some(),
        "{:?}",
        typed.metadata
    );
    let lean = HttpListerWatcher::<Compact<Pod>>::namespaced(client, "fx-proto")
        .with_decoder(CompactDecoder::new())
        .list(&ListParams::default())
        .await?;
    let names: Vec<_> = lean
        .items
        .iter()
        .map(|p| p.metadata().name.clone())
        .collect();
    ensure!(
        names
            == typed
                .items
                .iter()
                .map(|p| p.metadata.name.clone())
                .collect::<Vec<_>>()
    );
    ensure!(lean.items[0].format() == Format::Protobuf);
    ensure!(lean.items[0].typed()?.spec == typed.items[0].spec);
    Ok(())
}

#[tokio::test]
async fn a_protobuf_list_that_breaks_off_is_an_error_not_a_short_list() -> Result<()> {
    let (client, _) = fake_server(Mode::ListCutShort).await?;
    let err = HttpListerWatcher::<Pod>::namespaced(client, "fx-proto")
        .list(&ListParams::default())
        .await
        .err()
        .context("a list cut short must fail")?;
    ensure!(err.to_string().contains("broke off"), "{err}");
    Ok(())
}

/// Lists ask for gzip (as client-go does) and a gzip body, arriving in 7-byte pieces, decodes
/// to the same list as the plain one.
#[tokio::test]
async fn a_gzip_list_is_asked_for_and_decoded_the_same() -> Result<()> {
    let (plain, _) = fake_server(Mode::Protobuf).await?;
    let expected = HttpListerWatcher::<Pod>::namespaced(plain, "fx-proto")
        .list(&ListParams::default())
        .await?;
    let (client, _) = fake_server(Mode::Gzip).await?;
    let lw = HttpListerWatcher::<Pod>::namespaced(client.clone(), "fx-proto");
    let typed = lw.list(&ListParams::default()).await?;
    ensure!(typed.items == expected.items, "{:?}", typed.items);
    // WireStats counts list bytes after content decoding: the protobuf body, not the gzip.
    let plain_len = recorded_body(&fixture(), "list 3 pods as protobuf").len() as u64;
    ensure!(
        lw.wire_stats().list_bytes() == plain_len,
        "list bytes {} for a {plain_len}-byte body",
        lw.wire_stats().list_bytes()
    );
    ensure!(typed.metadata.resource_version == expected.metadata.resource_version);
    let lean = HttpListerWatcher::<Compact<Pod>>::namespaced(client, "fx-proto")
        .with_decoder(CompactDecoder::new())
        .list(&ListParams::default())
        .await?;
    ensure!(lean.items.len() == 3, "{} items", lean.items.len());
    ensure!(lean.items[2].typed()? == expected.items[2]);
    Ok(())
}

/// A gzip stream that stops short, in a body that ends cleanly, is an error, not a short list.
#[tokio::test]
async fn a_gzip_list_cut_short_is_an_error_not_a_short_list() -> Result<()> {
    let (client, _) = fake_server(Mode::GzipCutShort).await?;
    let err = HttpListerWatcher::<Pod>::namespaced(client, "fx-proto")
        .list(&ListParams::default())
        .await
        .err()
        .context("a cut gzip stream must fail")?;
    ensure!(err.to_string().contains("gzip list body"), "{err}");
    Ok(())
}

/// A `Content-Encoding` that was not asked for is named in a clear error.
#[tokio::test]
async fn a_list_in_an_encoding_not_asked_for_is_an_error() -> Result<()> {
    let (client, _) = fake_server(Mode::Brotli).await?;
    let err = HttpListerWatcher::<Pod>::namespaced(client, "fx-proto")
        .list(&ListParams::default())
        .await
        .err()
        .context("a brotli body must fail")?;
    ensure!(err.to_string().contains("Content-Encoding br"), "{err}");
    Ok(())
}

#[tokio::test]
async fn built_in_types_are_watched_over_protobuf() -> Result<()> {
    let (client, accepts) = fake_server(Mode::Protobuf).await?;
    let lw = HttpListerWatcher::<Pod>::namespaced(client, "fx-proto");
    let events: Vec<_> = lw
        .watch(&WatchParams::default(), "1")
        .await?
        .collect()
        .await;
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            Ok(WatchEvent::Added(p)) => {
                format!("ADDED {}", p.metadata.name.as_deref().unwrap_or(""))
            }
            Ok(WatchEvent::Modified(p)) => {
                format!("MODIFIED {}", p.metadata.name.as_deref().unwrap_or(""))
            }
            Ok(WatchEvent::Deleted(p)) => {
                format!("DELETED {}", p.metadata.name.as_deref().unwrap_or(""))
            }
            other => format!("{other:?}"),
        })
        .collect();
    ensure!(
        kinds
            == [
                "ADDED pb-w",
                "MODIFIED pb-w",
                "MODIFIED pb-w",
                "DELETED pb-w"
            ],
        "{kinds:?}"
    );
    ensure!(accepts.lock().unwrap().as_slice() == [protobuf::ACCEPT_WATCH]);
    Ok(())
}

#[tokio::test]
async fn protobuf_status_error_reaches_the_caller_as_a_status() -> Result<()> {
    let (client, _) = fake_server(Mode::Protobuf).await?;
    let err = HttpListerWatcher::<Pod>::namespaced(client, "missing")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    let status = err.status().context("an API error")?;
    ensure!(
        status.code == 404 && status.reason == "NotFound",
        "{status:?}"
    );
    ensure!(
        status.message == "pods \"nope\" not found",
        "{}",
        status.message
    );
    Ok(())
}

#[tokio::test]
async fn server_refusing_protobuf_with_406_is_asked_again_for_json() -> Result<()> {
    let (client, accepts) = fake_server(Mode::RefuseProtobuf).await?;
    let lw = HttpListerWatcher::<Pod>::namespaced(client, "fx-proto");
    let list = lw.list(&ListParams::default()).await?;
    ensure!(list.items[0].metadata.name.as_deref() == Some("json-pod"));
    let mut watch = lw.watch(&WatchParams::default(), "9").await?;
    match watch.next().await {
        Some(Ok(WatchEvent::Added(p))) => ensure!(p.metadata.name.as_deref() == Some("json-pod")),
        other => anyhow::bail!("expected ADDED json-pod, got {other:?}"),
    }
    let accepts = accepts.lock().unwrap().clone();
    ensure!(accepts.len() == 4, "{accepts:?}");
    ensure!(
        accepts[0] == protobuf::ACCEPT_LIST && !accepts[1].contains("protobuf"),
        "{accepts:?}"
    );
    ensure!(
        accepts[2] == protobuf::ACCEPT_WATCH && !accepts[3].contains("protobuf"),
        "{accepts:?}"
    );
    Ok(())
}

#[tokio::test]
async fn metadata_only_and_non_built_in_types_never_ask_for_protobuf() -> Result<()> {
    let (client, accepts) = fake_server(Mode::Protobuf).await?;
    let lw = HttpListerWatcher::<Pod>::namespaced(client.clone(), "fx-proto").metadata_only(true);
    let _ = lw.list(&ListParams::default()).await;
    ensure!(!accepts.lock().unwrap()[0].contains("protobuf"));
    // A DynamicObject (custom resources, discovery-driven types) is decoded as JSON.
    ensure!(!ItemDecoder::<kube_core::DynamicObject>::accepts_protobuf(
        &kcache_client::Typed::new()
    ));
    ensure!(ItemDecoder::<ConfigMap>::accepts_protobuf(
        &kcache_client::Typed::new()
    ));
    Ok(())
}

/// [`Typed`](kcache_client::Typed), counting the objects that arrived as protobuf.
#[derive(Clone, Default)]
struct Counting {
    protobuf_objects: Arc<AtomicUsize>,
}

impl ItemDecoder<ConfigMap> for Counting {
    fn decode_item<'de, D: serde::Deserializer<'de>>(&self, d: D) -> Result<ConfigMap, D::Error> {
        ItemDecoder::<ConfigMap>::decode_item(&kcache_client::Typed::new(), d)
    }

    fn decode_protobuf(
        &self,
        envelope: kcache_proto::Envelope,
    ) -> Option<Result<ConfigMap, kcache_proto::DecodeError>> {
        self.protobuf_objects.fetch_add(1, Ordering::SeqCst);
        ItemDecoder::<ConfigMap>::decode_protobuf(&kcache_client::Typed::new(), envelope)
    }

    fn accepts_protobuf(&self) -> bool {
        true
    }
}

/// Lists two ConfigMaps and watches one more; returns how many objects came as protobuf.
async fn list_and_watch(s: &TestServer) -> Result<usize> {
    s.create_cm("a", json!({}), json!({"k": "v"})).await?;
    s.create_cm("b", json!({}), json!({})).await?;
    let decoder = Counting::default();
    let lw = HttpListerWatcher::<ConfigMap>::namespaced(s.client.clone(), &s.ns)
        .with_decoder(decoder.clone());
    let list = lw.list(&ListParams::default()).await?;
    ensure!(
        list.items.len() == 2,
        "{}: {} items",
        s.name,
        list.items.len()
    );
    ensure!(list.items[0].data.as_ref().unwrap()["k"] == "v");
    let rv = list.metadata.resource_version.clone().unwrap_or_default();
    let mut watch = lw.watch(&WatchParams::default(), &rv).await?;
    s.create_cm("c", json!({}), json!({})).await?;
    match watch.next().await {
        Some(Ok(WatchEvent::Added(cm))) => ensure!(cm.metadata.name.as_deref() == Some("c")),
        other => anyhow::bail!("{}: expected ADDED c, got {other:?}", s.name),
    }
    Ok(decoder.protobuf_objects.load(Ordering::SeqCst))
}

#[tokio::test]
async fn embedded_server_answers_protobuf() -> Result<()> {
    // ConfigMaps are asked for as protobuf...
    ensure!(ItemDecoder::<ConfigMap>::accepts_protobuf(
        &kcache_client::Typed::new()
    ));
    // ...and the embedded server answers it: 2 listed + 1 watched, all decoded from protobuf.
    let s = TestServer::embedded().await?;
    let n = list_and_watch(&s).await?;
    ensure!(n == 3, "{n} objects came as protobuf");
    Ok(())
}

#[tokio::test]
async fn upstream_kube_apiserver_answers_protobuf() -> Result<()> {
    // Upstream-only: without the upstream server this test fails (never a silent pass),
    // unless KCACHE_UPSTREAM=skip skips it on purpose, saying so.
    let Some(s) = TestServer::upstream().await? else {
        return common::upstream_missing();
    };
    // 2 listed + 1 watched, all decoded from protobuf.
    let n = list_and_watch(&s).await?;
    ensure!(n == 3, "{n} objects came as protobuf");
    Ok(())
}
