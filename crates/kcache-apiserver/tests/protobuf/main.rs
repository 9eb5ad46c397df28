//! Protobuf responses (`Accept: application/vnd.kubernetes.protobuf`): every built-in kind the
//! server serves answers GET, list and watch in protobuf, and what the client's decoder
//! (`kcache-proto`) makes of it is the object the JSON path gives; negotiation (fallbacks,
//! q-values, 406, custom resources in JSON), `Status` errors, list metadata, watch frames,
//! streaming lists and bookmarks.

#[path = "../common/mod.rs"]
mod common;

use bytes::Bytes;
use common::{delete, get, pb, post, request};
use http::Method;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, Secret, Service};
use k8s_openapi::serde::de::DeserializeOwned;
use kcache_apiserver::{ApiServer, RunningServer};
use kcache_proto::{Envelope, decode_list, decode_object, decode_status};
use serde_json::{Value, json};

const PB: &str = "application/vnd.kubernetes.protobuf";
const PB_JSON: &str = "application/vnd.kubernetes.protobuf, application/json";
const PB_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

async fn get_as(s: &RunningServer, path: &str, accept: &str) -> common::Resp {
    request(s.addr(), Method::GET, path, &[("accept", accept)], None)
        .await
        .expect("GET")
}

fn envelope(body: &Bytes) -> Envelope {
    Envelope::decode(body.clone()).expect("a k8s\\0 envelope")
}

/// One object of each served built-in kind: (collection path, object).
fn samples() -> Vec<(&'static str, Value)> {
    vec![
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "labels": {"t": "a"}}}),
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "ports": [{"containerPort": 80}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}),
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm"}, "data": {"k": "v"}, "binaryData": {"b": "AAEC"}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "data": {"k": "dmFsdWU="}, "type": "Opaque"}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "svc"}, "spec": {"selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": "http"}]}}),
        ),
        (
            "/api/v1/namespaces/default/events",
            json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p",
            "namespace": "default"}, "reason": "Started", "message": "m", "type": "Normal",
            "count": 2, "firstTimestamp": "2026-01-02T03:04:05Z"}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                     "renewTime": "2026-01-02T03:04:05.123456Z"}}),
        ),
    ]
}

/// GET and list of `path` in protobuf decode to what the JSON answers say.
async fn same_as_json<K>(s: &RunningServer, collection: &str, name: &str)
where
    K: DeserializeOwned + PartialEq + std::fmt::Debug + 'static,
{
    let path = format!("{collection}/{name}");
    let json = get(s.addr(), &path).await;
    assert_eq!(json.status, 200, "{path}");
    let from_json: K = serde_json::from_slice(&json.body).unwrap();
    let r = get_as(s, &path, PB).await;
    assert_eq!(r.status, 200, "{path}");
    assert_eq!(r.header("content-type").as_deref(), Some(PB), "{path}");
    let from_pb: K = decode_object(envelope(&r.body)).unwrap();
    assert_eq!(from_pb, from_json, "{path}");
    assert!(
        r.body.len() < json.body.len(),
        "{path}: protobuf {} bytes vs JSON {}",
        r.body.len(),
        json.body.len()
    );

    let list_json: Value = get(s.addr(), collection).await.json();
    let r = get_as(s, collection, PB_JSON).await;
    assert_eq!(
        r.header("content-type").as_deref(),
        Some(PB),
        "{collection}"
    );
    let (meta, items) = decode_list::<K>(envelope(&r.body)).unwrap();
    assert_eq!(
        meta.resource_version.as_deref(),
        list_json["metadata"]["resourceVersion"].as_str()
    );
    let expected: Vec<K> = serde_json::from_value(list_json["items"].clone()).unwrap();
    assert_eq!(items, expected, "{collection}");
}

/// A protobuf body in the `k8s\0` envelope, as client-go's protobuf serializer writes it.
fn pb_body(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    Envelope {
        api_version: api_version.into(),
        kind: kind.into(),
        raw: Bytes::from(raw),
        content_type: String::new(),
    }
    .encode_to_bytes()
    .to_vec()
}

fn pb_headers() -> [(&'static str, &'static str); 2] {
    [
        ("content-type", "application/vnd.kubernetes.protobuf"),
        (
            "accept",
            "application/vnd.kubernetes.protobuf, application/json",
        ),
    ]
}

mod bodies;
mod responses;
mod schema_kinds;
