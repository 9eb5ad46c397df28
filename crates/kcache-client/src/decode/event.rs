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
pub enum EventError {
    /// The frame is not valid JSON, or its object is not a valid `K` / `Status` / bookmark.
    #[error("invalid watch event: {0}")]
    Json(#[from] serde_json::Error),
    /// The `type` is not one of ADDED, MODIFIED, DELETED, BOOKMARK, ERROR.
    #[error("unknown watch event type {0:?}")]
    UnknownType(String),
    /// The frame has no `type` or no `object`.
    #[error("watch event without {0:?}")]
    Missing(&'static str),
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
/// [`Bookmark`] and ERROR objects into [`WatchEvent::Error`] carrying the server's [`Status`].
/// `type` normally precedes `object`; if it does not, the object is kept as a borrowed slice of
/// the frame and decoded once the type is known.
///
/// # Errors
/// [`EventError::UnknownType`] for an event type outside the protocol, [`EventError::Missing`]
/// without `type` or `object`, [`EventError::Json`] for invalid JSON or a mismatching object.
pub fn decode_event<K, D: ItemDecoder<K>>(
    frame: &[u8],
    decoder: &D,
) -> Result<WatchEvent<K>, EventError> {
    let mut de = serde_json::Deserializer::from_slice(frame);
    let parsed = EventSeed {
        decoder,
        _k: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    match parsed {
        Parsed::Event(event) => Ok(event),
        Parsed::Deferred(ty, raw) => {
            let mut de = serde_json::Deserializer::from_str(raw.get());
            let event = decode_object(ty, &mut de, decoder)?;
            de.end()?;
            Ok(event)
        }
        Parsed::UnknownType(ty) => Err(EventError::UnknownType(ty)),
        Parsed::Missing(what) => Err(EventError::Missing(what)),
    }
}

fn decode_object<'de, K, D: ItemDecoder<K>, De: Deserializer<'de>>(
    ty: EventType,
    de: De,
    decoder: &D,
) -> Result<WatchEvent<K>, De::Error> {
    let seed = ItemSeed::new(decoder);
    Ok(match ty {
        EventType::Added => WatchEvent::Added(seed.deserialize(de)?),
        EventType::Modified => WatchEvent::Modified(seed.deserialize(de)?),
        EventType::Deleted => WatchEvent::Deleted(seed.deserialize(de)?),
        EventType::Bookmark => {
            WatchEvent::Bookmark(<Bookmark as de::Deserialize>::deserialize(de)?)
        }
        EventType::Error => {
            let mut status = <Status as de::Deserialize>::deserialize(de)?;
            // The server's (or a proxy's) words: printable, short and credential-free.
            crate::client::sanitize_status(&mut status);
            WatchEvent::Error(Box::new(status))
        }
    })
}

enum Parsed<'de, K> {
    Event(WatchEvent<K>),
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
        let mut event: Option<WatchEvent<K>> = None;
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
    type Value = WatchEvent<K>;

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
