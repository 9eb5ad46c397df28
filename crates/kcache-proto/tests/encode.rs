//! The encoder (JSON / k8s-openapi → protobuf) against kube-apiserver's own bytes: every object
//! recorded in protobuf (`testdata/kube-apiserver-v1.36/protobuf.json`), turned into JSON and
//! encoded again, decodes to the same object; the encoded `Status` too. And a sample of every
//! kind with a generated type goes JSON → protobuf → JSON unchanged.

mod support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kcache_proto::{
    EncodeError, Envelope, decode_list, decode_object, decode_status, encode_json,
    encode_status_json,
};
use serde_json::{Value, json};
use support::protobuf_fixture::{body, fixture, step};

fn reencode_pod(pod: &Pod) -> Pod {
    let v = serde_json::to_value(pod).unwrap();
    let raw = encode_json("v1", "Pod", &v).unwrap();
    let env = Envelope {
        api_version: "v1".into(),
        kind: "Pod".into(),
        raw: raw.into(),
        content_type: String::new(),
    };
    decode_object(Envelope::decode(env.encode_to_bytes()).unwrap()).unwrap()
}

#[test]
fn recorded_pods_reencode_to_the_same_objects() {
    let f = fixture();
    let pod: Pod =
        decode_object(Envelope::decode(body(step(&f, "get one pod as protobuf"))).unwrap())
            .unwrap();
    assert!(pod.metadata.managed_fields.is_some(), "a realistic pod");
    assert_eq!(reencode_pod(&pod), pod);
    let list =
        decode_list::<Pod>(Envelope::decode(body(step(&f, "list 3 pods as protobuf"))).unwrap())
            .unwrap();
    assert_eq!(list.1.len(), 3);
    for p in &list.1 {
        assert_eq!(&reencode_pod(p), p);
    }
}

#[test]
fn recorded_status_reencodes_to_the_same_status() {
    let f = fixture();
    let status =
        decode_status(Envelope::decode(body(step(&f, "404 with protobuf Accept"))).unwrap())
            .unwrap();
    let raw = encode_status_json(&serde_json::to_value(&status).unwrap()).unwrap();
    let env = Envelope {
        api_version: "v1".into(),
        kind: "Status".into(),
        raw: raw.into(),
        content_type: String::new(),
    };
    let again: Status = decode_status(Envelope::decode(env.encode_to_bytes()).unwrap()).unwrap();
    assert_eq!(again, status);
    assert_eq!(again.code, Some(404));
}

/// JSON → protobuf → k8s-openapi → JSON.
fn round_trip(api_version: &str, kind: &str, obj: &Value) -> Value {
    let raw = encode_json(api_version, kind, obj).unwrap();
    let env = Envelope {
        api_version: api_version.into(),
        kind: kind.into(),
        raw: raw.into(),
        content_type: String::new(),
    };
    let env = Envelope::decode(env.encode_to_bytes()).unwrap();
    macro_rules! back {
        ($($t:ty),*) => {
            $(if <$t as k8s_openapi::Resource>::KIND == kind
                && <$t as k8s_openapi::Resource>::API_VERSION == api_version {
                return serde_json::to_value(decode_object::<$t>(env).unwrap()).unwrap();
            })*
        };
    }
    use k8s_openapi::api::{apps::v1 as apps, coordination::v1 as coord, core::v1 as core};
    back!(
        core::Pod,
        core::ConfigMap,
        core::Secret,
        core::Namespace,
        core::Service,
        core::Node,
        core::Event,
        coord::Lease,
        apps::Deployment
    );
    panic!("no decoder for {kind}");
}

#[test]
fn every_served_kind_round_trips_through_protobuf() {
    let meta = json!({"name": "x", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
        "creationTimestamp": "2026-01-02T03:04:05Z", "labels": {"a": "b"},
        "annotations": {"n": "v"}, "finalizers": ["f"], "generation": 2,
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "o", "uid": "u-0",
                             "controller": true}],
        "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}}]});
    let cases = [
        (
            "v1",
            "Pod",
            json!({"spec": {"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5}}],
            "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}}],
            "nodeName": "n1", "imagePullSecrets": [{"name": "s"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-01-02T03:04:05Z"}]}}),
        ),
        (
            "v1",
            "ConfigMap",
            json!({"data": {"k": "v"}, "binaryData": {"b": "AAEC"},
                                   "immutable": true}),
        ),
        (
            "v1",
            "Secret",
            json!({"data": {"k": "dmFsdWU="}, "type": "Opaque"}),
        ),
        (
            "v1",
            "Namespace",
            json!({"spec": {"finalizers": ["kubernetes"]},
                                   "status": {"phase": "Active"}}),
        ),
        (
            "v1",
            "Service",
            json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.10",
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
            "selector": {"app": "web"}}}),
        ),
        (
            "v1",
            "Node",
            json!({"spec": {"podCIDR": "10.1.0.0/24"},
            "status": {"capacity": {"cpu": "4"}, "addresses": [{"type": "InternalIP",
                                                                "address": "192.168.0.1"}]}}),
        ),
        (
            "v1",
            "Event",
            json!({"involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns"},
            "reason": "Started", "message": "m", "type": "Normal", "count": 3,
            "firstTimestamp": "2026-01-02T03:04:05Z", "eventTime": "2026-01-02T03:04:05.123456Z",
            "source": {"component": "kubelet"}}),
        ),
        (
            "coordination.k8s.io/v1",
            "Lease",
            json!({"spec": {"holderIdentity": "me",
            "leaseDurationSeconds": 15, "renewTime": "2026-01-02T03:04:05.123456Z",
            "leaseTransitions": 1}}),
        ),
        (
            "apps/v1",
            "Deployment",
            json!({"spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%",
                                                                    "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        ),
    ];
    for (av, kind, rest) in cases {
        let mut obj = rest;
        obj["apiVersion"] = json!(av);
        obj["kind"] = json!(kind);
        obj["metadata"] = meta.clone();
        if kind == "Namespace" || kind == "Node" {
            obj["metadata"].as_object_mut().unwrap().remove("namespace");
        }
        // What the JSON path gives: the same object through k8s-openapi's serde.
        let expected = round_trip_json(&obj);
        assert_eq!(round_trip(av, kind, &obj), expected, "{kind}");
    }
}

fn round_trip_json(obj: &Value) -> Value {
    // Through the typed value, like a JSON client decoding the same object.
    macro_rules! via {
        ($($t:ty),*) => {
            $(if <$t as k8s_openapi::Resource>::KIND == obj["kind"]
                && <$t as k8s_openapi::Resource>::API_VERSION == obj["apiVersion"] {
                let t: $t = serde_json::from_value(obj.clone()).unwrap();
                return serde_json::to_value(t).unwrap();
            })*
        };
    }
    use k8s_openapi::api::{apps::v1 as apps, coordination::v1 as coord, core::v1 as core};
    via!(
        core::Pod,
        core::ConfigMap,
        core::Secret,
        core::Namespace,
        core::Service,
        core::Node,
        core::Event,
        coord::Lease,
        apps::Deployment
    );
    unreachable!()
}

#[test]
fn custom_resources_and_bad_objects_are_errors() {
    let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert!(matches!(
        encode_json("example.com/v1", "Widget", &cr),
        Err(EncodeError::UnsupportedKind { .. })
    ));
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 3}});
    assert!(matches!(
        encode_json("v1", "ConfigMap", &bad),
        Err(EncodeError::InvalidObject { .. })
    ));
}
