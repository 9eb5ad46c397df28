//! Stored objects: the JSON value plus its serialised bytes, shared as `Arc`.

use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::Value;

use crate::status::ApiError;

/// One stored object version: its JSON (with `metadata.resourceVersion` set) and the
/// same JSON serialised once, so that lists and watches never re-encode it.
///
/// Two encodings are kept: the full object (`kind` and `apiVersion` first, as GET and
/// watch events carry it) and the list-item form without `kind`/`apiVersion` (list items
/// carry neither on kube-apiserver).
///
/// The protobuf message of built-in kinds is encoded on first use and kept too (a JSON-only
/// server never pays for it; many protobuf watchers share one encoding).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredObject {
    value: Value,
    json: Bytes,
    item: Bytes,
    rv: u64,
    proto: ProtoCache,
}

/// The lazily encoded protobuf message (or why it cannot be encoded). Not part of equality:
/// two equal objects are equal whether or not one was encoded.
#[derive(Debug, Clone, Default)]
struct ProtoCache(OnceLock<Result<Bytes, String>>);

impl PartialEq for ProtoCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

fn encode(value: &Value) -> (Bytes, Bytes) {
    let mut rest = value.clone();
    let (kind, api_version) = match rest.as_object_mut() {
        Some(m) => (m.remove("kind"), m.remove("apiVersion")),
        None => (None, None),
    };
    let item = serde_json::to_vec(&rest).unwrap_or_default();
    let (Some(kind), Some(api_version)) = (kind, api_version) else {
        let item = Bytes::from(item);
        return (item.clone(), item);
    };
    let mut full = Vec::with_capacity(item.len() + 64);
    full.extend_from_slice(b"{\"kind\":");
    full.extend_from_slice(&serde_json::to_vec(&kind).unwrap_or_default());
    full.extend_from_slice(b",\"apiVersion\":");
    full.extend_from_slice(&serde_json::to_vec(&api_version).unwrap_or_default());
    if item.len() > 2 {
        full.push(b',');
        full.extend_from_slice(&item[1..]);
    } else {
        full.push(b'}');
    }
    (Bytes::from(full), Bytes::from(item))
}

impl StoredObject {
    /// Wraps `value`, stamping `metadata.resourceVersion = rv`.
    #[must_use]
    pub(crate) fn new(mut value: Value, rv: u64) -> Self {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let (json, item) = encode(&value);
        Self {
            value,
            json,
            item,
            rv,
            proto: ProtoCache::default(),
        }
    }

    /// Wraps `value` as is, for objects that were not stored (dry runs): no
    /// resourceVersion is stamped and [`rv`](Self::rv) is 0.
    #[must_use]
    pub(crate) fn without_rv(mut value: Value) -> Self {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        let (json, item) = encode(&value);
        Self {
            value,
            json,
            item,
            rv: 0,
            proto: ProtoCache::default(),
        }
    }

    /// The object as JSON.
    #[must_use]
    pub(crate) fn value(&self) -> &Value {
        &self.value
    }

    /// The object serialised as compact JSON.
    #[must_use]
    pub(crate) fn json(&self) -> &Bytes {
        &self.json
    }

    /// The object serialised without `kind` and `apiVersion`, as list items are.
    #[must_use]
    pub(crate) fn item_json(&self) -> &Bytes {
        &self.item
    }

    /// The object's protobuf message (the `raw` of its `k8s\0` envelope, also a list item),
    /// encoded on first use.
    ///
    /// # Errors
    ///
    /// 500 when the kind has no protobuf type or the JSON does not fit it.
    pub(crate) fn protobuf(&self) -> Result<&Bytes, ApiError> {
        self.proto
            .0
            .get_or_init(|| crate::http::protobuf::encode::object_message(&self.value))
            .as_ref()
            .map_err(|why| {
                ApiError::internal(format!("cannot encode the object as protobuf: {why}"))
            })
    }

    /// The object's resourceVersion.
    #[must_use]
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    /// `metadata.name` (empty when absent).
    #[must_use]
    pub(crate) fn name(&self) -> &str {
        meta_str(&self.value, "name")
    }

    /// `metadata.namespace` (empty when absent).
    #[must_use]
    pub(crate) fn namespace(&self) -> &str {
        meta_str(&self.value, "namespace")
    }
}

/// A string field of `metadata`, or `""`.
#[must_use]
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The storage key of an object: `namespace/name`, or `name` when cluster-scoped.
#[must_use]
pub(crate) fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}
