//! Stored objects: the serialised JSON and what routing needs (name, namespace,
//! resourceVersion), shared as `Arc`. The JSON value is parsed on demand: a stored pod
//! costs its bytes, not a `serde_json::Value` tree (about 8× the bytes).
//!
//! [`protobuf`]: the Kubernetes protobuf encoding of objects (and of the lists, `Status`
//! errors and watch frames that carry them), below the HTTP front that negotiates it.

pub(crate) mod protobuf;

use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::Value;

use crate::status::ApiError;

/// One stored object version: its JSON (with `metadata.resourceVersion` set), serialised
/// once with `kind` and `apiVersion` first, as GET and watch events carry it; the list-item
/// form (without `kind`/`apiVersion`, as kube-apiserver's list items) is the same bytes
/// after those two fields, so lists never re-encode either.
///
/// The protobuf message of built-in kinds is encoded on first use and kept too (a JSON-only
/// server never pays for it; many protobuf watchers share one encoding).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredObject {
    json: Bytes,
    /// Where the fields after `kind` and `apiVersion` start in `json` (0: the object has no
    /// type fields, and the item form is `json` itself).
    rest: usize,
    name: Box<str>,
    namespace: Box<str>,
    api_version: Box<str>,
    kind: Box<str>,
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

/// The full JSON with `kind` and `apiVersion` first, and where the rest starts.
fn encode(value: &Value) -> (Bytes, usize) {
    let mut rest = value.clone();
    let (kind, api_version) = match rest.as_object_mut() {
        Some(m) => (m.remove("kind"), m.remove("apiVersion")),
        None => (None, None),
    };
    let item = serde_json::to_vec(&rest).unwrap_or_default();
    let (Some(kind), Some(api_version)) = (kind, api_version) else {
        return (Bytes::from(item), 0);
    };
    let mut full = Vec::with_capacity(item.len() + 64);
    full.extend_from_slice(b"{\"kind\":");
    full.extend_from_slice(&serde_json::to_vec(&kind).unwrap_or_default());
    full.extend_from_slice(b",\"apiVersion\":");
    full.extend_from_slice(&serde_json::to_vec(&api_version).unwrap_or_default());
    let start;
    if item.len() > 2 {
        full.push(b',');
        start = full.len();
        full.extend_from_slice(&item[1..]);
    } else {
        start = full.len();
        full.push(b'}');
    }
    (Bytes::from(full), start)
}

impl StoredObject {
    fn from_value(value: &Value, rv: u64) -> Self {
        let (json, rest) = encode(value);
        Self {
            json,
            rest,
            name: meta_str(value, "name").into(),
            namespace: meta_str(value, "namespace").into(),
            api_version: value
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            kind: value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            rv,
            proto: ProtoCache::default(),
        }
    }

    /// Wraps `value`, stamping `metadata.resourceVersion = rv`.
    #[must_use]
    pub(crate) fn new(mut value: Value, rv: u64) -> Self {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        Self::from_value(&value, rv)
    }

    /// Wraps `value` as is, for objects that were not stored (dry runs): no
    /// resourceVersion is stamped and [`rv`](Self::rv) is 0.
    #[must_use]
    pub(crate) fn without_rv(mut value: Value) -> Self {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        Self::from_value(&value, 0)
    }

    /// The object as JSON, parsed from its bytes (each call parses: keep the result when
    /// reading several fields).
    #[must_use]
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// The object serialised as compact JSON.
    #[must_use]
    pub(crate) fn json(&self) -> &Bytes {
        &self.json
    }

    /// The length of the list-item form ([`write_item`](Self::write_item)).
    #[must_use]
    pub(crate) fn item_len(&self) -> usize {
        if self.rest == 0 {
            self.json.len()
        } else {
            1 + self.json.len() - self.rest
        }
    }

    /// Appends the object serialised without `kind` and `apiVersion`, as list items are.
    pub(crate) fn write_item(&self, buf: &mut Vec<u8>) {
        if self.rest == 0 {
            buf.extend_from_slice(&self.json);
        } else {
            buf.push(b'{');
            buf.extend_from_slice(&self.json[self.rest..]);
        }
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
            .get_or_init(|| protobuf::encode::object_message(&self.value()))
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
        &self.name
    }

    /// `apiVersion` and `kind` (empty when absent).
    #[must_use]
    pub(crate) fn type_meta(&self) -> (&str, &str) {
        (&self.api_version, &self.kind)
    }

    /// `metadata.namespace` (empty when absent).
    #[must_use]
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_item_form_is_the_object_without_its_type_fields() {
        let o = StoredObject::new(
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}, "data": {"k": "v"}}),
            7,
        );
        let mut item = Vec::new();
        o.write_item(&mut item);
        assert_eq!(item.len(), o.item_len());
        let item: Value = serde_json::from_slice(&item).unwrap();
        assert_eq!(
            item,
            json!({"metadata": {"name": "a", "resourceVersion": "7"}, "data": {"k": "v"}})
        );
        assert_eq!(o.value()["kind"], "ConfigMap");
        assert_eq!((o.name(), o.namespace(), o.rv()), ("a", "", 7));
        let bare = StoredObject::new(json!({"kind": "X", "apiVersion": "v1"}), 1);
        let mut item = Vec::new();
        bare.write_item(&mut item);
        assert_eq!(item, b"{}");
        let untyped = StoredObject::new(json!({"metadata": {"name": "u"}}), 2);
        let mut item = Vec::new();
        untyped.write_item(&mut item);
        assert_eq!(item, untyped.json().to_vec());
    }
}
