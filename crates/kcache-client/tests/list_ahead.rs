//! The next page is asked for while a page arrives: kube-apiserver sends a list's metadata
//! (its `continue` token) before its items, and kcache-client tells the token to the
//! reflector's pager as soon as it has read it. The fake server here holds the second half of
//! the first page until the second page is asked for: a client that waits for the first page
//! to end before asking for the next would wait forever. JSON and protobuf.
//!
//! Also here, on the same server: where a list's items are decoded (on the runtime's own
//! threads, where the watch events that replace them are decoded too).

use std::{
    collections::{HashMap, HashSet},
    convert::Infallible,
    sync::{Arc, Mutex},
    thread::ThreadId,
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Query, State},
    http::{
        HeaderMap,
        header::{ACCEPT, CONTENT_TYPE},
    },
    response::{IntoResponse, Response},
    routing::get,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kcache::{
    InformerFrom, ListerWatcher, SharedInformerFactory, factory, informer,
    lister_watcher::ListParams, reflector,
};
use kcache_client::{Client, Compact, HttpListerWatcher, decode::ItemDecoder};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const PER_PAGE: usize = 40;

/// Pod `i`, about 2 KB of JSON.
fn pod(i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i:03}"),
            "namespace": "ns",
            "uid": format!("00000000-0000-0000-0000-{i:012}"),
            "resourceVersion": "10",
            "annotations": {"filler": "x".repeat(2000)},
        },
        "spec": {"containers": [{"name": "c", "image": "img"}]},
    })
}

/// A length-delimited protobuf field.
fn field(number: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 6);
    kcache_proto::varint::put(&mut out, u64::from(number << 3 | 2));
    kcache_proto::varint::put(&mut out, body.len() as u64);
    out.extend_from_slice(body);
    out
}

/// Page 1 or 2 of the list, in the format asked for.
fn page(second: bool, protobuf: bool) -> Vec<u8> {
    let first = if second { PER_PAGE } else { 0 };
    let metadata = if second {
        json!({"resourceVersion": "10"})
    } else {
        json!({"resourceVersion": "10", "continue": "page-2"})
    };
    if !protobuf {
        // As kube-apiserver writes it: the metadata before the items.
        let items: Vec<String> = (first..first + PER_PAGE)
            .map(|i| pod(i).to_string())
            .collect();
        return format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{metadata},"items":[{}]}}"#,
            items.join(",")
        )
        .into_bytes();
    }
    // `PodList { metadata = 1 (ListMeta { resourceVersion = 2; continue = 3 }); items = 2 }`.
    let mut meta = field(2, b"10");
    if !second {
        meta.extend(field(3, b"page-2"));
    }
    let mut raw = field(1, &meta);
    for i in first..first + PER_PAGE {
        raw.extend(field(
            2,
            &kcache_proto::encode_json("v1", "Pod", &pod(i)).unwrap(),
        ));
    }
    kcache_proto::Envelope {
        api_version: "v1".into(),
        kind: "PodList".into(),
        raw: raw.into(),
        content_type: String::new(),
    }
    .encode_to_bytes()
    .to_vec()
}

/// Rings when the second page is asked for.
#[derive(Clone, Default)]
struct Asked(Arc<Notify>);

/// The pods endpoint: page 1 sends its first half, then waits for page 2 to be asked for;
/// page 2 whole; a watch answers with headers and stays silent.
async fn pods(
    State(asked): State<Asked>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
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
    } else if q.get("continue").map(String::as_str) == Some("page-2") {
        asked.0.notify_one();
        Body::from(page(true, protobuf))
    } else {
        let mut first = page(false, protobuf);
        let rest = first.split_off(first.len() / 2);
        let held = async move {
            asked.0.notified().await;
            Ok::<_, Infallible>(Bytes::from(rest))
        };
        Body::from_stream(
            futures::stream::once(async move { Ok(Bytes::from(first)) })
                .chain(futures::stream::once(held)),
        )
    };
    ([(CONTENT_TYPE, content_type)], body).into_response()
}

async fn serve() -> String {
    let app = Router::new()
        .route("/api/v1/namespaces/ns/pods", get(pods))
        .with_state(Asked::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The lister-watcher tells page 1's token while page 1 is held half-sent; page 1 then ends
/// once page 2 has been asked for, whole.
#[tokio::test]
async fn the_continue_token_is_told_before_the_page_ends() {
    let url = serve().await;
    for protobuf in [false, true] {
        let client = Client::from_url(&url).unwrap();
        let lw = HttpListerWatcher::<Pod>::namespaced(client, "ns").protobuf(protobuf);
        let first = ListParams {
            limit: Some(PER_PAGE as u32),
            ..ListParams::default()
        };
        let (tx, rx) = oneshot::channel();
        let page_1 = tokio::spawn({
            let lw = lw.clone();
            async move { lw.list_telling_continue(&first, tx).await }
        });
        let told = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .unwrap_or_else(|_| panic!("protobuf {protobuf}: no token while page 1 was held"))
            .expect("the token is told, not dropped");
        assert_eq!(told, "page-2", "protobuf {protobuf}");
        assert!(!page_1.is_finished(), "page 1 is still held");
        let second = ListParams {
            limit: Some(PER_PAGE as u32),
            continue_token: Some(told),
            ..ListParams::default()
        };
        let page_2 = lw.list(&second).await.expect("page 2");
        let page_1 = page_1.await.unwrap().expect("page 1");
        assert_eq!(page_1.items.len(), PER_PAGE, "protobuf {protobuf}");
        assert_eq!(page_1.metadata.continue_.as_deref(), Some("page-2"));
        assert_eq!(page_2.items.len(), PER_PAGE);
        assert_eq!(page_2.metadata.continue_, None);
    }
}

/// An informer syncs from this server: its reflector asks for page 2 while page 1 arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_syncs_from_a_server_that_holds_a_page_until_the_next_is_asked_for() {
    let url = serve().await;
    for protobuf in [false, true] {
        let client = Client::from_url(&url).unwrap();
        let reflector = reflector::Config::default()
            .initial_list(kcache::reflector::InitialList::List)
            .page_size(PER_PAGE as u32);
        let factory = SharedInformerFactory::new(
            factory::Config::default()
                .namespace("ns")
                .informer_config(informer::Config::default().reflector(reflector)),
        );
        let lw = <Client as factory::Source<Pod>>::lister_watcher(&client, Some("ns"))
            .protobuf(protobuf);
        let informer = factory.informer::<Compact<Pod>>(&|_: Option<&str>| lw.clone());
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        tokio::time::timeout(Duration::from_secs(60), informer.wait_for_sync())
            .await
            .unwrap_or_else(|_| panic!("protobuf {protobuf}: the informer did not sync in 60 s"));
        assert_eq!(
            informer.indexer().len(),
            2 * PER_PAGE,
            "protobuf {protobuf}"
        );
        cancel.cancel();
        let _ = run.await;
    }
}

/// Decodes typed pods and records the threads it ran on.
#[derive(Clone, Default)]
struct Threads(Arc<Mutex<HashSet<ThreadId>>>);

impl ItemDecoder<Pod> for Threads {
    fn decode_item<'de, D: Deserializer<'de>>(&self, deserializer: D) -> Result<Pod, D::Error> {
        self.0.lock().unwrap().insert(std::thread::current().id());
        Pod::deserialize(deserializer)
    }
}

/// A list's items are decoded on the task that reads the body — here the one thread of a
/// current-thread runtime — not on a thread of their own: with glibc, objects allocated on a
/// thread the watch events are not decoded on left every later update taking fresh memory
/// (BENCHMARKS.md, "Measurements behind the code", 2026-12-05).
#[tokio::test]
async fn list_items_are_decoded_on_the_runtime_threads() {
    let url = serve().await;
    let client = Client::from_url(&url).unwrap();
    let threads = Threads::default();
    let lw = HttpListerWatcher::<Pod>::namespaced(client, "ns")
        .protobuf(false)
        .with_decoder(threads.clone());
    let page_2 = ListParams {
        limit: Some(PER_PAGE as u32),
        continue_token: Some("page-2".into()),
        ..ListParams::default()
    };
    let list = lw.list(&page_2).await.expect("page 2");
    assert_eq!(list.items.len(), PER_PAGE);
    let seen = threads.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        HashSet::from([std::thread::current().id()]),
        "decoded on other threads than the runtime's one"
    );
}
