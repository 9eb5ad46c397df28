//! Kinds outside kcache-proto: protobuf bodies taken and answered by the recorded schema.

use super::*;

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
