//! The generated conversions for kinds beyond Pod: ConfigMap (bytes maps), Lease (MicroTime),
//! Deployment (IntOrString, embedded Pod template), and the JSON detour to other types.

use bytes::Bytes;
use k8s_openapi::api::{apps::v1 as k8s_apps, coordination::v1 as k8s_coord, core::v1 as k8s_core};
use kcache_proto::api::{apps::v1 as apps, coordination::v1 as coord, core::v1 as core};
use kcache_proto::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kcache_proto::apimachinery::pkg::util::intstr::IntOrString;
use kcache_proto::{Envelope, decode_list, decode_object, kind_is_supported};
use prost::Message;

fn meta(name: &str) -> Option<ObjectMeta> {
    Some(ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        ..Default::default()
    })
}

#[test]
fn config_map_with_data_and_binary_data_converts() {
    let cm = core::ConfigMap {
        metadata: meta("cm"),
        immutable: Some(false),
        data: [("a".to_owned(), "1".to_owned())].into(),
        binary_data: [("b".to_owned(), vec![0u8, 1, 2])].into(),
    };
    let k: k8s_core::ConfigMap =
        decode_object(Envelope::for_message("v1", "ConfigMap", &cm)).unwrap();
    assert_eq!(k.metadata.name.as_deref(), Some("cm"));
    assert_eq!(k.data.unwrap()["a"], "1");
    assert_eq!(k.binary_data.unwrap()["b"].0, vec![0u8, 1, 2]);
    // `immutable` is a Go pointer: false is kept, not dropped as a zero value.
    assert_eq!(k.immutable, Some(false));
    let json = serde_json::to_value(
        decode_object::<k8s_core::ConfigMap>(Envelope::for_message("v1", "ConfigMap", &cm))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["binaryData"]["b"], "AAEC");
}

#[test]
fn lease_micro_time_keeps_microseconds() {
    let lease = coord::Lease {
        metadata: meta("l"),
        spec: Some(coord::LeaseSpec {
            holder_identity: Some("me".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime {
                seconds: Some(1_900_000_000),
                nanos: Some(123_456_000),
            }),
            ..Default::default()
        }),
    };
    let k: k8s_coord::Lease = decode_object(Envelope::for_message(
        "coordination.k8s.io/v1",
        "Lease",
        &lease,
    ))
    .unwrap();
    let spec = k.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("me"));
    let renew = serde_json::to_value(spec.renew_time.unwrap()).unwrap();
    assert_eq!(renew, "2030-03-17T17:46:40.123456Z");
}

#[test]
fn deployment_with_int_or_string_and_pod_template_converts() {
    let d = apps::Deployment {
        metadata: meta("d"),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(3),
            strategy: Some(apps::DeploymentStrategy {
                r#type: Some("RollingUpdate".into()),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: Some("25%".into()),
                    }),
                    max_surge: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: Some(String::new()),
                    }),
                }),
            }),
            template: Some(core::PodTemplateSpec {
                metadata: meta("t"),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: Some("c".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let k: k8s_apps::Deployment =
        decode_object(Envelope::for_message("apps/v1", "Deployment", &d)).unwrap();
    let spec = k.spec.unwrap();
    assert_eq!(spec.replicas, Some(3));
    let ru = spec.strategy.unwrap().rolling_update.unwrap();
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString as K;
    assert_eq!(ru.max_unavailable, Some(K::String("25%".into())));
    assert_eq!(ru.max_surge, Some(K::Int(1)));
    assert_eq!(spec.template.spec.unwrap().containers[0].name, "c");
}

#[test]
fn decoding_into_a_non_k8s_openapi_type_goes_through_json() {
    #[derive(serde::Deserialize)]
    struct MyCm {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        kind: String,
        data: std::collections::BTreeMap<String, String>,
    }
    let cm = core::ConfigMap {
        metadata: meta("cm"),
        data: [("k".to_owned(), "v".to_owned())].into(),
        ..Default::default()
    };
    let mine: MyCm = decode_object(Envelope::for_message("v1", "ConfigMap", &cm)).unwrap();
    assert_eq!(mine.metadata.name.as_deref(), Some("cm"));
    assert_eq!(mine.kind, "ConfigMap");
    assert_eq!(mine.data["k"], "v");
}

#[test]
fn list_of_config_maps_decodes_items_and_metadata() {
    let list = core::ConfigMapList {
        metadata: Some(kcache_proto::apimachinery::pkg::apis::meta::v1::ListMeta {
            resource_version: Some("10".into()),
            r#continue: Some(String::new()),
            ..Default::default()
        }),
        items: vec![
            core::ConfigMap {
                metadata: meta("a"),
                ..Default::default()
            },
            core::ConfigMap {
                metadata: meta("b"),
                ..Default::default()
            },
        ],
    };
    let env = Envelope {
        api_version: "v1".into(),
        kind: "ConfigMapList".into(),
        raw: Bytes::from(list.encode_to_vec()),
        content_type: String::new(),
    };
    let (m, items) = decode_list::<k8s_core::ConfigMap>(env).unwrap();
    assert_eq!(m.resource_version.as_deref(), Some("10"));
    // An empty continue token (Go writes it) is no token.
    assert_eq!(m.continue_, None);
    let names: Vec<_> = items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn supported_kinds_are_the_generated_built_ins() {
    for (av, kind) in [
        ("v1", "Pod"),
        ("v1", "ConfigMap"),
        ("v1", "Node"),
        ("coordination.k8s.io/v1", "Lease"),
        ("apps/v1", "Deployment"),
    ] {
        assert!(kind_is_supported(av, kind), "{av} {kind}");
    }
    assert!(!kind_is_supported("example.com/v1", "Widget"));
    assert!(!kind_is_supported("v1", "PodList"));
}

#[test]
fn native_kind_is_only_the_k8s_openapi_type_of_a_generated_kind() {
    assert_eq!(
        kcache_proto::native_kind::<k8s_core::Pod>(),
        Some(("v1", "Pod"))
    );
    assert_eq!(
        kcache_proto::native_kind::<k8s_coord::Lease>(),
        Some(("coordination.k8s.io/v1", "Lease"))
    );
    assert_eq!(kcache_proto::native_kind::<serde_json::Value>(), None);
}

#[test]
fn strip_managed_fields_option_drops_them() {
    use kcache_proto::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    let mut cm = core::ConfigMap {
        metadata: meta("cm"),
        ..Default::default()
    };
    cm.metadata.as_mut().unwrap().managed_fields = vec![ManagedFieldsEntry {
        manager: Some("m".into()),
        fields_v1: Some(FieldsV1 {
            raw: Some(b"{}".to_vec()),
        }),
        ..Default::default()
    }];
    let env = Envelope::for_message("v1", "ConfigMap", &cm);
    let kept: k8s_core::ConfigMap = decode_object(env.clone()).unwrap();
    assert_eq!(kept.metadata.managed_fields.map(|m| m.len()), Some(1));
    let opts = kcache_proto::DecodeConfig::default().strip_managed_fields(true);
    let stripped: k8s_core::ConfigMap = kcache_proto::decode_object_with(env, opts).unwrap();
    assert_eq!(stripped.metadata.managed_fields, None);
    assert_eq!(stripped.metadata.name.as_deref(), Some("cm"));
}
