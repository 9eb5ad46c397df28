//! A list is stored while it arrives: the default informer syncs from one list body
//! of 3,000 pods — JSON, then protobuf — and the heap never holds that body whole. The peak
//! heap during the sync must stay within 1.2× of what the synced cache holds; collecting the
//! body before decoding it would need about 2× (the body plus the objects made from it).
//!
//! The fake server makes the body lazily, one pod at a time, so that the server's own memory
//! does not count; its watch answers with headers and then stays silent. The two formats run
//! one after the other in one test, so that nothing else allocates meanwhile.

#[global_allocator]
static ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

use std::{collections::HashMap, convert::Infallible, time::Duration};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::Query,
    http::{
        HeaderMap,
        header::{ACCEPT, CONTENT_TYPE},
    },
    response::{IntoResponse, Response},
    routing::get,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kcache::{InformerFrom, SharedInformerFactory, factory, informer, reflector};
use kcache_client::{Client, Compact};
use kcache_proto::varint;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const PODS: usize = 3_000;
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Pod `i`, about 2.5 KB of JSON.
fn pod(i: usize) -> Value {
    let filler: String = format!("{i:08}-").repeat(160);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i}"),
            "namespace": "ns",
            "uid": format!("00000000-0000-0000-0000-{i:012}"),
            "resourceVersion": format!("{}", 100 + i),
            "labels": {"app": "peak", "n": format!("{}", i % 10)},
            "annotations": {"filler": filler},
        },
        "spec": {"containers": [{"name": "c", "image": format!("registry.example/img:{i}")}]},
        "status": {"phase": "Running"},
    })
}

/// A length-delimited protobuf field header.
fn header(field: u32, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(6);
    varint::put(&mut out, u64::from(field << 3 | 2));
    varint::put(&mut out, len as u64);
    out
}

fn pod_proto(i: usize) -> Vec<u8> {
    let item = kcache_proto::encode_json("v1", "Pod", &pod(i)).expect("a Pod encodes");
    let mut out = header(2, item.len());
    out.extend_from_slice(&item);
    out
}

/// The list body, made one pod at a time.
fn list_body(protobuf: bool) -> Body {
    let (head, tail) = if protobuf {
        // `k8s\0` + runtime.Unknown{typeMeta, raw = PodList{metadata, items}, "", ""}.
        let mut list_meta = header(2, 2);
        list_meta.extend_from_slice(b"10");
        let mut meta = header(1, list_meta.len());
        meta.extend_from_slice(&list_meta);
        let items: usize = (0..PODS).map(|i| pod_proto(i).len()).sum();
        let mut type_meta = header(1, 2);
        type_meta.extend_from_slice(b"v1");
        type_meta.extend(header(2, 7));
        type_meta.extend_from_slice(b"PodList");
        let mut head = b"k8s\0".to_vec();
        head.extend(header(1, type_meta.len()));
        head.extend(type_meta);
        head.extend(header(2, meta.len() + items));
        head.extend(meta);
        (head, vec![0x1a, 0, 0x22, 0])
    } else {
        let head =
            br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":["#;
        (head.to_vec(), b"]}".to_vec())
    };
    let items = futures::stream::iter(0..PODS).map(move |i| {
        let bytes = if protobuf {
            pod_proto(i)
        } else {
            let mut b = if i == 0 { Vec::new() } else { b",".to_vec() };
            b.extend(serde_json::to_vec(&pod(i)).unwrap());
            b
        };
        Ok::<_, Infallible>(Bytes::from(bytes))
    });
    let chunks = futures::stream::once(async move { Ok(Bytes::from(head)) })
        .chain(items)
        .chain(futures::stream::once(async move { Ok(Bytes::from(tail)) }));
    Body::from_stream(chunks)
}

/// The pods endpoint: a list in the format the request accepts, or a silent watch.
async fn pods(Query(q): Query<HashMap<String, String>>, headers: HeaderMap) -> Response {
    let protobuf = headers
        .get(ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.starts_with(PROTOBUF));
    let content_type = if protobuf {
        PROTOBUF
    } else {
        "application/json"
    };
    let body = if q.get("watch").map(String::as_str) == Some("true") {
        Body::from_stream(futures::stream::pending::<Result<Bytes, Infallible>>())
    } else {
        list_body(protobuf)
    };
    ([(CONTENT_TYPE, content_type)], body).into_response()
}

/// Heap bytes after sync and peak heap bytes during it, above the heap before it.
async fn sync_once(url: &str, protobuf: bool) -> (usize, usize) {
    let client = Client::from_url(url).unwrap();
    let reflector = reflector::Config::default().initial_list(kcache::reflector::InitialList::List);
    let factory = SharedInformerFactory::new(
        factory::Config::default()
            .namespace("ns")
            .informer_config(informer::Config::default().reflector(reflector)),
    );
    let lw =
        <Client as factory::Source<Pod>>::lister_watcher(&client, Some("ns")).protobuf(protobuf);
    let baseline = ALLOC.current_usage();
    ALLOC.reset_peak_usage();
    let informer = factory.informer::<Compact<Pod>>(&|_: Option<&str>| lw.clone());
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    tokio::time::timeout(Duration::from_secs(120), informer.wait_for_sync())
        .await
        .expect("the informer syncs within 120 s");
    assert_eq!(informer.indexer().len(), PODS);
    let held = ALLOC.current_usage().saturating_sub(baseline);
    let peak = ALLOC.peak_usage().saturating_sub(baseline);
    cancel.cancel();
    let _ = run.await;
    drop(informer);
    drop(factory);
    (held, peak)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_is_stored_while_it_arrives_without_holding_the_body() {
    let app = Router::new().route("/api/v1/namespaces/ns/pods", get(pods));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let body_bytes = |protobuf: bool| -> usize {
        if protobuf {
            (0..PODS).map(|i| pod_proto(i).len()).sum()
        } else {
            (0..PODS)
                .map(|i| serde_json::to_vec(&pod(i)).unwrap().len() + 1)
                .sum()
        }
    };
    for protobuf in [false, true] {
        let body = body_bytes(protobuf);
        let (held, peak) = sync_once(&url, protobuf).await;
        let format = if protobuf { "protobuf" } else { "JSON" };
        eprintln!(
            "{format}: body {:.1} MB, cache after sync {:.1} MB, peak during sync {:.1} MB \
             ({:.2}×)",
            body as f64 / 1e6,
            held as f64 / 1e6,
            peak as f64 / 1e6,
            peak as f64 / held as f64
        );
        // The cache holds each object's wire bytes: at least the body.
        assert!(
            held >= body,
            "{format}: the cache holds {held} B, less than the body's {body} B"
        );
        assert!(
            peak as f64 <= 1.2 * held as f64,
            "{format}: the peak heap during sync ({peak} B) is over 1.2× the synced cache \
             ({held} B); the body ({body} B) was held"
        );
    }
}
