//! Compact objects: verbatim and stripped bytes, parsed metadata, the typed view, key
//! functions through [`Resource`](kube_core::Resource), lists.

use k8s_openapi::api::core::v1::Pod;
use kcache::store::ObjectKey;

use super::*;
use crate::decode::{ItemDecoder, Typed, decode_list, decode_object};

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns",
    "labels":{"app":"web"},"managedFields":[{"manager":"kubectl","operation":"Update",
    "fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}}],
    "resourceVersion":"7"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#;

#[test]
fn compact_keeps_verbatim_bytes_and_parsed_metadata() {
    let c: Compact<Pod> = decode_object(POD.as_bytes(), &CompactDecoder::new()).unwrap();
    assert_eq!(c.json(), Some(POD.as_bytes()));
    assert_eq!(c.bytes(), POD.as_bytes());
    assert_eq!(c.format(), Format::Json);
    assert!(c.protobuf().is_none());
    assert_eq!(c.metadata().labels.as_ref().unwrap()["app"], "web");
    assert!(c.metadata().managed_fields.is_none());
    let typed = c.typed().unwrap();
    assert_eq!(typed, serde_json::from_str::<Pod>(POD).unwrap());
}

#[test]
fn stripped_compact_bytes_decode_to_the_stripped_object() {
    let c: Compact<Pod> = decode_object(
        POD.as_bytes(),
        &CompactDecoder::new().strip_managed_fields(true),
    )
    .unwrap();
    assert!(c.bytes().len() < POD.len());
    let expected: Pod =
        decode_object(POD.as_bytes(), &Typed::new().strip_managed_fields(true)).unwrap();
    assert_eq!(c.typed().unwrap(), expected);
    assert_eq!(serde_json::from_slice::<Pod>(c.bytes()).unwrap(), expected);
}

#[test]
fn key_functions_work_on_compact_objects_through_resource() {
    let c: Compact<Pod> = decode_object(POD.as_bytes(), &CompactDecoder::new()).unwrap();
    let key = kcache::store::meta_namespace_key(&c).unwrap();
    assert_eq!(key, ObjectKey::new(Some("ns"), "p"));
}

#[test]
fn meta_mut_edits_show_in_the_typed_view() {
    let mut c: Compact<Pod> = decode_object(POD.as_bytes(), &CompactDecoder::new()).unwrap();
    c.meta_mut().labels = None;
    let typed = c.typed().unwrap();
    assert!(typed.metadata.labels.is_none());
    assert!(typed.metadata.managed_fields.is_some());
}

#[test]
fn compact_lists_decode_every_item() {
    let body = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{POD},{POD}]}}"#
    );
    for strip in [false, true] {
        let list = decode_list::<Compact<Pod>, _>(
            body.as_bytes(),
            &CompactDecoder::new().strip_managed_fields(strip),
        )
        .unwrap();
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.items[1].metadata().name.as_deref(), Some("p"));
    }
}

#[test]
fn invalid_metadata_is_an_error() {
    let bad = br#"{"metadata":{"name":7}}"#;
    assert!(decode_object::<Compact<Pod>, _>(bad, &CompactDecoder::new()).is_err());
    assert!(
        decode_object::<Compact<Pod>, _>(bad, &CompactDecoder::new().strip_managed_fields(true))
            .is_err()
    );
}

#[test]
fn without_managed_fields_rewrites_the_bytes_and_keeps_the_metadata() {
    let mut c: Compact<Pod> = decode_object(POD.as_bytes(), &CompactDecoder::new()).unwrap();
    c.meta_mut().labels = None;
    let stripped = c.without_managed_fields().unwrap();
    assert!(!stripped.bytes().windows(13).any(|w| w == b"managedFields"));
    assert!(
        stripped.metadata().labels.is_none(),
        "metadata edits are kept"
    );
    let typed = stripped.typed().unwrap();
    assert!(typed.metadata.managed_fields.is_none());
    assert_eq!(typed.metadata.resource_version.as_deref(), Some("7"));
    // Nothing to strip: the same bytes.
    let again = stripped.clone().without_managed_fields().unwrap();
    assert_eq!(again, stripped);
}

#[test]
fn a_list_item_decoded_in_one_pass_equals_the_parsed_one() {
    for strip in [false, true] {
        let decoder = CompactDecoder::new().strip_managed_fields(strip);
        let parsed: Compact<Pod> = decode_object(POD.as_bytes(), &decoder).unwrap();
        let item = Bytes::from_static(POD.as_bytes());
        let one_pass: Compact<Pod> = decoder.decode_json_item(item).unwrap();
        assert_eq!(one_pass, parsed, "strip {strip}");
    }
    // The one pass still checks the whole item, after `metadata` too, and its text.
    let decoder = CompactDecoder::new();
    let bad: [&[u8]; 5] = [
        br#"{"metadata":{"name":"a"},"spec":{"x":tru}}"#,
        br#"{"metadata":{"name":"a"},"spec":{}} x"#,
        br#"{"metadata":{"name":1}}"#,
        br#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
        b"{\"metadata\":{\"name\":\"\xff\"}}",
    ];
    for item in bad {
        let got: Result<Compact<Pod>, _> = decoder.decode_json_item(Bytes::from_static(item));
        assert!(got.is_err(), "{}", String::from_utf8_lossy(item));
    }
}

#[test]
fn a_whole_item_at_the_front_of_a_chunk_is_decoded_with_its_length() {
    for strip in [false, true] {
        let decoder = CompactDecoder::new().strip_managed_fields(strip);
        let parsed: Compact<Pod> = decode_object(POD.as_bytes(), &decoder).unwrap();
        let chunk = format!("{POD},{{\"metadata\":{{\"name\":\"next\"}}}}]}}");
        let (item, len): (Compact<Pod>, usize) =
            decoder.decode_json_prefix(chunk.as_bytes()).unwrap();
        assert_eq!((item, len), (parsed, POD.len()), "strip {strip}");
        // Cut short, or not valid: left to the splitter's scan and `decode_json_item`.
        let cut: Option<(Compact<Pod>, usize)> =
            decoder.decode_json_prefix(&POD.as_bytes()[..POD.len() - 1]);
        assert!(cut.is_none());
        let bad: Option<(Compact<Pod>, usize)> =
            decoder.decode_json_prefix(br#"{"metadata":{"name":"a"},"spec":{"x":tru}},{}"#);
        assert!(bad.is_none());
    }
}
