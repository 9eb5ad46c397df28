//! The wire-format switch of [`HttpListerWatcher::protobuf`]: with `protobuf(false)` a built-in
//! kind is listed and watched as JSON only; by default (feature `protobuf`) it asks for
//! protobuf. The fake server records every request's `Accept` header and always answers JSON,
//! on a real socket.

use std::sync::{Arc, Mutex};

use anyhow::{Result, ensure};
use axum::{
    Router,
    body::Body,
    extract::{RawQuery, State},
    http::HeaderMap,
    response::Response,
    routing::get,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kcache::{
    ListerWatcher,
    lister_watcher::{ListParams, WatchParams},
};
use kcache_client::{Client, HttpListerWatcher};
use kube_core::WatchEvent;
use serde_json::json;

type Accepts = Arc<Mutex<Vec<String>>>;

/// Records the `Accept` header; answers a one-pod JSON list, or one ADDED JSON watch event.
async fn pods(
    State(accepts): State<Accepts>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("<none>")
        .to_owned();
    accepts.lock().unwrap().push(accept);
    let pod = json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "json-pod", "namespace": "wire", "resourceVersion": "10"}});
    let body = if query.unwrap_or_default().contains("watch=") {
        json!({"type": "ADDED", "object": pod}).to_string() + "\n"
    } else {
        json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
               "items": [pod]})
        .to_string()
    };
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap()
}

/// Starts the fake server on 127.0.0.1:0; returns a client for it and the recorded Accepts.
async fn fake_server() -> Result<(Client, Accepts)> {
    let accepts = Accepts::default();
    let app = Router::new()
        .route("/api/v1/namespaces/wire/pods", get(pods))
        .with_state(accepts.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((Client::from_url(&format!("http://{addr}"))?, accepts))
}

/// Lists, then watches until the first event; returns the names seen.
async fn list_and_watch<K, L>(lw: &L, name: impl Fn(&K) -> Option<String>) -> Result<Vec<String>>
where
    K: Clone + Send + 'static,
    L: ListerWatcher<K>,
{
    let list = lw.list(&ListParams::default()).await?;
    let mut names: Vec<String> = list.items.iter().filter_map(&name).collect();
    let mut watch = lw.watch(&WatchParams::default(), "9").await?;
    match watch.next().await {
        Some(Ok(WatchEvent::Added(obj))) => names.extend(name(&obj)),
        other => anyhow::bail!(
            "expected one ADDED event, got {:?}",
            other.map(|r| r.is_ok())
        ),
    }
    Ok(names)
}

#[tokio::test]
async fn protobuf_false_lists_and_watches_a_built_in_kind_as_json_only() -> Result<()> {
    let (client, accepts) = fake_server().await?;
    let lw = HttpListerWatcher::<Pod>::namespaced(client, "wire").protobuf(false);
    ensure!(!lw.asks_for_protobuf());
    let names = list_and_watch(&lw, |p: &Pod| p.metadata.name.clone()).await?;
    ensure!(names == ["json-pod", "json-pod"], "{names:?}");
    let accepts = accepts.lock().unwrap().clone();
    ensure!(
        accepts == ["application/json", "application/json"],
        "one list and one watch, each asking for JSON only: {accepts:?}"
    );
    Ok(())
}

#[tokio::test]
async fn protobuf_false_survives_a_change_of_decoder() -> Result<()> {
    let (client, accepts) = fake_server().await?;
    let lw = HttpListerWatcher::<Pod>::namespaced(client, "wire")
        .protobuf(false)
        .with_decoder(kcache_client::Typed::new().strip_managed_fields(true));
    ensure!(!lw.asks_for_protobuf());
    let lw = lw.clone();
    list_and_watch(&lw, |p: &Pod| p.metadata.name.clone()).await?;
    let accepts = accepts.lock().unwrap().clone();
    ensure!(
        accepts.iter().all(|a| a == "application/json") && accepts.len() == 2,
        "{accepts:?}"
    );
    Ok(())
}

#[cfg(feature = "protobuf")]
#[tokio::test]
async fn protobuf_is_asked_for_a_built_in_kind_by_default() -> Result<()> {
    let (client, accepts) = fake_server().await?;
    let lw = HttpListerWatcher::<Pod>::namespaced(client, "wire");
    ensure!(lw.asks_for_protobuf());
    // The server answers JSON anyway: the lister-watcher decodes it as JSON.
    let names = list_and_watch(&lw, |p: &Pod| p.metadata.name.clone()).await?;
    ensure!(names == ["json-pod", "json-pod"], "{names:?}");
    let accepts = accepts.lock().unwrap().clone();
    ensure!(
        accepts
            == [
                kcache_client::protobuf::ACCEPT_LIST,
                kcache_client::protobuf::ACCEPT_WATCH
            ],
        "{accepts:?}"
    );
    Ok(())
}

#[cfg(feature = "protobuf")]
#[tokio::test]
async fn protobuf_true_keeps_metadata_only_requests_on_json() -> Result<()> {
    let (client, accepts) = fake_server().await?;
    let lw = HttpListerWatcher::<kube_core::PartialObjectMeta<Pod>>::namespaced(client, "wire")
        .protobuf(true);
    ensure!(!lw.asks_for_protobuf());
    list_and_watch(&lw, |p: &kube_core::PartialObjectMeta<Pod>| {
        p.metadata.name.clone()
    })
    .await?;
    let accepts = accepts.lock().unwrap().clone();
    ensure!(
        accepts
            == [
                kcache_client::lister_watcher::ACCEPT_METADATA_LIST,
                kcache_client::lister_watcher::ACCEPT_METADATA
            ],
        "{accepts:?}"
    );
    Ok(())
}
