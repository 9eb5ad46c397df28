//! Protobuf request bodies: delete options, scale and eviction.

use super::*;

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
