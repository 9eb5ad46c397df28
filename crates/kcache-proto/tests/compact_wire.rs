//! The compact form's wire helpers: `metadata.managedFields` removed by rewriting the message
//! (every other byte kept), the metadata parsed without decoding the rest, and bad bytes an
//! error, never a panic.

use std::borrow::Cow;

use kcache_proto::api::core::v1 as pb;
use kcache_proto::apimachinery::pkg::apis::meta::v1 as meta;
use kcache_proto::compact::{object_meta, strip_managed_fields, wire};
use kcache_proto::convert::FromProto;
use proptest::prelude::*;
use prost::Message;

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

fn managed(manager: &str, size: usize) -> meta::ManagedFieldsEntry {
    meta::ManagedFieldsEntry {
        manager: s(manager),
        operation: s("Update"),
        api_version: s("v1"),
        fields_type: s("FieldsV1"),
        fields_v1: Some(meta::FieldsV1 {
            raw: Some(
                format!(
                    r#"{{"f:metadata":{{"f:labels":{{"f:{}":{{}}}}}}}}"#,
                    "x".repeat(size)
                )
                .into_bytes(),
            ),
        }),
        time: Some(meta::Time {
            seconds: Some(1_700_000_000),
            nanos: None,
        }),
        ..Default::default()
    }
}

/// A Pod with every kind of metadata field and a spec and status after it.
fn pod(managed_fields: Vec<meta::ManagedFieldsEntry>) -> pb::Pod {
    pb::Pod {
        metadata: Some(meta::ObjectMeta {
            name: s("web-0"),
            generate_name: s("web-"),
            namespace: s("prod"),
            uid: s("3b2c1a7e-0000-4000-8000-000000000001"),
            resource_version: s("12345"),
            generation: Some(2),
            creation_timestamp: Some(meta::Time {
                seconds: Some(1_700_000_000),
                nanos: None,
            }),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            annotations: [("note".to_owned(), "kept".to_owned())].into(),
            owner_references: vec![meta::OwnerReference {
                api_version: s("apps/v1"),
                kind: s("StatefulSet"),
                name: s("web"),
                uid: s("u-1"),
                controller: Some(true),
                ..Default::default()
            }],
            finalizers: vec!["example.com/f".into()],
            managed_fields,
            ..Default::default()
        }),
        spec: Some(pb::PodSpec {
            containers: vec![pb::Container {
                name: s("c"),
                image: s("nginx"),
                ..Default::default()
            }],
            node_name: s("node-1"),
            ..Default::default()
        }),
        status: Some(pb::PodStatus {
            phase: s("Running"),
            ..Default::default()
        }),
    }
}

fn without_managed_fields(mut p: pb::Pod) -> pb::Pod {
    if let Some(m) = p.metadata.as_mut() {
        m.managed_fields.clear();
    }
    p
}

#[test]
fn stripping_managed_fields_keeps_every_other_byte() {
    let full = pod(vec![managed("kubectl", 10), managed("kubelet", 40)]);
    let raw = full.encode_to_vec();
    let stripped = strip_managed_fields(&raw).unwrap();
    assert!(matches!(stripped, Cow::Owned(_)));
    // prost writes fields in field-number order as the API server does, so the rewrite must
    // be byte-for-byte the encoding of the same Pod without managedFields.
    let expected = without_managed_fields(full);
    assert_eq!(&*stripped, expected.encode_to_vec().as_slice());
    assert_eq!(pb::Pod::decode(&*stripped).unwrap(), expected);
}

#[test]
fn stripping_rewrites_a_metadata_length_prefix_that_shrinks() {
    // managedFields > 128 bytes: the metadata's length needs two varint bytes before and
    // one after.
    let full = pb::Pod {
        metadata: Some(meta::ObjectMeta {
            name: s("p"),
            managed_fields: vec![managed("m", 300)],
            ..Default::default()
        }),
        ..Default::default()
    };
    let raw = full.encode_to_vec();
    let stripped = strip_managed_fields(&raw).unwrap();
    assert_eq!(
        &*stripped,
        without_managed_fields(full).encode_to_vec().as_slice()
    );
    assert_eq!(stripped.len(), 5); // key, length 3, name record "p" (key, len, byte)
}

#[test]
fn object_without_managed_fields_is_borrowed_not_copied() {
    let raw = pod(vec![]).encode_to_vec();
    let stripped = strip_managed_fields(&raw).unwrap();
    assert!(matches!(stripped, Cow::Borrowed(b) if b == raw.as_slice()));
}

#[test]
fn object_meta_equals_the_full_conversion_minus_managed_fields() {
    let full = pod(vec![managed("kubectl", 10)]);
    let raw = full.encode_to_vec();
    let parsed = object_meta(&raw).unwrap();
    let expected = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::from_proto(
        without_managed_fields(full).metadata.unwrap(),
    )
    .unwrap();
    assert_eq!(parsed, expected);
    assert!(parsed.managed_fields.is_none());
    assert_eq!(parsed.owner_references.unwrap()[0].kind, "StatefulSet");
    // Stripped or not, the same metadata.
    assert_eq!(
        object_meta(&strip_managed_fields(&raw).unwrap()).unwrap(),
        expected
    );
}

#[test]
fn repeated_metadata_records_merge_as_protobuf_does() {
    // Two messages concatenated are one message with both fields merged.
    let first = pod(vec![managed("a", 5)]);
    let second = pb::Pod {
        metadata: Some(meta::ObjectMeta {
            labels: [("tier".to_owned(), "front".to_owned())].into(),
            managed_fields: vec![managed("b", 5)],
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut raw = first.encode_to_vec();
    raw.extend_from_slice(&second.encode_to_vec());
    let merged = pb::Pod::decode(raw.as_slice()).unwrap();
    assert_eq!(merged.metadata.as_ref().unwrap().labels.len(), 2);

    let stripped = strip_managed_fields(&raw).unwrap();
    assert_eq!(
        pb::Pod::decode(&*stripped).unwrap(),
        without_managed_fields(merged.clone())
    );
    let expected = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::from_proto(
        without_managed_fields(merged).metadata.unwrap(),
    )
    .unwrap();
    assert_eq!(object_meta(&raw).unwrap(), expected);
}

#[test]
fn metadata_that_is_not_a_message_is_an_error() {
    // Field 1 as a varint.
    let raw = [0x08, 0x01];
    assert_eq!(
        strip_managed_fields(&raw).unwrap_err(),
        wire::LayoutError::MetadataNotAMessage(0)
    );
    assert!(object_meta(&raw).is_err());
}

#[test]
fn invalid_metadata_field_is_a_malformed_error() {
    // metadata { name: <length 5, 1 byte> } — the object level is fine, the metadata is not.
    let raw = [0x0a, 0x03, 0x0a, 0x05, b'x'];
    let err = object_meta(&raw).unwrap_err();
    assert!(
        matches!(err, kcache_proto::DecodeError::Wire { ref kind, .. } if kind == "ObjectMeta"),
        "{err:?}"
    );
    let source = std::error::Error::source(&err).expect("the wire error");
    assert!(source.to_string().contains("at name"), "{source}");
    // metadata { name: invalid UTF-8 } decodes lossily, as Go's JSON encoder writes it.
    let raw = [0x0a, 0x03, 0x0a, 0x01, 0xff];
    assert_eq!(object_meta(&raw).unwrap().name.as_deref(), Some("\u{fffd}"));
}

/// Offsets at which the top-level records of `raw` start or end.
fn boundaries(raw: &[u8]) -> Vec<usize> {
    let mut out = vec![0];
    out.extend(wire::fields(raw).map(|f| f.unwrap().record.end));
    out
}

proptest! {
    #[test]
    fn random_bytes_are_an_error_or_a_value_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = strip_managed_fields(&bytes);
        let _ = object_meta(&bytes);
        let _ = wire::fields(&bytes).count();
    }

    #[test]
    fn a_cut_object_is_an_error_unless_cut_between_records(
        mf in 0usize..4,
        size in 0usize..200,
        cut_at in any::<prop::sample::Index>(),
    ) {
        let raw = pod((0..mf).map(|i| managed(&format!("m{i}"), size)).collect()).encode_to_vec();
        let cut = cut_at.index(raw.len());
        let part = &raw[..cut];
        let at_boundary = boundaries(&raw).contains(&cut);
        prop_assert_eq!(strip_managed_fields(part).is_ok(), at_boundary);
        prop_assert_eq!(object_meta(part).is_ok(), at_boundary);
    }

    #[test]
    fn corrupted_objects_are_an_error_or_a_value_never_a_panic(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut raw = pod(vec![managed("kubectl", 30)]).encode_to_vec();
        let i = at.index(raw.len());
        raw[i] = byte;
        if let Ok(stripped) = strip_managed_fields(&raw) {
            // Whatever was rewritten walks again, and holds no managedFields.
            let meta_ranges = wire::metadata_ranges(&stripped).unwrap();
            for r in meta_ranges {
                prop_assert!(wire::fields(&stripped[r]).all(|f| f.is_ok_and(|f| f.number != 17)));
            }
        }
        let _ = object_meta(&raw);
    }
}
