//! The garbage collector over HTTP: background, foreground and orphan propagation, dangling
//! and mismatched owner references, namespaced vs cluster-scoped owners, the kinds' default
//! policies, and the server with the collector turned off (envtest's behaviour).
//!
//! A bare kube-apiserver has no garbage collector (kube-controller-manager runs it), so there is
//! no upstream answer to compare with: these tests check the documented semantics of
//! kube-controller-manager's collector ("Garbage Collection" and "Owners and Dependents" in the
//! Kubernetes documentation). The apiserver side that upstream does answer — the finalizers a
//! DELETE adds and the DeleteOptions checks — is a differential scenario in kcache-conformance
//! (`deletion_propagation`).

#[path = "../common/mod.rs"]
mod common;
mod edges;
mod policies;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Resp, get, post, request};
use http::Method;
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

/// A server with the collector on (the default).
async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

/// An owner reference to `owner` (an object as the server answered it).
fn owner_ref(owner: &Value, block: bool) -> Value {
    json!({
        "apiVersion": owner["apiVersion"], "kind": owner["kind"],
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": block,
    })
}

/// A ConfigMap named `name` with these owner references (and finalizers).
fn config_map(name: &str, owners: &[Value], finalizers: &[&str]) -> Value {
    let mut meta = json!({"name": name});
    if !owners.is_empty() {
        meta["ownerReferences"] = json!(owners);
    }
    if !finalizers.is_empty() {
        meta["finalizers"] = json!(finalizers);
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})
}

/// Creates `body` in `collection`; the created object.
async fn create(addr: SocketAddr, collection: &str, body: &Value) -> Value {
    let r = post(addr, collection, body).await;
    assert_eq!(r.status, 201, "create in {collection}: {}", r.json());
    r.json()
}

/// DELETE with DeleteOptions `opts` as the body.
async fn delete_with(addr: SocketAddr, path: &str, opts: &Value) -> Resp {
    request(
        addr,
        Method::DELETE,
        path,
        &[("content-type", "application/json")],
        Some(serde_json::to_vec(opts).expect("options encode")),
    )
    .await
    .expect("DELETE")
}

/// Waits until GET `path` answers 404 (the object is gone); fails after 10 s.
async fn gone(addr: SocketAddr, path: &str) {
    for _ in 0..200 {
        if get(addr, path).await.status == 404 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path} was not deleted: {}", get(addr, path).await.json());
}

/// Waits until `f` holds of the object at `path`; fails after 10 s. The last answer.
async fn until(addr: SocketAddr, path: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let r = get(addr, path).await;
        if r.status == 200 && f(&r.json()) {
            return r.json();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path}: never {what}: {}", get(addr, path).await.json());
}

/// Proves that the collector has run a full pass after this call: a ConfigMap with a dangling
/// owner reference is created and must be collected (a pass looks at every object, so
/// anything left alone by then was judged and kept).
async fn collector_has_run(addr: SocketAddr) {
    let missing = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "nobody",
                         "uid": "00000000-0000-0000-0000-00000000dead"});
    let name = format!("sentinel-{}", rand_suffix());
    create(addr, CMS, &config_map(&name, &[missing], &[])).await;
    gone(addr, &format!("{CMS}/{name}")).await;
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// The object at `path` (it must exist).
async fn must_get(addr: SocketAddr, path: &str) -> Value {
    let r = get(addr, path).await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.json());
    r.json()
}
