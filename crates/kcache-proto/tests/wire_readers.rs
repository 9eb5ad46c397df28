//! The two consumers of the protobuf wire format — the generated decoders (`decode_object`) and
//! the compact layer's record walker (`compact::wire::fields`, `strip_managed_fields`) — accept
//! and refuse the same bytes, and refuse what prost refuses: a varint longer than 10 bytes or
//! whose 10th byte holds bits beyond 64, and a field number outside 1..=2^29-1.

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use kcache_proto::api::core::v1 as pb;
use kcache_proto::apimachinery::pkg::apis::meta::v1 as meta;
use kcache_proto::compact::{strip_managed_fields, wire};
use kcache_proto::varint;
use kcache_proto::{DecodeConfig, Envelope, decode_object_with};
use prost::Message;

/// A small valid Pod, to which a test appends one record.
fn pod_bytes() -> Vec<u8> {
    pb::Pod {
        metadata: Some(meta::ObjectMeta {
            name: Some("web-0".into()),
            namespace: Some("prod".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// The key of field `number` with wire type varint.
fn varint_key(number: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint::put(&mut out, number << 3);
    out
}

/// Whether the generated decoder, the compact walker and prost accept `bytes`, in that order.
fn verdicts(bytes: &[u8]) -> (bool, bool, bool) {
    let env = Envelope {
        api_version: "v1".into(),
        kind: "Pod".into(),
        raw: Bytes::copy_from_slice(bytes),
        content_type: String::new(),
    };
    let direct = decode_object_with::<K8sPod>(env, DecodeConfig::default()).is_ok();
    let walker = wire::fields(bytes).all(|f| f.is_ok()) && strip_managed_fields(bytes).is_ok();
    let prost = pb::Pod::decode(bytes).is_ok();
    (direct, walker, prost)
}

fn assert_all_refuse(bytes: &[u8], what: &str) {
    assert_eq!(
        verdicts(bytes),
        (false, false, false),
        "{what}: (generated decoder, compact walker, prost) accepted"
    );
}

#[test]
fn a_tenth_varint_byte_above_one_is_an_error_in_both_readers() {
    // An unknown field 99 whose varint value sets bit 65.
    let mut value = pod_bytes();
    value.extend(varint_key(99));
    value.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]);
    assert_all_refuse(&value, "value varint overflowing 64 bits");

    // A key varint that does the same.
    let mut key = pod_bytes();
    key.extend([
        0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x01,
    ]);
    assert_all_refuse(&key, "key varint of 11 bytes");
    let mut key = pod_bytes();
    key.extend([
        0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x01,
    ]);
    assert_all_refuse(&key, "key varint overflowing 64 bits");
}

#[test]
fn a_varint_longer_than_ten_bytes_is_an_error_in_both_readers() {
    let mut bytes = pod_bytes();
    bytes.extend(varint_key(99));
    bytes.extend([0x80; 10]);
    bytes.push(0x00);
    assert_all_refuse(&bytes, "11-byte varint value");
}

#[test]
fn the_largest_ten_byte_varint_is_accepted_by_both_readers() {
    let mut bytes = pod_bytes();
    bytes.extend(varint_key(99));
    varint::put(&mut bytes, u64::MAX);
    assert_eq!(verdicts(&bytes), (true, true, true));
}

#[test]
fn field_numbers_outside_1_to_2_pow_29_minus_1_are_errors_in_both_readers() {
    for number in [0, 1 << 29, 1 << 32, (1 << 61) - 1] {
        let mut bytes = pod_bytes();
        bytes.extend(varint_key(number));
        bytes.push(0x01);
        assert_all_refuse(&bytes, &format!("field number {number}"));
    }
}

#[test]
fn the_largest_field_number_is_accepted_by_both_readers() {
    let mut bytes = pod_bytes();
    bytes.extend(varint_key((1 << 29) - 1));
    bytes.push(0x01);
    assert_eq!(verdicts(&bytes), (true, true, true));
}
