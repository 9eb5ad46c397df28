//! The direct decoders (wire bytes → k8s-openapi) agree with prost + the generated conversion
//! on random Pods that exercise every kind of field (strings, numbers, Go zero values, maps of
//! quantities, IntOrString, times including Go's zero time, managedFields' JSON, embedded
//! structs); corrupted or cut bytes are an error or a value, never a panic.
//! `PROPTEST_CASES` sets the number of cases.

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use kcache_proto::api::core::v1 as pb;
use kcache_proto::apimachinery::pkg::api::resource::Quantity;
use kcache_proto::apimachinery::pkg::apis::meta::v1 as meta;
use kcache_proto::apimachinery::pkg::util::intstr::IntOrString;
use kcache_proto::convert::FromProto;
use kcache_proto::{DecodeConfig, Envelope, decode_object, decode_object_with};
use proptest::prelude::*;
use prost::Message;

/// Strings including the empty one (Go's zero value, dropped for `omitempty` fields).
fn text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[a-z0-9./-]{0,12}")
}

/// Times: absent, Go's zero time, the Unix epoch, or any second with nanos.
fn time() -> impl Strategy<Value = Option<meta::Time>> {
    prop_oneof![
        Just(None),
        Just(Some(meta::Time {
            seconds: Some(-62_135_596_800),
            nanos: Some(0)
        })),
        Just(Some(meta::Time {
            seconds: None,
            nanos: None
        })),
        (0i64..4_000_000_000, 0i32..1_000_000_000).prop_map(|(s, n)| Some(meta::Time {
            seconds: Some(s),
            nanos: Some(n)
        })),
    ]
}

fn quantities() -> impl Strategy<Value = std::collections::BTreeMap<String, Quantity>> {
    proptest::collection::btree_map(
        "(cpu|memory|nvidia.com/gpu)",
        "[0-9]{1,4}(m|Mi|Gi)?".prop_map(|s| Quantity { string: Some(s) }),
        0..3,
    )
}

fn int_or_string() -> impl Strategy<Value = Option<IntOrString>> {
    proptest::option::of(prop_oneof![
        any::<i32>().prop_map(|i| IntOrString {
            r#type: Some(0),
            int_val: Some(i),
            str_val: Some(String::new())
        }),
        "[a-z]{1,6}".prop_map(|s| IntOrString {
            r#type: Some(1),
            int_val: Some(0),
            str_val: Some(s)
        }),
    ])
}

fn managed_fields() -> impl Strategy<Value = Vec<meta::ManagedFieldsEntry>> {
    proptest::collection::vec(
        (text(), time(), "[a-z]{1,5}").prop_map(|(manager, time, f)| meta::ManagedFieldsEntry {
            manager,
            operation: Some("Update".into()),
            api_version: Some("v1".into()),
            time,
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(meta::FieldsV1 {
                raw: Some(
                    format!(r#"{{"f:metadata":{{"f:labels":{{"f:{f}":{{}}}}}}}}"#).into_bytes(),
                ),
            }),
            subresource: Some(String::new()),
        }),
        0..3,
    )
}

fn object_meta() -> impl Strategy<Value = meta::ObjectMeta> {
    (
        (text(), text(), text(), text()),
        (proptest::option::of(any::<i64>()), time(), time()),
        proptest::collection::btree_map("[a-z]{1,6}", "[a-z0-9]{0,6}", 0..4),
        proptest::collection::btree_map("[a-z./]{1,12}", ".{0,20}", 0..3),
        proptest::collection::vec("[a-z./]{1,12}", 0..2),
        managed_fields(),
        proptest::option::of(any::<i64>()),
    )
        .prop_map(
            |(
                (name, ns, uid, rv),
                (generation, created, deleted),
                labels,
                annotations,
                finalizers,
                managed_fields,
                grace,
            )| {
                meta::ObjectMeta {
                    name,
                    namespace: ns,
                    uid,
                    resource_version: rv,
                    generation,
                    creation_timestamp: created,
                    deletion_timestamp: deleted,
                    deletion_grace_period_seconds: grace,
                    labels,
                    annotations,
                    finalizers,
                    managed_fields,
                    owner_references: vec![meta::OwnerReference {
                        api_version: Some("apps/v1".into()),
                        kind: Some("ReplicaSet".into()),
                        name: Some("rs".into()),
                        uid: Some("u".into()),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }],
                    ..Default::default()
                }
            },
        )
}

fn container() -> impl Strategy<Value = pb::Container> {
    (
        (
            "[a-z]{1,8}",
            text(),
            proptest::collection::vec("[a-z-]{0,8}", 0..3),
        ),
        proptest::collection::vec(("[A-Z_]{1,8}", text()), 0..4),
        (quantities(), quantities()),
        (
            int_or_string(),
            proptest::option::of(any::<i32>()),
            any::<bool>(),
        ),
        proptest::collection::vec(any::<i32>(), 0..3),
    )
        .prop_map(
            |((name, image, args), env, (limits, requests), (port, delay, stdin), ports)| {
                pb::Container {
                    name: Some(name),
                    image,
                    args,
                    env: env
                        .into_iter()
                        .map(|(name, value)| pb::EnvVar {
                            name: Some(name),
                            value,
                            value_from: None,
                        })
                        .collect(),
                    resources: Some(pb::ResourceRequirements {
                        limits,
                        requests,
                        claims: vec![],
                    }),
                    ports: ports
                        .into_iter()
                        .map(|p| pb::ContainerPort {
                            container_port: Some(p),
                            protocol: Some("TCP".into()),
                            host_port: Some(0),
                            ..Default::default()
                        })
                        .collect(),
                    liveness_probe: port.map(|port| pb::Probe {
                        handler: Some(pb::ProbeHandler {
                            http_get: Some(pb::HttpGetAction {
                                path: Some("/healthz".into()),
                                port: Some(port),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        initial_delay_seconds: delay,
                        ..Default::default()
                    }),
                    stdin: Some(stdin),
                    ..Default::default()
                }
            },
        )
}

fn pod() -> impl Strategy<Value = pb::Pod> {
    (
        object_meta(),
        proptest::collection::vec(container(), 0..3),
        (
            text(),
            proptest::option::of(any::<i64>()),
            proptest::option::of(any::<i32>()),
        ),
        (
            text(),
            time(),
            proptest::collection::vec("[0-9.]{1,15}", 0..3),
        ),
        proptest::collection::vec(("[a-z]{1,6}", text(), time()), 0..3),
        proptest::collection::vec(("[a-z]{1,6}", any::<bool>()), 0..3),
    )
        .prop_map(
            |(
                metadata,
                containers,
                (node, deadline, priority),
                (phase, start, ips),
                conditions,
                volumes,
            )| pb::Pod {
                metadata: Some(metadata),
                spec: Some(pb::PodSpec {
                    containers,
                    node_name: node,
                    active_deadline_seconds: deadline,
                    priority,
                    volumes: volumes
                        .into_iter()
                        .map(|(name, secret)| pb::Volume {
                            name: Some(name.clone()),
                            volume_source: Some(if secret {
                                pb::VolumeSource {
                                    secret: Some(pb::SecretVolumeSource {
                                        secret_name: Some(name),
                                        default_mode: Some(0o644),
                                        ..Default::default()
                                    }),
                                    ..Default::default()
                                }
                            } else {
                                pb::VolumeSource {
                                    empty_dir: Some(pb::EmptyDirVolumeSource {
                                        medium: Some(String::new()),
                                        size_limit: None,
                                    }),
                                    ..Default::default()
                                }
                            }),
                        })
                        .collect(),
                    tolerations: vec![pb::Toleration {
                        key: Some("k".into()),
                        operator: Some("Exists".into()),
                        toleration_seconds: Some(300),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                status: Some(pb::PodStatus {
                    phase,
                    start_time: start,
                    pod_i_ps: ips
                        .into_iter()
                        .map(|ip| pb::PodIp { ip: Some(ip) })
                        .collect(),
                    conditions: conditions
                        .into_iter()
                        .map(|(t, status, time)| pb::PodCondition {
                            r#type: Some(t),
                            status,
                            last_transition_time: time,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }),
            },
        )
}

/// prost + the generated conversion: the reference.
fn via_prost(bytes: &[u8], strip: bool) -> K8sPod {
    let mut p = pb::Pod::decode(bytes).expect("prost decodes what prost encoded");
    if strip && let Some(m) = p.metadata.as_mut() {
        m.managed_fields.clear();
    }
    K8sPod::from_proto(p).expect("converts")
}

fn direct(bytes: &[u8], strip: bool) -> Result<K8sPod, kcache_proto::DecodeError> {
    let env = Envelope {
        api_version: "v1".into(),
        kind: "Pod".into(),
        raw: Bytes::copy_from_slice(bytes),
        content_type: String::new(),
    };
    decode_object_with(env, DecodeConfig::default().strip_managed_fields(strip))
}

proptest! {
    #[test]
    fn direct_decoder_agrees_with_prost_and_conversion(p in pod(), strip in any::<bool>()) {
        let bytes = p.encode_to_vec();
        let expected = via_prost(&bytes, strip);
        let got = direct(&bytes, strip).expect("direct decode");
        prop_assert_eq!(&got, &expected);
        if strip {
            prop_assert_eq!(got.metadata.managed_fields, None);
        }
    }

    #[test]
    fn corrupted_or_cut_bytes_never_panic(
        p in pod(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = p.encode_to_vec();
        let cut_at = cut.index(bytes.len() + 1);
        let _ = direct(&bytes[..cut_at], false);
        if !bytes.is_empty() {
            for (at, b) in flips {
                let i = at.index(bytes.len());
                bytes[i] ^= b;
            }
        }
        let _ = direct(&bytes, false);
        let _ = direct(&bytes, true);
    }
}

#[test]
fn cut_inside_a_field_is_an_error_naming_the_kind() {
    let p = pb::Pod {
        metadata: Some(meta::ObjectMeta {
            name: Some("a-long-enough-name".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let bytes = p.encode_to_vec();
    let err = direct(&bytes[..bytes.len() - 3], false).unwrap_err();
    assert!(err.to_string().contains("malformed protobuf Pod"), "{err}");
    let source = std::error::Error::source(&err).expect("the wire error");
    assert!(source.to_string().contains("at metadata"), "{source}");
}

#[test]
fn out_of_range_time_is_an_error_not_a_panic() {
    let p = pb::Pod {
        metadata: Some(meta::ObjectMeta {
            creation_timestamp: Some(meta::Time {
                seconds: Some(i64::MAX),
                nanos: Some(0),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let err = direct(&p.encode_to_vec(), false).unwrap_err();
    let source = std::error::Error::source(&err).expect("the wire error");
    assert!(
        source.to_string().contains("timestamp out of range"),
        "{source}"
    );
}

#[test]
fn unknown_fields_are_skipped() {
    let p = pb::Pod {
        metadata: Some(meta::ObjectMeta {
            name: Some("x".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut bytes = p.encode_to_vec();
    // Field 99 of every wire type a newer server could add: varint, fixed64, bytes, fixed32.
    bytes.extend([0x98, 0x06, 0x01]);
    bytes.extend([0x99, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]);
    bytes.extend([0x9a, 0x06, 0x02, b'h', b'i']);
    bytes.extend([0x9d, 0x06, 1, 2, 3, 4]);
    let pod = direct(&bytes, false).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("x"));
}

#[test]
fn decode_object_uses_the_envelope_kind() {
    let p = pb::Pod {
        metadata: Some(meta::ObjectMeta {
            name: Some("x".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod: K8sPod = decode_object(Envelope::for_message("v1", "Pod", &p)).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("x"));
}
