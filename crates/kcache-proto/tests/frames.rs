//! Property tests of the watch stream decoder: a valid stream split anywhere yields the same
//! events; a truncated stream is an error; corrupted bytes are an error or a different value,
//! never a panic. `PROPTEST_CASES` sets the number of cases.

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use kcache_proto::api::core::v1::{Container, Pod, PodSpec};
use kcache_proto::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_proto::frame::encode_frame;
use kcache_proto::{
    Envelope, RawWatchEvent, WatchDecoder, WatchError, WatchEventType, decode_object,
};
use proptest::prelude::*;

fn event_type() -> impl Strategy<Value = WatchEventType> {
    prop_oneof![
        Just(WatchEventType::Added),
        Just(WatchEventType::Modified),
        Just(WatchEventType::Deleted),
        Just(WatchEventType::Bookmark),
    ]
}

fn pod() -> impl Strategy<Value = Pod> {
    (
        "[a-z][a-z0-9-]{0,20}",
        "[0-9]{1,8}",
        proptest::collection::btree_map("[a-z]{1,8}", "[a-z0-9]{0,12}", 0..4),
        proptest::collection::vec("[a-z]{1,10}", 0..3),
    )
        .prop_map(|(name, rv, labels, containers)| Pod {
            metadata: Some(ObjectMeta {
                name: Some(name),
                namespace: Some("ns".into()),
                resource_version: Some(rv),
                labels,
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: containers
                    .into_iter()
                    .map(|c| Container {
                        name: Some(c),
                        image: Some("img".into()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            status: None,
        })
}

fn events() -> impl Strategy<Value = Vec<RawWatchEvent>> {
    proptest::collection::vec(
        (event_type(), pod()).prop_map(|(event_type, p)| RawWatchEvent {
            event_type,
            object: Envelope::for_message("v1", "Pod", &p),
        }),
        0..8,
    )
}

fn stream(events: &[RawWatchEvent]) -> Vec<u8> {
    let mut out = Vec::new();
    for ev in events {
        encode_frame(&ev.encode_to_vec(), &mut out);
    }
    out
}

/// Feeds `chunks` and collects every event (and its typed Pod); `Err` on the first error,
/// including a truncated end.
fn decode_all<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<(RawWatchEvent, K8sPod)>, String> {
    let mut dec = WatchDecoder::default();
    let mut out = Vec::new();
    for c in chunks {
        dec.push(c);
        loop {
            match dec.next_event() {
                Ok(Some(ev)) => {
                    let pod =
                        decode_object::<K8sPod>(ev.object.clone()).map_err(|e| e.to_string())?;
                    out.push((ev, pod));
                }
                Ok(None) => break,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    dec.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

fn split_at_points(data: &[u8], mut points: Vec<usize>) -> Vec<&[u8]> {
    points.iter_mut().for_each(|p| *p %= data.len() + 1);
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut last = 0;
    for p in points {
        chunks.push(&data[last..p]);
        last = p;
    }
    chunks.push(&data[last..]);
    chunks
}

proptest! {
    #[test]
    fn stream_split_at_random_points_yields_the_same_events(
        evs in events(),
        points in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let data = stream(&evs);
        let got = decode_all(split_at_points(&data, points)).unwrap();
        let got: Vec<RawWatchEvent> = got.into_iter().map(|(e, _)| e).collect();
        prop_assert_eq!(got, evs);
    }

    #[test]
    fn stream_truncated_anywhere_inside_is_an_error(evs in events(), cut in any::<usize>()) {
        let data = stream(&evs);
        prop_assume!(!data.is_empty());
        let cut = cut % data.len();
        // Cutting exactly at a frame boundary leaves a valid, shorter stream.
        let mut boundaries = vec![0];
        for ev in &evs {
            boundaries.push(boundaries.last().unwrap() + 4 + ev.encode_to_vec().len());
        }
        let res = decode_all([&data[..cut]]);
        if boundaries.contains(&cut) {
            prop_assert_eq!(res.unwrap().len(), boundaries.iter().position(|&b| b == cut).unwrap());
        } else {
            prop_assert!(res.unwrap_err().contains("ended inside a frame"));
        }
    }

    #[test]
    fn corrupted_bytes_never_panic(
        evs in events(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        points in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut data = stream(&evs);
        prop_assume!(!data.is_empty());
        for (at, byte) in flips {
            let at = at % data.len();
            data[at] = byte;
        }
        // Ok (a corruption that is still valid protobuf) or Err: both fine, a panic is not.
        let _ = decode_all(split_at_points(&data, points));
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = decode_all([&data[..]]);
        let _ = Envelope::decode(Bytes::from(data.clone())).map(decode_object::<K8sPod>);
        let _ = RawWatchEvent::decode(Bytes::from(data));
    }
}

#[test]
fn stream_split_at_every_boundary_yields_the_same_events() {
    let evs: Vec<RawWatchEvent> = (0..3)
        .map(|i| RawWatchEvent {
            event_type: WatchEventType::Modified,
            object: Envelope::for_message(
                "v1",
                "Pod",
                &Pod {
                    metadata: Some(ObjectMeta {
                        name: Some(format!("p{i}")),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ),
        })
        .collect();
    let data = stream(&evs);
    for i in 0..=data.len() {
        for j in i..=data.len() {
            let got = decode_all([&data[..i], &data[i..j], &data[j..]]).unwrap();
            assert_eq!(
                got.into_iter().map(|(e, _)| e).collect::<Vec<_>>(),
                evs,
                "split at {i}, {j}"
            );
        }
    }
}

#[test]
fn frame_over_the_limit_is_an_error_not_an_allocation() {
    let mut dec = WatchDecoder::new(1024);
    dec.push(&[0x7f, 0xff, 0xff, 0xff]);
    let err = dec.next_event().unwrap_err();
    assert!(
        matches!(
            err,
            WatchError::Frame(kcache_proto::FrameError::TooLong {
                len: 0x7fff_ffff,
                max: 1024
            })
        ),
        "{err}"
    );
}

#[test]
fn object_with_wrong_magic_is_an_error_and_the_stream_goes_on() {
    let good = RawWatchEvent {
        event_type: WatchEventType::Added,
        object: Envelope::for_message("v1", "Pod", &Pod::default()),
    };
    let mut bad = good.encode_to_vec();
    let pos = bad.windows(4).position(|w| w == b"k8s\0").unwrap();
    bad[pos] = b'K';
    let mut data = Vec::new();
    encode_frame(&bad, &mut data);
    encode_frame(&good.encode_to_vec(), &mut data);
    let mut dec = WatchDecoder::default();
    dec.push(&data);
    let err = dec.next_event().unwrap_err();
    assert!(
        matches!(
            err,
            WatchError::Object(kcache_proto::EnvelopeError::WrongMagic { .. })
        ),
        "{err}"
    );
    assert_eq!(dec.next_event().unwrap(), Some(good));
}

#[test]
fn unknown_kind_is_an_error() {
    let env = Envelope::for_message("example.com/v1", "Widget", &Pod::default());
    // Into a type that is not a built-in kind's: no protobuf type for the envelope's kind.
    let err = decode_object::<serde_json::Value>(env.clone()).unwrap_err();
    assert!(
        matches!(err, kcache_proto::DecodeError::UnknownKind { ref kind, .. } if kind == "Widget"),
        "{err}"
    );
    // Into the Pod type: the envelope holds another kind.
    let err = decode_object::<K8sPod>(env).unwrap_err();
    assert!(
        matches!(err, kcache_proto::DecodeError::WrongKind { ref kind, .. } if kind == "Widget"),
        "{err}"
    );
}

#[test]
fn another_built_in_kind_is_not_decoded_as_the_requested_one() {
    // A ConfigMap would decode "successfully" as an empty Pod through a JSON detour; like
    // k8s-openapi's JSON deserializer, the protobuf decoder refuses the wrong kind.
    let cm = kcache_proto::api::core::v1::ConfigMap {
        metadata: Some(ObjectMeta {
            name: Some("cm".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let err = decode_object::<K8sPod>(Envelope::for_message("v1", "ConfigMap", &cm)).unwrap_err();
    assert!(err.to_string().contains("expected v1/Pod"), "{err}");
}
