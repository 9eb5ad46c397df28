//! Protobuf responses (`Accept: application/vnd.kubernetes.protobuf`): every built-in kind the
//! server serves answers GET, list and watch in protobuf, and what the client's decoder
//! (`kcache-proto`) makes of it is the object the JSON path gives; negotiation (fallbacks,
//! q-values, 406, custom resources in JSON), `Status` errors, list metadata, watch frames,
//! streaming lists and bookmarks.

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

#[tokio::test]
async fn every_served_built_in_kind_decodes_from_protobuf_as_from_json() {
    let s = server().await;
    for (collection, obj) in samples() {
        let r = post(s.addr(), collection, &obj).await;
        assert_eq!(
            r.status,
            201,
            "{collection}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let ns = "/api/v1/namespaces/default";
    same_as_json::<Namespace>(&s, "/api/v1/namespaces", "team-a").await;
    same_as_json::<Pod>(&s, &format!("{ns}/pods"), "p").await;
    same_as_json::<ConfigMap>(&s, &format!("{ns}/configmaps"), "cm").await;
    same_as_json::<Secret>(&s, &format!("{ns}/secrets"), "s").await;
    same_as_json::<Service>(&s, &format!("{ns}/services"), "svc").await;
    same_as_json::<Event>(&s, &format!("{ns}/events"), "e").await;
    same_as_json::<Lease>(
        &s,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        "l",
    )
    .await;
}

#[tokio::test]
async fn writes_answer_in_protobuf_too() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let body = serde_json::to_vec(&json!({"metadata": {"name": "w"}, "data": {"a": "1"}})).unwrap();
    let headers = [("accept", PB), ("content-type", "application/json")];
    let r = request(s.addr(), Method::POST, cms, &headers, Some(body))
        .await
        .unwrap();
    assert_eq!(r.status, 201);
    assert_eq!(r.header("content-type").as_deref(), Some(PB));
    let cm: ConfigMap = decode_object(envelope(&r.body)).unwrap();
    assert_eq!(cm.data.unwrap()["a"], "1");
    // A delete that is gone at once answers a success Status.
    let r = request(
        s.addr(),
        Method::DELETE,
        &format!("{cms}/w"),
        &[("accept", PB)],
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(pb::outline(&r.body), "v1/Status 0  \"\"");
}

#[tokio::test]
async fn errors_are_protobuf_status_when_protobuf_was_accepted() {
    let s = server().await;
    let path = "/api/v1/namespaces/default/pods/nope";
    let r = get_as(&s, path, PB).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type").as_deref(), Some(PB));
    let st = decode_status(envelope(&r.body)).unwrap();
    assert_eq!(st.reason.as_deref(), Some("NotFound"));
    assert_eq!(st.code, Some(404));
    assert_eq!(st.message.as_deref(), Some("pods \"nope\" not found"));
    // JSON was asked for: JSON.
    let r = get(s.addr(), path).await;
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    // Nothing acceptable: 406 in JSON.
    let r = get_as(&s, path, "application/xml").await;
    assert_eq!(r.status, 406);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
}

#[tokio::test]
async fn custom_resources_answer_json_when_allowed_and_406_otherwise() {
    let s = ApiServer::builder()
        .resource(kcache_apiserver::ResourceInfo::namespaced(
            "example.com",
            "v1",
            "widgets",
            "Widget",
        ))
        .build()
        .start()
        .await
        .unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(
        post(s.addr(), path, &json!({"metadata": {"name": "w"}}))
            .await
            .status,
        201
    );
    let r = get_as(&s, path, PB_JSON).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(r.json()["items"][0]["metadata"]["name"], "w");
    let r = get_as(&s, &format!("{path}/w"), PB).await;
    assert_eq!(r.status, 406);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    let r = get_as(&s, &format!("{path}?watch=1"), PB_WATCH).await;
    assert_eq!(r.status, 406);
}

#[tokio::test]
async fn paginated_protobuf_lists_carry_continue_and_remaining_item_count() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    for i in 0..5 {
        post(
            s.addr(),
            cms,
            &json!({"metadata": {"name": format!("c{i}")}}),
        )
        .await;
    }
    let r = get_as(&s, &format!("{cms}?limit=2"), PB).await;
    let (meta, items) = decode_list::<ConfigMap>(envelope(&r.body)).unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(meta.remaining_item_count, Some(3));
    let token = meta.continue_.expect("a continue token");
    let r = get_as(&s, &format!("{cms}?limit=2&continue={token}"), PB).await;
    let (meta, items) = decode_list::<ConfigMap>(envelope(&r.body)).unwrap();
    let names: Vec<_> = items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["c2", "c3"]);
    assert_eq!(meta.remaining_item_count, Some(1));
    // As kube-apiserver's Table negotiation: tables stay JSON.
    let r = get_as(
        &s,
        cms,
        "application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
    )
    .await;
    assert_eq!(r.json()["kind"], "Table");
}

#[tokio::test(start_paused = true)]
async fn protobuf_watch_is_length_prefixed_watch_events_with_bookmarks() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    post(
        s.addr(),
        cms,
        &json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
    )
    .await;
    // A streaming list: ADDED for what exists, then the initial-events-end bookmark.
    let path = format!(
        "{cms}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan\
         &allowWatchBookmarks=true&timeoutSeconds=1"
    );
    let mut w = common::Watch::open(s.addr(), &path, &[("accept", PB_WATCH)])
        .await
        .unwrap();
    assert_eq!(w.status, 200);
    assert_eq!(
        w.headers.get("content-type").unwrap(),
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let stream = w.collect_bytes().await;
    assert_eq!(
        pb::watch_outline(&stream),
        ["ADDED v1/ConfigMap a", "BOOKMARK v1/ConfigMap "]
    );
    // Decoded by the client's watch decoder: the bookmark carries the annotation.
    let mut dec = kcache_proto::WatchDecoder::new(1 << 20);
    dec.push(&stream);
    let mut events = Vec::new();
    while let Some(ev) = dec.next_event().unwrap() {
        events.push(ev);
    }
    assert_eq!(events.len(), 2);
    let cm: ConfigMap = decode_object(events[0].object.clone()).unwrap();
    assert_eq!(cm.data.unwrap()["k"], "v");
    let bm: ConfigMap = decode_object(events[1].object.clone()).unwrap();
    assert_eq!(
        bm.metadata.annotations.unwrap()["k8s.io/initial-events-end"],
        "true"
    );
    assert!(bm.metadata.resource_version.is_some());

    // A plain watch with the client-go Accept header: MODIFIED and DELETED frames.
    let rv = get(s.addr(), cms).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut w = common::Watch::open(
        s.addr(),
        &format!("{cms}?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
        &[("accept", PB_JSON)],
    )
    .await
    .unwrap();
    let mut a = get(s.addr(), &format!("{cms}/a")).await.json();
    a["data"]["k"] = json!("w");
    common::put(s.addr(), &format!("{cms}/a"), &a).await;
    common::delete(s.addr(), &format!("{cms}/a")).await;
    let stream = w.collect_bytes().await;
    assert_eq!(
        pb::watch_outline(&stream),
        ["MODIFIED v1/ConfigMap a", "DELETED v1/ConfigMap a"]
    );
}

#[tokio::test]
async fn a_watch_from_a_compacted_rv_is_a_protobuf_error_event() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    for i in 0..3 {
        post(
            s.addr(),
            cms,
            &json!({"metadata": {"name": format!("c{i}")}}),
        )
        .await;
    }
    s.faults().compact();
    let r = get_as(&s, &format!("{cms}?watch=1&resourceVersion=1"), PB_WATCH).await;
    assert_eq!(r.status, 200);
    let frames = pb::watch_outline(&r.body);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert!(
        frames[0].starts_with("ERROR v1/Status 410 Expired"),
        "{frames:?}"
    );
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

fn delete_options(uid: Option<&str>, dry_run: bool) -> Vec<u8> {
    use kcache_proto::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions};
    use prost::Message;
    DeleteOptions {
        preconditions: uid.map(|u| Preconditions {
            uid: Some(u.into()),
            resource_version: None,
        }),
        propagation_policy: Some("Background".into()),
        dry_run: if dry_run {
            vec!["All".into()]
        } else {
            Vec::new()
        },
        ..Default::default()
    }
    .encode_to_vec()
}

#[tokio::test]
async fn delete_takes_protobuf_delete_options() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    for name in ["a", "b", "c"] {
        let cm = json!({"metadata": {"name": name, "labels": {"x": "y"}}});
        assert_eq!(post(s.addr(), cms, &cm).await.status, 201);
    }
    // client-go writes DeleteOptions with the meta.k8s.io/v1 type (older ones: v1).
    let body = pb_body(
        "meta.k8s.io/v1",
        "DeleteOptions",
        delete_options(None, true),
    );
    let r = request(
        s.addr(),
        Method::DELETE,
        &format!("{cms}/a"),
        &pb_headers(),
        Some(body),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        get(s.addr(), &format!("{cms}/a")).await.status,
        200,
        "dry run kept it"
    );
    let body = pb_body(
        "v1",
        "DeleteOptions",
        delete_options(Some("not-the-uid"), false),
    );
    let r = request(
        s.addr(),
        Method::DELETE,
        &format!("{cms}/a"),
        &pb_headers(),
        Some(body),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 409, "the precondition is read");
    let body = pb_body(
        "meta.k8s.io/v1",
        "DeleteOptions",
        delete_options(None, false),
    );
    let r = request(
        s.addr(),
        Method::DELETE,
        &format!("{cms}/a"),
        &pb_headers(),
        Some(body),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(get(s.addr(), &format!("{cms}/a")).await.status, 404);
    // deletecollection with a protobuf DeleteOptions (dry run: nothing goes).
    let body = pb_body(
        "meta.k8s.io/v1",
        "DeleteOptions",
        delete_options(None, true),
    );
    let r = request(
        s.addr(),
        Method::DELETE,
        &format!("{cms}?labelSelector=x%3Dy"),
        &pb_headers(),
        Some(body),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(get(s.addr(), &format!("{cms}/b")).await.status, 200);
}

fn scale_pb(name: &str, replicas: i32, rv: Option<&str>) -> Vec<u8> {
    // autoscaling/v1 Scale: metadata = 1, spec = 2 { replicas = 1 }.
    use kcache_proto::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use prost::Message;
    let meta = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        resource_version: rv.map(str::to_owned),
        ..Default::default()
    }
    .encode_to_vec();
    let mut spec = vec![0x08];
    prost::encoding::encode_varint(u64::try_from(replicas).unwrap(), &mut spec);
    let mut raw = Vec::new();
    prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut raw);
    prost::encoding::encode_varint(meta.len() as u64, &mut raw);
    raw.extend(meta);
    prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, &mut raw);
    prost::encoding::encode_varint(spec.len() as u64, &mut raw);
    raw.extend(spec);
    pb_body("autoscaling/v1", "Scale", raw)
}

#[tokio::test]
async fn scale_takes_a_protobuf_scale_and_an_apply_patch() {
    let s = server().await;
    let deploys = "/apis/apps/v1/namespaces/default/deployments";
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                   "spec": {"selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    assert_eq!(post(s.addr(), deploys, &d).await.status, 201);
    let r = request(
        s.addr(),
        Method::PUT,
        &format!("{deploys}/web/scale"),
        &pb_headers(),
        Some(scale_pb("web", 3, None)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let d = get(s.addr(), &format!("{deploys}/web")).await.json();
    assert_eq!(d["spec"]["replicas"], 3);
    let apply = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                       "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 5}});
    let r = request(
        s.addr(),
        Method::PATCH,
        &format!("{deploys}/web/scale?fieldManager=test"),
        &[("content-type", "application/apply-patch+yaml")],
        Some(serde_json::to_vec(&apply).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["replicas"], 5);
    let d = get(s.addr(), &format!("{deploys}/web")).await.json();
    assert_eq!(d["spec"]["replicas"], 5);
}

#[tokio::test]
async fn eviction_takes_a_protobuf_eviction() {
    use kcache_proto::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use prost::Message;
    let s = server().await;
    let pods = "/api/v1/namespaces/default/pods";
    let p =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(post(s.addr(), pods, &p).await.status, 201);
    let meta = ObjectMeta {
        name: Some("p".into()),
        ..Default::default()
    }
    .encode_to_vec();
    let opts = delete_options(None, false);
    let mut raw = Vec::new();
    for (tag, bytes) in [(1, meta), (2, opts)] {
        prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut raw);
        prost::encoding::encode_varint(bytes.len() as u64, &mut raw);
        raw.extend(bytes);
    }
    let r = request(
        s.addr(),
        Method::POST,
        &format!("{pods}/p/eviction"),
        &pb_headers(),
        Some(pb_body("policy/v1", "Eviction", raw)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(get(s.addr(), &format!("{pods}/p")).await.status, 404);
}

/// A length-delimited field.
fn pb_field(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn pb_meta(name: &str) -> Vec<u8> {
    use kcache_proto::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use prost::Message;
    ObjectMeta {
        name: Some(name.into()),
        labels: [("app".to_owned(), "web".to_owned())].into(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// A protobuf body, a JSON answer.
fn pb_in_json_out() -> [(&'static str, &'static str); 2] {
    [
        ("content-type", "application/vnd.kubernetes.protobuf"),
        ("accept", "application/json"),
    ]
}

#[tokio::test]
async fn kinds_outside_kcache_proto_take_protobuf_bodies_by_schema() {
    let s = server().await;
    // rbac.authorization.k8s.io/v1 ClusterRole: metadata = 1, rules = 2 (PolicyRule: verbs = 1,
    // apiGroups = 2, resources = 3).
    let mut rule = Vec::new();
    pb_field(1, b"get", &mut rule);
    pb_field(1, b"list", &mut rule);
    pb_field(2, b"", &mut rule);
    pb_field(3, b"pods", &mut rule);
    let mut raw = Vec::new();
    pb_field(1, &pb_meta("reader"), &mut raw);
    pb_field(2, &rule, &mut raw);
    let r = request(
        s.addr(),
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &pb_in_json_out(),
        Some(pb_body("rbac.authorization.k8s.io/v1", "ClusterRole", raw)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let role = r.json();
    assert_eq!(role["metadata"]["labels"]["app"], "web");
    assert_eq!(
        role["rules"],
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
    );
    // policy/v1 PodDisruptionBudget: spec = 2 (minAvailable = 1 IntOrString, selector = 2).
    let mut int_or_string = Vec::new();
    pb_field(3, b"50%", &mut int_or_string);
    int_or_string.splice(0..0, [0x08, 0x01]); // type = 1 (string)
    let mut selector = Vec::new();
    let mut entry = Vec::new();
    pb_field(1, b"app", &mut entry);
    pb_field(2, b"web", &mut entry);
    pb_field(1, &entry, &mut selector);
    let mut spec = Vec::new();
    pb_field(1, &int_or_string, &mut spec);
    pb_field(2, &selector, &mut spec);
    let mut raw = Vec::new();
    pb_field(1, &pb_meta("budget"), &mut raw);
    pb_field(2, &spec, &mut raw);
    let r = request(
        s.addr(),
        Method::POST,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        &pb_in_json_out(),
        Some(pb_body("policy/v1", "PodDisruptionBudget", raw)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let pdb = r.json();
    assert_eq!(pdb["spec"]["minAvailable"], "50%");
    assert_eq!(
        pdb["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    // A kind nothing knows is still 415.
    let r = request(
        s.addr(),
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &pb_in_json_out(),
        Some(pb_body("example.com/v1", "Widget", Vec::new())),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 415);
}

#[tokio::test]
async fn kinds_outside_kcache_proto_answer_protobuf_by_schema() {
    let s = server().await;
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "reader", "labels": {"a": "b"}},
                      "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]});
    assert_eq!(post(s.addr(), roles, &role).await.status, 201);
    let r = get_as(
        &s,
        &format!("{roles}/reader"),
        "application/vnd.kubernetes.protobuf",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );
    let env = envelope(&r.body);
    assert_eq!(
        (env.api_version.as_str(), env.kind.as_str()),
        ("rbac.authorization.k8s.io/v1", "ClusterRole")
    );
    let list = get_as(&s, roles, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(envelope(&list.body).kind, "ClusterRoleList");
    // What the server wrote in protobuf, sent back, is the same object.
    let sent_back = r.body.to_vec();
    assert_eq!(
        delete(s.addr(), &format!("{roles}/reader")).await.status,
        200
    );
    let r = request(
        s.addr(),
        Method::POST,
        roles,
        &pb_in_json_out(),
        Some(sent_back),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let back = r.json();
    assert_eq!(back["rules"], role["rules"]);
    assert_eq!(back["metadata"]["labels"], role["metadata"]["labels"]);
}
