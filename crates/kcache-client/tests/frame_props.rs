//! Property tests of the watch decoder under adversarial chunking and corruption.
//!
//! - any split of a valid stream into chunks decodes to the same events as the whole stream,
//!   and to the events that were encoded;
//! - a stream cut anywhere but at the end of a line ends with an error item;
//! - a control byte inserted anywhere (never valid JSON) ends the stream with an error item;
//! - an unknown event type ends the stream with a protocol error;
//! - arbitrary bytes in arbitrary chunks never panic, and an error is always the last item.
//!
//! The number of cases follows `PROPTEST_CASES`.

use std::convert::Infallible;

use bytes::Bytes;
use futures::{StreamExt, executor::block_on, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::lister_watcher::{Error, WatchEvent};
use kcache_client::decode::{Typed, internals::watch_events};
use proptest::prelude::*;
use serde_json::json;

/// One generated event: (type, name, resourceVersion, data value).
#[derive(Debug, Clone)]
struct Ev {
    ty: &'static str,
    name: String,
    rv: u64,
    value: String,
}

fn ev() -> impl Strategy<Value = Ev> {
    (
        prop::sample::select(vec!["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]),
        "[a-z][a-z0-9-]{0,20}",
        0u64..1_000_000,
        // Values with escapes, quotes, newlines and non-ASCII: the frame splitter must only cut
        // at real newlines, which JSON escapes inside strings.
        "(\\PC|\n|\"|\\\\|\u{2028}|é|🦀){0,40}",
    )
        .prop_map(|(ty, name, rv, value)| Ev {
            ty,
            name,
            rv,
            value,
        })
}

fn encode(e: &Ev) -> String {
    let object = match e.ty {
        "ERROR" => json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message": e.value, "reason":"Expired","code":410}),
        "BOOKMARK" => json!({"kind":"ConfigMap","apiVersion":"v1",
            "metadata":{"resourceVersion": e.rv.to_string()}}),
        _ => json!({"kind":"ConfigMap","apiVersion":"v1",
            "metadata":{"name": e.name, "resourceVersion": e.rv.to_string()},
            "data":{"v": e.value}}),
    };
    json!({"type": e.ty, "object": object}).to_string()
}

fn body(events: &[Ev]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        out.extend(encode(e).into_bytes());
        out.push(b'\n');
    }
    out
}

/// Splits `bytes` at the given cut points (taken modulo the length, deduplicated).
fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Bytes> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| if bytes.is_empty() { 0 } else { c % bytes.len() })
        .collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| Bytes::copy_from_slice(&bytes[w[0]..w[1]]))
        .collect()
}

/// A comparable summary of one decoded item.
#[derive(Debug, PartialEq)]
enum Got {
    Event(&'static str, String, String, String),
    Err {
        transport: bool,
        decode: bool,
        protocol: bool,
    },
}

fn decode(chunks: Vec<Bytes>) -> Vec<Got> {
    let s = stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
    let events = watch_events::<ConfigMap, _, _, _>(s, Typed::new(), 1 << 20);
    block_on(events.map(summarise).collect())
}

fn summarise(item: Result<WatchEvent<ConfigMap>, Error>) -> Got {
    let obj = |ty, cm: ConfigMap| {
        Got::Event(
            ty,
            cm.metadata.name.unwrap_or_default(),
            cm.metadata.resource_version.unwrap_or_default(),
            cm.data
                .and_then(|d| d.get("v").cloned())
                .unwrap_or_default(),
        )
    };
    match item {
        Ok(WatchEvent::Added(cm)) => obj("ADDED", cm),
        Ok(WatchEvent::Modified(cm)) => obj("MODIFIED", cm),
        Ok(WatchEvent::Deleted(cm)) => obj("DELETED", cm),
        Ok(WatchEvent::Bookmark(b)) => Got::Event(
            "BOOKMARK",
            String::new(),
            b.metadata.resource_version,
            String::new(),
        ),
        Ok(WatchEvent::Error(s)) => Got::Event("ERROR", String::new(), String::new(), s.message),
        Err(e) => Got::Err {
            transport: e.is_transport(),
            decode: e.is_decode(),
            protocol: e.is_protocol(),
        },
    }
}

fn expected(events: &[Ev]) -> Vec<Got> {
    events
        .iter()
        .map(|e| match e.ty {
            "BOOKMARK" => Got::Event("BOOKMARK", String::new(), e.rv.to_string(), String::new()),
            "ERROR" => Got::Event("ERROR", String::new(), String::new(), e.value.clone()),
            ty => Got::Event(ty, e.name.clone(), e.rv.to_string(), e.value.clone()),
        })
        .collect()
}

fn ends_with_single_error(got: &[Got]) -> bool {
    let errors = got.iter().filter(|g| matches!(g, Got::Err { .. })).count();
    errors == 1 && matches!(got.last(), Some(Got::Err { .. }))
}

proptest! {
    #[test]
    fn any_split_of_a_valid_stream_decodes_to_the_same_events(
        events in prop::collection::vec(ev(), 0..12),
        cuts in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        let bytes = body(&events);
        let whole = decode(vec![Bytes::from(bytes.clone())]);
        prop_assert_eq!(&whole, &expected(&events));
        prop_assert_eq!(decode(split(&bytes, &cuts)), whole);
    }

    #[test]
    fn a_stream_cut_mid_line_ends_with_a_transport_error(
        events in prop::collection::vec(ev(), 1..8),
        cut in any::<usize>(),
        cuts in prop::collection::vec(any::<usize>(), 0..10),
    ) {
        let bytes = body(&events);
        let cut = cut % bytes.len();
        prop_assume!(cut > 0 && bytes[cut - 1] != b'\n');
        let got = decode(split(&bytes[..cut], &cuts));
        prop_assert!(ends_with_single_error(&got), "{:?}", got);
        prop_assert_eq!(
            got.last(),
            Some(&Got::Err { transport: true, decode: false, protocol: false })
        );
        // Everything before the cut line decoded normally.
        let complete = bytes[..cut].iter().filter(|b| **b == b'\n').count();
        prop_assert_eq!(&got[..got.len() - 1], &expected(&events)[..complete]);
    }

    #[test]
    fn an_inserted_control_byte_is_an_error_never_a_panic(
        events in prop::collection::vec(ev(), 1..8),
        at in any::<usize>(),
        byte in 0u8..9,
        cuts in prop::collection::vec(any::<usize>(), 0..10),
    ) {
        let mut bytes = body(&events);
        let at = at % (bytes.len() + 1);
        bytes.insert(at, byte);
        let got = decode(split(&bytes, &cuts));
        prop_assert!(ends_with_single_error(&got), "{:?}", got);
    }

    #[test]
    fn an_unknown_event_type_is_a_protocol_error(
        events in prop::collection::vec(ev(), 1..8),
        which in any::<usize>(),
        ty in "[A-Z]{1,12}",
    ) {
        prop_assume!(!["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"].contains(&ty.as_str()));
        let which = which % events.len();
        let mut text = String::new();
        for (i, e) in events.iter().enumerate() {
            let mut line = encode(e);
            if i == which {
                line = line.replacen(&format!("\"type\":\"{}\"", e.ty), &format!("\"type\":\"{ty}\""), 1);
            }
            text.push_str(&line);
            text.push('\n');
        }
        let got = decode(vec![Bytes::from(text)]);
        prop_assert_eq!(got.len(), which + 1);
        prop_assert_eq!(
            got.last(),
            Some(&Got::Err { transport: false, decode: false, protocol: true })
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_errors_come_last(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        cuts in prop::collection::vec(any::<usize>(), 0..20),
    ) {
        let got = decode(split(&bytes, &cuts));
        let errors = got.iter().filter(|g| matches!(g, Got::Err { .. })).count();
        prop_assert!(errors <= 1);
        if errors == 1 {
            let last_is_error = matches!(got.last(), Some(Got::Err { .. }));
            prop_assert!(last_is_error, "{:?}", got);
        }
    }
}

#[test]
fn a_frame_over_the_limit_is_a_decode_error() {
    let line = format!("{}\n", "x".repeat(100));
    let s = stream::iter([Ok::<_, Infallible>(Bytes::from(line))]);
    let got: Vec<_> = block_on(
        watch_events::<ConfigMap, _, _, _>(s, Typed::new(), 64)
            .map(summarise)
            .collect(),
    );
    assert_eq!(
        got,
        [Got::Err {
            transport: false,
            decode: true,
            protocol: false
        }]
    );
}

#[test]
fn a_broken_body_is_a_transport_error_after_the_complete_events() {
    let first = encode(&Ev {
        ty: "ADDED",
        name: "a".into(),
        rv: 1,
        value: String::new(),
    });
    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(Bytes::from(format!("{first}\n{{\"type\""))),
        Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        Ok(Bytes::from_static(b"never read\n")),
    ];
    let got: Vec<_> = block_on(
        watch_events::<ConfigMap, _, _, _>(stream::iter(chunks), Typed::new(), 1 << 20)
            .map(summarise)
            .collect(),
    );
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        got[1],
        Got::Err {
            transport: true,
            decode: false,
            protocol: false
        }
    );
}
