//! The estimator on small hand-built values, with exact expected sizes.

use std::{collections::BTreeMap, mem::size_of};

use k8s_openapi::{
    api::core::v1::{ConfigMap, Container, EnvVar, Pod, PodSpec},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};
use serde_json::{Value, json};

use super::{
    estimate::{btree_bytes, pushed_capacity},
    *,
};

/// One `BTreeMap<String, String>` leaf: parent pointer, index, length, 11 × (24 + 24).
const STRING_LEAF: usize = 544;

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

#[test]
fn scalars_and_strings_count_their_buffer_only() {
    assert_eq!(heap_size(&7u64), 0);
    assert_eq!(heap_size(&None::<String>), 0);
    assert_eq!(heap_size(&String::new()), 0);
    assert_eq!(heap_size(&s("hello")), 5);
    assert_eq!(estimate(&String::from("hello")), 24 + 5);
}

#[test]
fn a_sequence_counts_each_element_inline_plus_its_heap() {
    // Buffers are counted at the capacity pushing gives.
    assert_eq!(pushed_capacity(0, 24), 0);
    assert_eq!(pushed_capacity(2, 24), 4);
    assert_eq!(pushed_capacity(5, 24), 8);
    assert_eq!(pushed_capacity(3, 1), 8);
    assert_eq!(pushed_capacity(3, 2000), 4);
    assert_eq!(pushed_capacity(1, 2000), 1);
    let v = vec![String::from("a"), String::from("bcd")];
    assert_eq!(heap_size(&v), 4 * 24 + 1 + 3);
    let empty: Vec<String> = Vec::new();
    assert_eq!(heap_size(&empty), 0);
    let numbers = vec![1u16, 2, 3];
    assert_eq!(heap_size(&numbers), 4 * 2);
    // Struct elements: the stride between two elements is the struct's size.
    let env = vec![
        EnvVar {
            name: "A".into(),
            ..EnvVar::default()
        },
        EnvVar {
            name: "BC".into(),
            value: s("x"),
            ..EnvVar::default()
        },
    ];
    let cap = pushed_capacity(2, size_of::<EnvVar>());
    assert_eq!(heap_size(&env), cap * size_of::<EnvVar>() + 1 + 2 + 1);
}

#[test]
fn a_map_counts_btree_nodes_then_keys_and_values() {
    assert_eq!(btree_bytes(1, 48), STRING_LEAF);
    assert_eq!(btree_bytes(11, 48), STRING_LEAF);
    // 12 entries: two leaves under one internal node (a leaf plus 12 edges).
    assert_eq!(btree_bytes(12, 48), 2 * STRING_LEAF + STRING_LEAF + 12 * 8);
    // 100 entries: 15 leaves (7 per leaf), three internal nodes above them, one root.
    assert_eq!(
        btree_bytes(100, 48),
        15 * STRING_LEAF + 4 * (STRING_LEAF + 12 * 8)
    );
    let m = BTreeMap::from([
        ("app".to_owned(), "web".to_owned()),
        ("t".into(), "".into()),
    ]);
    assert_eq!(heap_size(&m), STRING_LEAF + 3 + 3 + 1);
    assert_eq!(heap_size(&BTreeMap::<String, String>::new()), 0);
}

#[test]
fn a_config_map_counts_metadata_strings_and_data_but_not_api_version_or_kind() {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: s("settings"),
            namespace: s("prod"),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("mode".to_owned(), "fast".to_owned()),
            ("level".to_owned(), "3".to_owned()),
        ])),
        ..ConfigMap::default()
    };
    let expected = size_of::<ConfigMap>() + 8 + 4 + STRING_LEAF + 4 + 4 + 5 + 1;
    assert_eq!(estimate(&cm), expected);
}

#[test]
fn timestamps_are_inline() {
    let meta = ObjectMeta {
        creation_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        name: s("a"),
        ..ObjectMeta::default()
    };
    assert_eq!(heap_size(&meta), 1);
}

#[test]
fn a_pod_counts_its_containers_in_the_vec_buffer() {
    let pod = Pod {
        metadata: ObjectMeta {
            name: s("web-0"),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: s("nginx"),
                env: Some(vec![EnvVar {
                    name: "A".into(),
                    value: s("1"),
                    ..EnvVar::default()
                }]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let (c, e) = (size_of::<Container>(), size_of::<EnvVar>());
    let container = pushed_capacity(1, c) * c + 4 + 5 + pushed_capacity(1, e) * e + 1 + 1;
    assert_eq!(estimate(&pod), size_of::<Pod>() + 5 + container);
}

#[test]
fn json_values_are_sized_by_what_they_serialize_as() {
    // serde hands elements and entries over by reference: a `Value` inside a map or array is
    // sized by its first serializer call (24 for a string, array or map, 8 for a number),
    // not as the 32-byte enum it is (documented as an under-count).
    let v: Value = json!({"a": [1, "xy"]});
    let leaf: usize = 8 + 2 + 2 + 11 * (24 + 24) + 4;
    assert_eq!(estimate(&v), size_of::<Value>() + leaf + 1 + 4 * 8 + 2);
}
