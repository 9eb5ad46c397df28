//! Every protobuf body recorded from kube-apiserver v1.36
//! (`testdata/kube-apiserver-v1.36/protobuf.json`) decodes to the same objects as its JSON twin
//! in the same file.
//!
//! The JSON side is normalised (`<rv:N>`, `<uid:N>`, `<time>`) and the protobuf side is not, so
//! the comparison maps each placeholder to the real value it stands for, consistently across
//! the whole file (the same `<rv:N>` must be the same real RV everywhere, and two different
//! placeholders two different values), and `<time>` to any RFC 3339 timestamp.

mod support;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kcache_proto::{
    Envelope, WatchDecoder, WatchEventType, decode_list, decode_object, decode_status,
};
use serde_json::Value;
use support::protobuf_fixture::{Placeholders, body, fixture, step};

/// The object as JSON without `apiVersion`/`kind` (list items on the wire have neither).
fn without_type(mut v: Value) -> Value {
    let o = v.as_object_mut().unwrap();
    o.remove("apiVersion");
    o.remove("kind");
    v
}

fn pod_json(p: &Pod) -> Value {
    without_type(serde_json::to_value(p).unwrap())
}

#[test]
fn protobuf_list_decodes_to_the_json_list() {
    let f = fixture();
    let mut ph = Placeholders::default();
    let env = Envelope::decode(body(step(&f, "list 3 pods as protobuf"))).unwrap();
    assert_eq!(
        (env.api_version.as_str(), env.kind.as_str()),
        ("v1", "PodList")
    );
    let (meta, pods) = decode_list::<Pod>(env).unwrap();
    let json = &step(&f, "same list as JSON")["response"]["body"];
    ph.check(
        &json["metadata"],
        &serde_json::to_value(&meta).unwrap(),
        "metadata",
    );
    let items = json["items"].as_array().unwrap();
    assert_eq!(pods.len(), items.len());
    for (i, (p, j)) in pods.iter().zip(items).enumerate() {
        ph.check(
            &without_type(j.clone()),
            &pod_json(p),
            &format!("items[{i}]"),
        );
    }
}

#[test]
fn protobuf_get_decodes_to_the_json_object() {
    let f = fixture();
    let mut ph = Placeholders::default();
    let pod: Pod =
        decode_object(Envelope::decode(body(step(&f, "get one pod as protobuf"))).unwrap())
            .unwrap();
    let json = &step(&f, "create pod pb-1 (JSON)")["response"]["body"];
    ph.check(&without_type(json.clone()), &pod_json(&pod), "pod");
}

#[test]
fn protobuf_status_decodes_with_its_fields() {
    let f = fixture();
    let env = Envelope::decode(body(step(&f, "404 with protobuf Accept"))).unwrap();
    // Asking for a Pod and getting a Status is a Status error carrying it.
    match decode_object::<Pod>(env.clone()) {
        Err(kcache_proto::DecodeError::Status(s)) => assert_eq!(s.code, Some(404)),
        other => panic!("expected a Status error, got {other:?}"),
    }
    let status = decode_status(env).unwrap();
    assert_eq!(status.status.as_deref(), Some("Failure"));
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
    assert_eq!(status.code, Some(404));
    assert_eq!(status.message.as_deref(), Some("pods \"nope\" not found"));
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_deref(), details.kind.as_deref()),
        (Some("nope"), Some("pods"))
    );
}

#[test]
fn protobuf_list_with_limit_carries_continue_and_remaining_count() {
    let f = fixture();
    let mut ph = Placeholders::default();
    let (meta, pods) =
        decode_list::<Pod>(Envelope::decode(body(step(&f, "client-go default Accept"))).unwrap())
            .unwrap();
    assert_eq!(pods.len(), 1);
    assert!(meta.continue_.as_deref().is_some_and(|c| !c.is_empty()));
    assert_eq!(meta.remaining_item_count, Some(2));
    let json = &step(&f, "create pod pb-1 (JSON)")["response"]["body"];
    ph.check(&without_type(json.clone()), &pod_json(&pods[0]), "items[0]");
}

/// Decodes a recorded watch body, fed in chunks of `chunk` bytes.
fn watch_events(body: &Bytes, chunk: usize) -> Vec<(WatchEventType, Pod)> {
    let mut dec = WatchDecoder::default();
    let mut out = Vec::new();
    for c in body.chunks(chunk) {
        dec.push(c);
        while let Some(ev) = dec.next_event().unwrap() {
            out.push((ev.event_type, decode_object::<Pod>(ev.object).unwrap()));
        }
    }
    dec.finish().unwrap();
    out
}

fn check_watch(pb_step: &str, json_step: &str, expected_events: usize) {
    let f = fixture();
    let mut ph = Placeholders::default();
    let b = body(step(&f, pb_step));
    let json = step(&f, json_step)["response"]["events"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(json.len(), expected_events);
    for chunk in [1, 7, 905, b.len()] {
        let events = watch_events(&b, chunk);
        assert_eq!(events.len(), json.len(), "chunk size {chunk}");
        for (i, ((ty, pod), j)) in events.iter().zip(&json).enumerate() {
            assert_eq!(ty.as_wire(), j["type"].as_str().unwrap(), "event {i}");
            ph.check(
                &without_type(j["object"].clone()),
                &pod_json(pod),
                &format!("events[{i}]"),
            );
        }
    }
}

#[test]
fn protobuf_watch_replay_decodes_to_the_json_events() {
    check_watch(
        "protobuf watch from the RV before",
        "the same watch as JSON",
        3,
    );
}

#[test]
fn protobuf_live_watch_decodes_to_the_json_events() {
    check_watch(
        "live protobuf watch",
        "the same live events replayed as JSON",
        4,
    );
}

/// The generic path (prost → `serde_json::Value` → k8s-openapi, feature `serde`) agrees with
/// the generated conversion on the recorded Pods. Run with `--features serde`.
#[cfg(feature = "serde")]
#[test]
fn generic_serde_path_agrees_with_generated_conversion() {
    use kcache_proto::convert::FromProto;
    use prost::Message;
    let f = fixture();
    let env = Envelope::decode(body(step(&f, "list 3 pods as protobuf"))).unwrap();
    let list = kcache_proto::api::core::v1::PodList::decode(env.raw).unwrap();
    assert_eq!(list.items.len(), 3);
    for p in list.items {
        let generic: Pod = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(generic, Pod::from_proto(p).unwrap());
    }
}
