use bytes::Bytes;
use proptest::prelude::*;
use prost::Message;

use super::{ListSplitter, SplitError};
use crate::api::core::v1::{Pod, PodList, PodSpec};
use crate::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use crate::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use crate::envelope::Envelope;
use crate::list::RawList;

fn pod(name: &str, containers: usize) -> Pod {
    Pod {
        metadata: Some(ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            node_name: Some("n".repeat(containers * 50)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn list(pods: Vec<Pod>) -> PodList {
    PodList {
        metadata: Some(ListMeta {
            resource_version: Some("4711".into()),
            r#continue: Some("token".into()),
            ..Default::default()
        }),
        items: pods,
    }
}

/// Splits `body` cut into `sizes` (cycled); returns the items and what finish returned.
fn split(body: &[u8], sizes: &[usize]) -> Result<(Vec<Bytes>, Envelope), SplitError> {
    let mut splitter = ListSplitter::new(1 << 20);
    let mut items = Vec::new();
    let mut pos = 0;
    for &size in sizes.iter().cycle() {
        if pos >= body.len() {
            break;
        }
        let end = (pos + size.max(1)).min(body.len());
        items.extend(splitter.push(&Bytes::copy_from_slice(&body[pos..end]))?);
        pos = end;
    }
    Ok((items, splitter.finish()?))
}

fn check_split(expected: &PodList, body: &[u8], sizes: &[usize]) {
    let (items, env) = split(body, sizes).unwrap();
    assert_eq!(
        (env.api_version.as_str(), env.kind.as_str()),
        ("v1", "PodList")
    );
    let rest = RawList::decode_raw(env.raw).unwrap();
    assert_eq!(rest.metadata, expected.metadata);
    assert!(rest.items.is_empty());
    let pods: Vec<Pod> = items.into_iter().map(|b| Pod::decode(b).unwrap()).collect();
    assert_eq!(pods, expected.items);
}

#[test]
fn every_chunk_size_gives_the_same_items_and_metadata() {
    let expected = list(vec![pod("a", 1), pod("b", 40), Pod::default(), pod("c", 3)]);
    let body = Envelope::for_message("v1", "PodList", &expected).encode_to_bytes();
    for size in 1..=body.len() {
        check_split(&expected, &body, &[size]);
    }
}

#[test]
fn an_empty_list_has_its_metadata_and_no_items() {
    let expected = list(Vec::new());
    let body = Envelope::for_message("v1", "PodList", &expected).encode_to_bytes();
    check_split(&expected, &body, &[3]);
}

#[test]
fn the_type_is_known_before_the_items_and_items_within_a_chunk_are_not_copied() {
    let expected = list(vec![pod("a", 1), pod("b", 2)]);
    let body = Envelope::for_message("v1", "PodList", &expected).encode_to_bytes();
    let mut splitter = ListSplitter::new(1 << 20);
    assert_eq!(splitter.type_meta(), None);
    let items = splitter.push(&body).unwrap();
    assert_eq!(splitter.type_meta(), Some(("v1", "PodList")));
    assert_eq!(items.len(), 2);
    let range = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
    assert!(items.iter().all(|i| range.contains(&(i.as_ptr() as usize))));
}

/// The list's metadata (its continue token) is known once the first item's header came, at
/// every cut of the body, and not before: byte by byte, nothing before the item's tag.
#[test]
fn the_list_metadata_is_known_when_the_first_item_begins() {
    let expected = list(vec![pod("a", 30), pod("b", 2)]);
    let body = Envelope::for_message("v1", "PodList", &expected).encode_to_bytes();
    // The first item's header ends with the byte before the item's message.
    let item = pod("a", 30).encode_to_vec();
    let first_item = body.windows(item.len()).position(|w| w == item).unwrap() - 1;
    let mut splitter = ListSplitter::new(1 << 20);
    for (i, b) in body.iter().enumerate() {
        splitter.push(&Bytes::copy_from_slice(&[*b])).unwrap();
        let meta = splitter.list_meta_before_items();
        if i < first_item {
            assert_eq!(meta, None, "byte {i}, before the first item");
        } else {
            assert_eq!(meta, expected.metadata, "byte {i}");
        }
    }
    let empty = Envelope::for_message("v1", "PodList", &list(Vec::new())).encode_to_bytes();
    let mut splitter = ListSplitter::new(1 << 20);
    splitter.push(&empty).unwrap();
    assert_eq!(
        splitter.list_meta_before_items(),
        None,
        "no item, nothing early"
    );
}

#[test]
fn fields_in_another_order_are_read_too() {
    let expected = list(vec![pod("a", 1)]);
    let raw = Unknown {
        raw: Some(Bytes::from(expected.encode_to_vec())),
        ..Default::default()
    }
    .encode_to_vec();
    let types = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("PodList".into()),
        }),
        content_type: Some(String::new()),
        ..Default::default()
    }
    .encode_to_vec();
    // raw first, then typeMeta and contentType: still one valid runtime.Unknown.
    let mut body = b"k8s\0".to_vec();
    body.extend_from_slice(&raw);
    body.extend_from_slice(&types);
    check_split(&expected, &body, &[7]);
}

#[test]
fn bad_bodies_are_errors() {
    let body = Envelope::for_message("v1", "PodList", &list(vec![pod("a", 9)])).encode_to_bytes();
    let wrong_magic = [b"k9s\0".as_slice(), &body[4..]].concat();
    assert!(matches!(
        split(&wrong_magic, &[64]),
        Err(SplitError::Malformed { at: 3, .. })
    ));
    // Cut anywhere before the end of the items: an error. (After them come only the two
    // empty strings, 4 bytes, whose absence protobuf cannot tell.)
    for cut in 0..body.len() - 4 {
        assert!(split(&body[..cut], &[5]).is_err(), "cut at {cut}");
    }
    let mut small = ListSplitter::new(16);
    assert!(matches!(
        small.push(&body),
        Err(SplitError::ItemTooLarge { max: 16, .. })
    ));
    let encoded = Envelope {
        content_type: String::new(),
        ..Envelope::for_message("v1", "PodList", &list(Vec::new()))
    };
    let gzip = Unknown {
        type_meta: Some(TypeMeta::default()),
        raw: Some(encoded.raw),
        content_encoding: Some("gzip".into()),
        content_type: None,
    };
    let body = [b"k8s\0".as_slice(), &gzip.encode_to_vec()].concat();
    assert!(matches!(split(&body, &[9]), Err(SplitError::Envelope(_))));
}

#[test]
fn a_header_varint_beyond_64_bits_is_refused_as_the_wire_reader_refuses_it() {
    // A field key whose 10th byte sets bit 65: prost and the crate's wire reader refuse it.
    let mut body = b"k8s\0".to_vec();
    body.extend([
        0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00,
    ]);
    let err = split(&body, &[64]).unwrap_err();
    assert!(
        matches!(err, SplitError::Malformed { at: 13, what } if what.contains("varint")),
        "{err:?}"
    );
}

proptest! {
    #[test]
    fn random_lists_and_cuts_split_as_they_decode(
        sizes in proptest::collection::vec(0usize..60, 0..12),
        cuts in proptest::collection::vec(1usize..300, 1..6),
    ) {
        let pods = sizes.iter().enumerate().map(|(i, &s)| pod(&format!("p{i}"), s)).collect();
        let expected = list(pods);
        let body = Envelope::for_message("v1", "PodList", &expected).encode_to_bytes();
        check_split(&expected, &body, &cuts);
    }

    #[test]
    fn garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..400), cut in 1usize..50) {
        let mut with_magic = b"k8s\0".to_vec();
        with_magic.extend_from_slice(&body);
        let _ = split(&body, &[cut]);
        let _ = split(&with_magic, &[cut]);
    }
}
