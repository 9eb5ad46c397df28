//! Protobuf responses, encoded as kube-apiserver v1.36 encodes them
//! (`k8s.io/apimachinery/pkg/runtime/serializer/protobuf`, `pkg/apis/meta/v1/watch.go`):
//!
//! - an object, list or `Status`: the magic `k8s\0`, then a `runtime.Unknown` with
//!   `typeMeta {apiVersion, kind}`, `raw` (the message) and empty `contentEncoding` and
//!   `contentType`;
//! - a list: `XList { metadata: ListMeta (1), items (2) }`, the items being the objects'
//!   messages (each cached on its [`StoredObject`]);
//! - a watch event: a 4-byte big-endian length, then a `meta.v1.WatchEvent { type (1), object
//!   (2): RawExtension { raw (1): the object's k8s\0 envelope } }` (no magic on the frame
//!   itself), as the recorded kube-apiserver streams show.
//!
//! An object's message comes from its JSON through k8s-openapi and the generated conversions
//! of `kcache-proto` ([`kcache_proto::encode_json`]) for core/v1, apps/v1 and
//! coordination/v1, and by the upstream schema table (`schema.rs`) for the other built-in
//! kinds; fields the JSON does not have are absent on the wire, where Go writes zero values,
//! which decode the same.

use bytes::{BufMut, Bytes, BytesMut};
use kcache_proto::Envelope;
use kcache_proto::apimachinery::pkg::apis::meta::v1 as meta;
use kcache_proto::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use prost::Message;
use serde_json::Value;

use crate::object::StoredObject;
use crate::status::ApiError;

/// An object's protobuf message (no envelope), from its JSON.
///
/// # Errors
///
/// A message for the log when the kind has no protobuf type or the JSON does not fit it.
pub(crate) fn object_message(value: &Value) -> Result<Bytes, String> {
    let field = |f: &str| value.get(f).and_then(Value::as_str).unwrap_or("");
    if !kcache_proto::kind_is_supported(field("apiVersion"), field("kind"))
        && let Some(message) = super::schema::message_for(field("apiVersion"), field("kind"))
    {
        // The other built-in kinds: by the upstream schema table.
        return super::schema_encode::encode(&message, value).map(Bytes::from);
    }
    kcache_proto::encode_json(field("apiVersion"), field("kind"), value)
        .map(Bytes::from)
        .map_err(|e| {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg = format!("{msg}: {s}");
                src = s.source();
            }
            msg
        })
}

/// `k8s\0` + `runtime.Unknown` around `raw`.
#[must_use]
pub(crate) fn envelope(api_version: &str, kind: &str, raw: Bytes) -> Bytes {
    Envelope {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        raw,
        content_type: String::new(),
    }
    .encode_to_bytes()
}

fn type_of(obj: &StoredObject) -> (&str, &str) {
    obj.type_meta()
}

/// The enveloped object, as GET and write responses and watch events carry it.
///
/// # Errors
///
/// 500 when the stored JSON cannot be encoded (it does not fit its kind's schema).
pub(crate) fn object(obj: &StoredObject) -> Result<Bytes, ApiError> {
    let raw = obj.protobuf()?;
    let (api_version, kind) = type_of(obj);
    Ok(envelope(api_version, kind, raw.clone()))
}

/// The enveloped `Status` of an error.
#[must_use]
pub(crate) fn status(err: &ApiError) -> Bytes {
    status_value(&err.to_status())
}

/// The enveloped `Status` from its JSON (an empty message if it is not one).
#[must_use]
pub(crate) fn status_value(status: &Value) -> Bytes {
    let raw = kcache_proto::encode_status_json(status).unwrap_or_default();
    envelope("v1", "Status", Bytes::from(raw))
}

/// `meta.v1.ListMeta` of a list.
#[must_use]
pub(crate) fn list_meta(rv: u64, cont: Option<&str>, remaining: Option<u64>) -> meta::ListMeta {
    meta::ListMeta {
        resource_version: Some(rv.to_string()),
        r#continue: cont.map(str::to_owned),
        remaining_item_count: remaining.and_then(|r| i64::try_from(r).ok()),
        ..Default::default()
    }
}

/// The enveloped `<Kind>List { metadata, items }` (every list kind of the generated packages
/// has `metadata` as field 1 and `items` as field 2), in one buffer.
///
/// # Errors
///
/// 500 when an item cannot be encoded.
pub(crate) fn list(
    api_version: &str,
    list_kind: &str,
    meta: &meta::ListMeta,
    items: &[std::sync::Arc<StoredObject>],
) -> Result<Bytes, ApiError> {
    let mut buf = BytesMut::new();
    for chunk in list_chunks(api_version, list_kind, meta, items)? {
        buf.put_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Items per chunk of a streamed list body.
const CHUNK_ITEMS: usize = 256;

/// The same bytes as [`list`], as chunks to stream: the envelope's head and the `ListMeta`,
/// then the items, [`CHUNK_ITEMS`] at a time, then the envelope's tail. Only one chunk of
/// items is copied at a time (the items' messages are cached on their objects), as
/// kube-apiserver's streaming collection encoder (on by default since v1.33) writes a list
/// item by item instead of building it whole.
///
/// # Errors
///
/// 500 when an item cannot be encoded.
pub(crate) fn list_chunks(
    api_version: &str,
    list_kind: &str,
    meta: &meta::ListMeta,
    items: &[std::sync::Arc<StoredObject>],
) -> Result<impl Iterator<Item = Bytes> + Send + 'static, ApiError> {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
    let raws = items
        .iter()
        .map(|o| o.protobuf().cloned())
        .collect::<Result<Vec<_>, _>>()?;
    let item_len = |r: &Bytes| 1 + encoded_len_varint(r.len() as u64) + r.len();
    let meta_len = 1 + encoded_len_varint(meta.encoded_len() as u64) + meta.encoded_len();
    let body_len = meta_len + raws.iter().map(item_len).sum::<usize>();
    // `runtime.Unknown`'s fields in tag order, each on its own: typeMeta (1), raw (2),
    // contentEncoding (3) and contentType (4), as `Envelope::encode_to_bytes` writes them.
    let type_meta = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(list_kind.to_owned()),
        }),
        ..Unknown::default()
    };
    let mut head = BytesMut::new();
    head.put_slice(&kcache_proto::envelope::MAGIC);
    type_meta.encode_raw(&mut head);
    encode_key(2, WireType::LengthDelimited, &mut head);
    encode_varint(body_len as u64, &mut head);
    prost::encoding::message::encode(1, meta, &mut head);
    let tail = Unknown {
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
        ..Unknown::default()
    }
    .encode_to_vec();
    let n = raws.len();
    let chunks = (0..n.div_ceil(CHUNK_ITEMS)).map(move |c| {
        let slice = &raws[c * CHUNK_ITEMS..((c + 1) * CHUNK_ITEMS).min(n)];
        let mut buf = BytesMut::with_capacity(slice.iter().map(item_len).sum());
        for r in slice {
            encode_key(2, WireType::LengthDelimited, &mut buf);
            encode_varint(r.len() as u64, &mut buf);
            buf.put_slice(r);
        }
        buf.freeze()
    });
    Ok(std::iter::once(head.freeze())
        .chain(chunks)
        .chain(std::iter::once(Bytes::from(tail))))
}

/// A bookmark's object: only `metadata` (field 1 of every top-level kind) with the RV and,
/// at the end of a streaming list, the `k8s.io/initial-events-end` annotation.
#[must_use]
pub(crate) fn bookmark_object(api_version: &str, kind: &str, rv: u64, initial_end: bool) -> Bytes {
    let mut m = meta::ObjectMeta {
        resource_version: Some(rv.to_string()),
        ..Default::default()
    };
    if initial_end {
        m.annotations
            .insert("k8s.io/initial-events-end".into(), "true".into());
    }
    let mut raw = BytesMut::new();
    prost::encoding::message::encode(1, &m, &mut raw);
    envelope(api_version, kind, raw.freeze())
}

/// One watch frame: the 4-byte big-endian length, then the `WatchEvent`.
#[must_use]
pub(crate) fn watch_frame(event_type: &str, object_envelope: Bytes) -> Bytes {
    let ev = meta::WatchEvent {
        r#type: Some(event_type.to_owned()),
        object: Some(RawExtension {
            raw: Some(object_envelope),
        }),
    };
    let len = ev.encoded_len();
    let mut buf = BytesMut::with_capacity(4 + len);
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    ev.encode(&mut buf)
        .unwrap_or_else(|_| unreachable!("BytesMut grows as needed"));
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn pods(n: usize) -> Vec<Arc<StoredObject>> {
        (0..n)
            .map(|i| {
                let pod = json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("p-{i}"), "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
                Arc::new(StoredObject::new(pod, 10 + i as u64))
            })
            .collect()
    }

    /// The streamed chunks are the one-buffer envelope, byte for byte, for an empty list, a
    /// list shorter than a chunk and one of several chunks; and the envelope decodes.
    #[test]
    fn streamed_list_is_the_enveloped_list_byte_for_byte() {
        for n in [0, 3, 2 * CHUNK_ITEMS + 5] {
            let items = pods(n);
            let meta = list_meta(42, Some("token"), Some(7));
            let streamed: Vec<u8> = list_chunks("v1", "PodList", &meta, &items)
                .unwrap()
                .flat_map(|c| c.to_vec())
                .collect();
            let mut raw = BytesMut::new();
            prost::encoding::message::encode(1, &meta, &mut raw);
            for o in &items {
                let m = o.protobuf().unwrap();
                prost::encoding::encode_key(
                    2,
                    prost::encoding::WireType::LengthDelimited,
                    &mut raw,
                );
                prost::encoding::encode_varint(m.len() as u64, &mut raw);
                raw.put_slice(m);
            }
            let whole = envelope("v1", "PodList", raw.freeze());
            assert_eq!(streamed, whole.to_vec(), "{n} items");
            let env = kcache_proto::Envelope::decode(Bytes::from(streamed)).unwrap();
            assert_eq!(
                (env.api_version.as_str(), env.kind.as_str()),
                ("v1", "PodList")
            );
        }
    }
}
