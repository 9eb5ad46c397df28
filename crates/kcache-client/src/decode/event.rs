//! Watch events (`{"type":"ADDED","object":{…}}`) decoded in one pass.

use std::{fmt, marker::PhantomData};

use kube_core::{Status, WatchEvent, watch::Bookmark};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::{
    item::{ItemDecoder, ItemSeed},
    strip::Key,
};

/// Why a watch frame could not be turned into a [`WatchEvent`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum EventError {
    /// The frame is not valid JSON, or its object is not a valid `K` / `Status` / bookmark.
    #[error("invalid watch event: {0}")]
    Json(#[from] serde_json::Error),
    /// The `type` is not one of ADDED, MODIFIED, DELETED, BOOKMARK, ERROR.
    #[error("unknown watch event type {0:?}")]
    UnknownType(String),
    /// The frame has no `type` or no `object`.
    #[error("watch event without {0:?}")]
    Missing(&'static str),
    /// An `ERROR` event whose object is not a `Status`: what arrived instead (`kind ConfigMap`,
    /// `null`, an escaped excerpt of a string), already safe to show.
    #[error("ERROR watch event whose object is not a Status: {0}")]
    NotStatus(String),
}

/// The five event types of the watch protocol.
#[derive(Clone, Copy)]
enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADDED" => Self::Added,
            "MODIFIED" => Self::Modified,
            "DELETED" => Self::Deleted,
            "BOOKMARK" => Self::Bookmark,
            "ERROR" => Self::Error,
            _ => return None,
        })
    }
}

/// Decodes one watch frame (one line of the stream, without its newline).
///
/// ADDED/MODIFIED/DELETED objects are decoded with `decoder`, BOOKMARK objects into kube-core's
/// [`Bookmark`] and ERROR objects into [`WatchEvent::Error`] carrying the server's [`Status`]
/// (an object of kind `Status`, or without kind but with Status fields: `code`, `reason`,
/// `message`, `status`).
/// `type` normally precedes `object`; if it does not, the object is kept as a borrowed slice of
/// the frame and decoded once the type is known.
///
/// # Errors
/// [`EventError::UnknownType`] for an event type outside the protocol, [`EventError::Missing`]
/// without `type` or `object`, [`EventError::NotStatus`] for an ERROR event whose object is not
/// a `Status`, [`EventError::Json`] for invalid JSON or a mismatching object.
pub(crate) fn decode_event<K, D: ItemDecoder<K>>(
    frame: &[u8],
    decoder: &D,
) -> Result<WatchEvent<K>, EventError> {
    if let Some(event) = object_event_as_written(frame, decoder) {
        return Ok(event);
    }
    let mut de = serde_json::Deserializer::from_slice(frame);
    let parsed = EventSeed {
        decoder,
        _k: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    match parsed {
        Parsed::Event(Decoded::Event(event)) => Ok(event),
        Parsed::Event(Decoded::NotStatus(what)) => Err(EventError::NotStatus(what)),
        Parsed::Deferred(ty, raw) => {
            let mut de = serde_json::Deserializer::from_str(raw.get());
            let event = decode_object(ty, &mut de, decoder)?;
            de.end()?;
            match event {
                Decoded::Event(event) => Ok(event),
                Decoded::NotStatus(what) => Err(EventError::NotStatus(what)),
            }
        }
        Parsed::UnknownType(ty) => Err(EventError::UnknownType(ty)),
        Parsed::Missing(what) => Err(EventError::Missing(what)),
    }
}

/// Makes an object event (`WatchEvent::Added` …) of its object.
type ObjectEvent<K> = fn(K) -> WatchEvent<K>;

/// The object event of a frame written as kube-apiserver writes them,
/// `{"type":"ADDED|MODIFIED|DELETED","object":{…}}` with nothing else, decoded by the
/// decoder's [`ItemDecoder::decode_json_event_object`]. `None` for any other frame, a decoder
/// without that path, or an object it does not take: the frame is then parsed as a whole.
fn object_event_as_written<K, D: ItemDecoder<K>>(
    frame: &[u8],
    decoder: &D,
) -> Option<WatchEvent<K>> {
    let rest = frame.strip_prefix(b"{\"type\":\"")?;
    let kinds: [(&[u8], ObjectEvent<K>); 3] = [
        (b"ADDED", WatchEvent::Added),
        (b"MODIFIED", WatchEvent::Modified),
        (b"DELETED", WatchEvent::Deleted),
    ];
    let (event, rest) = kinds.into_iter().find_map(|(name, event)| {
        let rest = rest.strip_prefix(name)?.strip_prefix(b"\",\"object\":")?;
        Some((event, rest))
    })?;
    let (object, len) = decoder.decode_json_event_object(rest)?;
    (rest[len..].trim_ascii() == b"}").then(|| event(object))
}

/// An event's object, decoded: the event, or what an ERROR event carried instead of a Status.
enum Decoded<K> {
    Event(WatchEvent<K>),
    NotStatus(String),
}

fn decode_object<'de, K, D: ItemDecoder<K>, De: Deserializer<'de>>(
    ty: EventType,
    de: De,
    decoder: &D,
) -> Result<Decoded<K>, De::Error> {
    let seed = ItemSeed::new(decoder);
    Ok(Decoded::Event(match ty {
        EventType::Added => WatchEvent::Added(seed.deserialize(de)?),
        EventType::Modified => WatchEvent::Modified(seed.deserialize(de)?),
        EventType::Deleted => WatchEvent::Deleted(seed.deserialize(de)?),
        EventType::Bookmark => {
            WatchEvent::Bookmark(<Bookmark as de::Deserialize>::deserialize(de)?)
        }
        EventType::Error => {
            let object = <serde_json::Value as de::Deserialize>::deserialize(de)?;
            let mut status = match error_status(object) {
                Ok(status) => status,
                Err(what) => return Ok(Decoded::NotStatus(what)),
            };
            // The server's (or a proxy's) words: printable, short and credential-free.
            crate::redact::sanitize_status(&mut status);
            WatchEvent::Error(Box::new(status))
        }
    }))
}

/// At most this many bytes of what arrived instead of a Status reach an error.
const MAX_NOT_STATUS: usize = 120;

/// The `Status` of an ERROR event, or what the object is instead, safe to show.
fn error_status(object: serde_json::Value) -> Result<Status, String> {
    use serde_json::Value;
    let safe = |text: &str| crate::redact::display_safe(text, MAX_NOT_STATUS);
    let fields = match &object {
        Value::Object(fields) => fields,
        Value::Null => return Err("null".to_owned()),
        Value::Bool(b) => return Err(format!("a boolean: {b}")),
        Value::Number(n) => return Err(format!("a number: {}", safe(&n.to_string()))),
        Value::String(s) => return Err(format!("a string: \"{}\"", safe(s))),
        Value::Array(items) => return Err(format!("an array of {} items", items.len())),
    };
    match fields.get("kind") {
        Some(Value::String(kind)) if kind == "Status" => {}
        Some(Value::String(kind)) => return Err(format!("kind {}", safe(kind))),
        Some(_) => return Err("an object whose kind is not a string".to_owned()),
        // Without kind, Status fields make it one (a proxy may drop `kind`).
        None if ["code", "reason", "message", "status"]
            .iter()
            .any(|f| fields.contains_key(*f)) => {}
        None => {
            let mut keys: Vec<&str> = fields.keys().map(String::as_str).take(8).collect();
            keys.sort_unstable();
            return Err(if keys.is_empty() {
                "an object without kind, empty".to_owned()
            } else {
                format!("an object without kind, with {}", safe(&keys.join(", ")))
            });
        }
    }
    serde_json::from_value(object)
        .map_err(|e| format!("a Status that cannot be decoded: {}", safe(&e.to_string())))
}

enum Parsed<'de, K> {
    Event(Decoded<K>),
    Deferred(EventType, &'de RawValue),
    UnknownType(String),
    Missing(&'static str),
}

struct EventSeed<'a, K, D> {
    decoder: &'a D,
    _k: PhantomData<fn() -> K>,
}

impl<'de, K, D: ItemDecoder<K>> DeserializeSeed<'de> for EventSeed<'_, K, D> {
    type Value = Parsed<'de, K>;

    fn deserialize<De: Deserializer<'de>>(self, d: De) -> Result<Self::Value, De::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K, D: ItemDecoder<K>> Visitor<'de> for EventSeed<'_, K, D> {
    type Value = Parsed<'de, K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut ty: Option<Result<EventType, String>> = None;
        let mut event: Option<Decoded<K>> = None;
        let mut deferred: Option<&'de RawValue> = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "type" => {
                    if ty.is_some() {
                        return Err(de::Error::duplicate_field("type"));
                    }
                    let s = map.next_value::<Key<'de>>()?;
                    ty = Some(EventType::parse(s.as_str()).ok_or_else(|| s.as_str().to_owned()));
                }
                "object" => {
                    if event.is_some() || deferred.is_some() {
                        return Err(de::Error::duplicate_field("object"));
                    }
                    match &ty {
                        Some(Ok(t)) => {
                            event = Some(map.next_value_seed(ObjectSeed {
                                ty: *t,
                                decoder: self.decoder,
                                _k: PhantomData,
                            })?);
                        }
                        Some(Err(_)) => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        None => deferred = Some(map.next_value::<&'de RawValue>()?),
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(match (ty, event, deferred) {
            (None, _, _) => Parsed::Missing("type"),
            (Some(Err(unknown)), _, _) => Parsed::UnknownType(unknown),
            (Some(Ok(_)), Some(event), _) => Parsed::Event(event),
            (Some(Ok(t)), None, Some(raw)) => Parsed::Deferred(t, raw),
            (Some(Ok(_)), None, None) => Parsed::Missing("object"),
        })
    }
}

struct ObjectSeed<'a, K, D> {
    ty: EventType,
    decoder: &'a D,
    _k: PhantomData<fn() -> K>,
}

impl<'de, K, D: ItemDecoder<K>> DeserializeSeed<'de> for ObjectSeed<'_, K, D> {
    type Value = Decoded<K>;

    fn deserialize<De: Deserializer<'de>>(self, d: De) -> Result<Self::Value, De::Error> {
        decode_object(self.ty, d, self.decoder)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::decode::Typed;

    fn decode(frame: &str) -> Result<WatchEvent<ConfigMap>, EventError> {
        decode_event(frame.as_bytes(), &Typed::new())
    }

    #[test]
    fn decodes_the_five_event_types() {
        let obj = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"5"}}"#;
        for (ty, check) in [
            (
                "ADDED",
                (|e| matches!(e, WatchEvent::Added(_))) as fn(&WatchEvent<ConfigMap>) -> bool,
            ),
            ("MODIFIED", |e| matches!(e, WatchEvent::Modified(_))),
            ("DELETED", |e| matches!(e, WatchEvent::Deleted(_))),
            (
                "BOOKMARK",
                |e| matches!(e, WatchEvent::Bookmark(b) if b.metadata.resource_version == "5"),
            ),
        ] {
            let event = decode(&format!(r#"{{"type":"{ty}","object":{obj}}}"#)).unwrap();
            assert!(check(&event), "{ty}: {event:?}");
        }
        let err = decode(
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (6)","reason":"Expired","code":410}}"#,
        )
        .unwrap();
        let WatchEvent::Error(status) = err else {
            panic!("{err:?}")
        };
        assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    }

    /// The frame shapes kube-apiserver writes take the decoder's one-pass object path; every
    /// other shape goes through the event's parser; both decode the same event.
    #[test]
    fn object_events_as_written_are_read_apart_with_the_same_result() {
        use crate::compact::{Compact, CompactDecoder};
        let obj = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"n","resourceVersion":"7","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}"#;
        let lean = CompactDecoder::new();
        let as_written = format!(r#"{{"type":"MODIFIED","object":{obj}}}"#);
        let fast = object_event_as_written::<Compact<ConfigMap>, _>(as_written.as_bytes(), &lean);
        let Some(WatchEvent::Modified(fast)) = fast else {
            panic!("the written shape takes the one-pass path: {fast:?}")
        };
        assert_eq!(
            fast.json(),
            Some(obj.as_bytes()),
            "the object's bytes, verbatim"
        );
        assert_eq!(fast.metadata().resource_version.as_deref(), Some("7"));
        assert!(fast.metadata().managed_fields.is_none());
        for other in [
            format!(r#"{{"object":{obj},"type":"MODIFIED"}}"#),
            format!(r#"{{ "type":"MODIFIED","object":{obj}}}"#),
            format!(r#"{{"type":"MODIFIED","object":{obj},"extra":1}}"#),
        ] {
            assert!(
                object_event_as_written::<Compact<ConfigMap>, _>(other.as_bytes(), &lean).is_none(),
                "{other}"
            );
            let Ok(WatchEvent::Modified(slow)) =
                decode_event::<Compact<ConfigMap>, _>(other.as_bytes(), &lean)
            else {
                panic!("{other}")
            };
            assert_eq!(
                (slow.json(), slow.metadata()),
                (fast.json(), fast.metadata())
            );
        }
        // Trailing whitespace is still the written shape; the typed decoder has no such path.
        let spaced = format!("{as_written} \r");
        assert!(
            object_event_as_written::<Compact<ConfigMap>, _>(spaced.as_bytes(), &lean).is_some()
        );
        assert!(
            object_event_as_written::<ConfigMap, _>(as_written.as_bytes(), &Typed::new()).is_none()
        );
        assert!(
            matches!(decode(&as_written), Ok(WatchEvent::Modified(cm)) if cm.data.as_ref().is_some_and(|d| d["k"] == "v"))
        );
    }

    /// A frame in the written shape whose object is broken fails as before: the event's
    /// parser reports it.
    #[test]
    fn broken_objects_in_the_written_shape_are_errors() {
        use crate::compact::{Compact, CompactDecoder};
        let lean = CompactDecoder::new();
        for frame in [
            &br#"{"type":"ADDED","object":{"metadata":{"name":1}}}"#[..],
            br#"{"type":"ADDED","object":{"metadata":{"name":"a"},"spec":{}"#,
            br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}}"#,
            b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"\xff\"}}}",
            br#"{"type":"DELETED","object":[1]}"#,
        ] {
            let decoded = decode_event::<Compact<ConfigMap>, _>(frame, &lean);
            assert!(
                matches!(decoded, Err(EventError::Json(_))),
                "{}: {decoded:?}",
                String::from_utf8_lossy(frame)
            );
        }
    }

    #[test]
    fn error_event_whose_object_is_not_a_status_says_what_arrived() {
        let cm = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}"#;
        for (object, says) in [
            (cm, "kind ConfigMap"),
            (r#"{"metadata":{"name":"a"}}"#, "an object without kind"),
            (r#"{}"#, "an object without kind"),
            ("\"garbage\\u001b[2J\"", "a string: \"garbage\\u{1b}[2J\""),
            ("null", "null"),
            ("[1,2]", "an array"),
            ("42", "a number"),
        ] {
            for frame in [
                format!(r#"{{"type":"ERROR","object":{object}}}"#),
                format!(r#"{{"object":{object},"type":"ERROR"}}"#),
            ] {
                let err = match decode(&frame) {
                    Ok(event) => {
                        let shown = match &event {
                            WatchEvent::Error(s) => {
                                kcache::lister_watcher::Error::api((**s).clone(), None).to_string()
                            }
                            other => format!("{other:?}"),
                        };
                        panic!("{frame}: decoded, and shown as {shown:?}")
                    }
                    Err(e) => e.to_string(),
                };
                assert!(
                    err.contains("ERROR watch event whose object is not a Status: "),
                    "{frame}: {err}"
                );
                assert!(err.contains(says), "{frame}: {err}");
                assert!(!err.chars().any(char::is_control), "{err:?}");
            }
        }
        // A Status without kind (some proxies drop it) is still a Status.
        let event = decode(r#"{"type":"ERROR","object":{"code":410,"reason":"Expired"}}"#).unwrap();
        assert!(matches!(event, WatchEvent::Error(s) if s.code == 410));
    }

    #[tokio::test]
    async fn an_error_event_that_is_not_a_status_ends_the_watch_with_a_decode_error() {
        use futures::StreamExt;
        let frame = r#"{"type":"ERROR","object":{"kind":"ConfigMap","apiVersion":"v1"}}"#;
        let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(format!(
            "{frame}\n"
        )))]);
        let mut events = crate::decode::watch_events::<ConfigMap, _, _, _>(
            body,
            Typed::new(),
            crate::decode::DEFAULT_MAX_FRAME_SIZE,
        );
        let err = events.next().await.unwrap().unwrap_err();
        assert!(err.is_decode(), "{err}");
        assert_eq!(
            err.to_string(),
            "decode error: ERROR watch event whose object is not a Status: kind ConfigMap"
        );
        assert!(events.next().await.is_none());
    }

    #[test]
    fn error_event_with_a_huge_retry_after_seconds_has_no_retry_after() {
        let frame = |n: u32| {
            format!(
                r#"{{"type":"ERROR","object":{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"slow down","reason":"TooManyRequests","details":{{"retryAfterSeconds":{n}}},"code":429}}}}"#
            )
        };
        let retry_after = |n: u32| {
            let WatchEvent::Error(status) = decode(&frame(n)).unwrap() else {
                panic!("not an ERROR event")
            };
            kcache::lister_watcher::Error::api(*status, None).retry_after()
        };
        assert_eq!(retry_after(u32::MAX), None);
        assert_eq!(retry_after(31), None);
        assert_eq!(retry_after(5), Some(std::time::Duration::from_secs(5)));
    }

    #[test]
    fn object_before_type_is_decoded_after_the_type_is_known() {
        let event = decode(r#"{"object":{"metadata":{"name":"late"}},"type":"MODIFIED"}"#).unwrap();
        let WatchEvent::Modified(cm) = event else {
            panic!("{event:?}")
        };
        assert_eq!(cm.metadata.name.as_deref(), Some("late"));
    }

    #[test]
    fn unknown_event_type_is_a_distinct_error() {
        let err = decode(r#"{"type":"RENAMED","object":{}}"#).unwrap_err();
        assert!(
            matches!(err, EventError::UnknownType(ref t) if t == "RENAMED"),
            "{err}"
        );
    }

    #[test]
    fn missing_parts_and_bad_json_are_errors() {
        assert!(matches!(
            decode(r#"{"object":{}}"#),
            Err(EventError::Missing("type"))
        ));
        assert!(matches!(
            decode(r#"{"type":"ADDED"}"#),
            Err(EventError::Missing("object"))
        ));
        assert!(matches!(
            decode(r#"{"type":"ADDED","object":{"#),
            Err(EventError::Json(_))
        ));
        assert!(matches!(
            decode(r#"{"type":"ADDED","object":{"data":1}}"#),
            Err(EventError::Json(_))
        ));
        assert!(matches!(decode(r#"[1]"#), Err(EventError::Json(_))));
    }
}
