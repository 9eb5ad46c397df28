//! The wire reader and the value decoders on hand-written bytes.

use super::*;

#[test]
fn varint_fast_and_slow_paths() {
    let mut r = Reader::new(&[0x05, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert_eq!(r.varint().unwrap(), 5);
    assert_eq!(r.varint().unwrap(), 300);
    assert_eq!(r.varint().unwrap(), u64::from(u32::MAX));
    assert!(r.buf.is_empty());
}

#[test]
fn truncated_varint_and_length_are_errors() {
    assert!(matches!(
        Reader::new(&[0x80, 0x80]).varint().unwrap_err(),
        LayoutError::Truncated { .. }
    ));
    assert!(matches!(
        Reader::new(&[0xff; 11]).varint().unwrap_err(),
        LayoutError::Varint { at: 0 }
    ));
    // A length of 5 with 2 bytes left.
    assert!(matches!(
        Reader::new(&[0x05, 1, 2])
            .len(Wt::Len)
            .unwrap_err()
            .layout(),
        Some(LayoutError::Truncated { .. })
    ));
}

#[test]
fn negative_int32_is_a_ten_byte_varint() {
    let mut buf = vec![0x08];
    buf.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    let mut r = Reader::new(&buf);
    let (tag, wt) = r.key().unwrap().unwrap();
    assert_eq!((tag, wt), (1, Wt::Varint));
    assert_eq!(i32::read(&mut r, wt, &Cx::default()).unwrap(), -1);
}

#[test]
fn packed_and_unpacked_repeated_numbers_both_decode() {
    let cx = Cx::default();
    let mut out = Vec::new();
    // Unpacked: one varint.
    i64::read_repeated(&mut Reader::new(&[7]), Wt::Varint, &cx, &mut out).unwrap();
    // Packed: length 3, values 1, 2, 300.
    i64::read_repeated(
        &mut Reader::new(&[4, 1, 2, 0xac, 0x02]),
        Wt::Len,
        &cx,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, vec![7, 1, 2, 300]);
}

#[test]
fn wrong_wire_type_names_the_field_path() {
    // Pod { metadata (1) = ObjectMeta { name (1) as a varint } }
    let buf = [0x0a, 0x02, 0x08, 0x01];
    let err = <k8s_openapi::api::core::v1::Pod as WireMessage>::decode_msg(&buf, &Cx::default())
        .unwrap_err();
    assert_eq!(err.path(), "metadata.name");
    assert!(err.to_string().contains("wire type 0"), "{err}");
}

#[test]
fn invalid_utf8_string_decodes_lossily() {
    let mut r = Reader::new(&[0x02, 0xff, b'a']);
    let s = String::read(&mut r, Wt::Len, &Cx::default()).unwrap();
    assert_eq!(s, "\u{fffd}a");
}

#[test]
fn groups_are_rejected() {
    assert!(matches!(
        Reader::new(&[0x0b]).key().unwrap_err(),
        LayoutError::WireType { wire_type: 3, .. }
    ));
}
