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
use kcache_proto::apimachinery::pkg::runtime::RawExtension;
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
/// has `metadata` as field 1 and `items` as field 2).
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
    let raws = items
        .iter()
        .map(|o| o.protobuf().cloned())
        .collect::<Result<Vec<_>, _>>()?;
    let body_len = 2
        + meta.encoded_len()
        + raws
            .iter()
            .map(|r| 1 + prost::encoding::encoded_len_varint(r.len() as u64) + r.len())
            .sum::<usize>();
    let mut buf = BytesMut::with_capacity(body_len);
    prost::encoding::message::encode(1, meta, &mut buf);
    for r in &raws {
        prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, &mut buf);
        prost::encoding::encode_varint(r.len() as u64, &mut buf);
        buf.put_slice(r);
    }
    Ok(envelope(api_version, list_kind, buf.freeze()))
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
