//! Decoding of protobuf request bodies for the few built-in kinds kubectl's typed
//! generators send that way (`kubectl create namespace|configmap|secret`): the `k8s\0`
//! envelope, `runtime.Unknown`, `ObjectMeta`, `Namespace`, `ConfigMap` and `Secret`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtoError {
    /// The bytes are not valid protobuf of the expected shape.
    #[error("invalid protobuf body: {0}")]
    Malformed(&'static str),
    /// The kind has no protobuf decoder here.
    #[error("protobuf bodies of kind {0:?} are not supported")]
    Unsupported(String),
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or(ProtoError::Malformed("truncated varint"))?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ProtoError::Malformed("varint too long"))
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, ProtoError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let field = match tag & 7 {
            0 => Field::Varint(self.varint()?),
            1 | 5 => {
                let n = if tag & 7 == 1 { 8 } else { 4 };
                if self.buf.len() < n {
                    return Err(ProtoError::Malformed("truncated fixed field"));
                }
                self.buf = &self.buf[n..];
                Field::Fixed
            }
            2 => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| ProtoError::Malformed("length"))?;
                if self.buf.len() < len {
                    return Err(ProtoError::Malformed("truncated field"));
                }
                let (b, rest) = self.buf.split_at(len);
                self.buf = rest;
                Field::Bytes(b)
            }
            _ => return Err(ProtoError::Malformed("unsupported wire type")),
        };
        Ok(Some((tag >> 3, field)))
    }
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ProtoError> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, ProtoError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Malformed("string is not UTF-8"))
}

/// A `map<string, string|bytes>` entry.
fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), ProtoError> {
    let mut key = String::new();
    let mut value = Value::String(String::new());
    for (n, f) in fields(b)? {
        if let Field::Bytes(x) = f {
            match n {
                1 => key = string(x)?,
                2 if bytes_value => value = json!(STANDARD.encode(x)),
                2 => value = json!(string(x)?),
                _ => {}
            }
        }
    }
    Ok((key, value))
}

fn insert_entry(
    obj: &mut Map<String, Value>,
    field: &str,
    b: &[u8],
    bytes_value: bool,
) -> Result<(), ProtoError> {
    let (k, v) = map_entry(b, bytes_value)?;
    if let Some(m) = obj
        .entry(field)
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        m.insert(k, v);
    }
    Ok(())
}

fn push_string(obj: &mut Map<String, Value>, field: &str, b: &[u8]) -> Result<(), ProtoError> {
    let s = string(b)?;
    if let Some(a) = obj.entry(field).or_insert_with(|| json!([])).as_array_mut() {
        a.push(json!(s));
    }
    Ok(())
}

fn object_meta(b: &[u8]) -> Result<Value, ProtoError> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => {
                m.insert("name".into(), json!(string(x)?));
            }
            (2, Field::Bytes(x)) => {
                m.insert("generateName".into(), json!(string(x)?));
            }
            (3, Field::Bytes(x)) => {
                m.insert("namespace".into(), json!(string(x)?));
            }
            (6, Field::Bytes(x)) => {
                m.insert("resourceVersion".into(), json!(string(x)?));
            }
            (11, Field::Bytes(x)) => insert_entry(&mut m, "labels", x, false)?,
            (12, Field::Bytes(x)) => insert_entry(&mut m, "annotations", x, false)?,
            (14, Field::Bytes(x)) => push_string(&mut m, "finalizers", x)?,
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

fn kind_body(kind: &str, raw: &[u8]) -> Result<Map<String, Value>, ProtoError> {
    let mut obj = Map::new();
    for (n, f) in fields(raw)? {
        match (kind, n, f) {
            (_, 1, Field::Bytes(x)) => {
                obj.insert("metadata".into(), object_meta(x)?);
            }
            ("ConfigMap", 2, Field::Bytes(x)) => insert_entry(&mut obj, "data", x, false)?,
            ("ConfigMap", 3, Field::Bytes(x)) => insert_entry(&mut obj, "binaryData", x, true)?,
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                obj.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", 2, Field::Bytes(x)) => insert_entry(&mut obj, "data", x, true)?,
            ("Secret", 4, Field::Bytes(x)) => insert_entry(&mut obj, "stringData", x, false)?,
            ("Secret", 3, Field::Bytes(x)) => {
                obj.insert("type".into(), json!(string(x)?));
            }
            ("Namespace", 2, Field::Bytes(x)) => {
                let mut spec = Map::new();
                for (sn, sf) in fields(x)? {
                    if let (1, Field::Bytes(v)) = (sn, sf) {
                        push_string(&mut spec, "finalizers", v)?;
                    }
                }
                obj.insert("spec".into(), Value::Object(spec));
            }
            _ => {}
        }
    }
    Ok(obj)
}

/// Decodes a `k8s\0`-prefixed protobuf object into JSON (with kind and apiVersion).
pub(crate) fn decode(body: &[u8]) -> Result<Map<String, Value>, ProtoError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or(ProtoError::Malformed("missing k8s protobuf magic"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm)? {
                    match (tn, tf) {
                        (1, Field::Bytes(x)) => api_version = string(x)?,
                        (2, Field::Bytes(x)) => kind = string(x)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    if !matches!(kind.as_str(), "ConfigMap" | "Secret" | "Namespace") || api_version != "v1" {
        return Err(ProtoError::Unsupported(kind));
    }
    let mut obj = kind_body(&kind, raw)?;
    obj.insert("kind".into(), json!(kind));
    obj.insert("apiVersion".into(), json!(api_version));
    Ok(obj)
}

/// The protobuf messages of the request kinds kcache-proto has no type for (their field
/// numbers are upstream's `generated.proto`).
mod messages {
    use kcache_proto::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};

    /// `policy/v1` Eviction.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Eviction {
        #[prost(message, optional, tag = "1")]
        pub(super) metadata: Option<ObjectMeta>,
        #[prost(message, optional, tag = "2")]
        pub(super) delete_options: Option<DeleteOptions>,
    }

    /// `autoscaling/v1` Scale.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Scale {
        #[prost(message, optional, tag = "1")]
        pub(super) metadata: Option<ObjectMeta>,
        #[prost(message, optional, tag = "2")]
        pub(super) spec: Option<ScaleSpec>,
        #[prost(message, optional, tag = "3")]
        pub(super) status: Option<ScaleStatus>,
    }

    /// `autoscaling/v1` ScaleSpec.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ScaleSpec {
        #[prost(int32, optional, tag = "1")]
        pub(super) replicas: Option<i32>,
    }

    /// `autoscaling/v1` ScaleStatus.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ScaleStatus {
        #[prost(int32, optional, tag = "1")]
        pub(super) replicas: Option<i32>,
        #[prost(string, optional, tag = "2")]
        pub(super) selector: Option<String>,
    }

    /// `authentication.k8s.io/v1` TokenRequest (the status is never sent).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct TokenRequest {
        #[prost(message, optional, tag = "1")]
        pub(super) metadata: Option<ObjectMeta>,
        #[prost(message, optional, tag = "2")]
        pub(super) spec: Option<TokenRequestSpec>,
    }

    /// `authentication.k8s.io/v1` TokenRequestSpec.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct TokenRequestSpec {
        #[prost(string, repeated, tag = "1")]
        pub(super) audiences: Vec<String>,
        #[prost(message, optional, tag = "3")]
        pub(super) bound_object_ref: Option<BoundObjectReference>,
        #[prost(int64, optional, tag = "4")]
        pub(super) expiration_seconds: Option<i64>,
    }

    /// `authentication.k8s.io/v1` BoundObjectReference.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct BoundObjectReference {
        #[prost(string, optional, tag = "1")]
        pub(super) kind: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub(super) api_version: Option<String>,
        #[prost(string, optional, tag = "3")]
        pub(super) name: Option<String>,
        #[prost(string, optional, tag = "4")]
        pub(super) uid: Option<String>,
    }
}

fn object_meta_json(
    m: Option<kcache_proto::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
) -> Result<Value, ProtoError> {
    use kcache_proto::convert::FromProto;
    let Some(m) = m else {
        return Ok(json!({}));
    };
    let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::from_proto(m)
        .map_err(|_| ProtoError::Malformed("metadata"))?;
    serde_json::to_value(meta).map_err(|_| ProtoError::Malformed("metadata"))
}

fn delete_options_json(o: kcache_proto::apimachinery::pkg::apis::meta::v1::DeleteOptions) -> Value {
    let mut m = Map::new();
    if let Some(g) = o.grace_period_seconds {
        m.insert("gracePeriodSeconds".into(), json!(g));
    }
    if let Some(p) = o.preconditions {
        let mut pre = Map::new();
        if let Some(uid) = p.uid {
            pre.insert("uid".into(), json!(uid));
        }
        if let Some(rv) = p.resource_version {
            pre.insert("resourceVersion".into(), json!(rv));
        }
        m.insert("preconditions".into(), Value::Object(pre));
    }
    if let Some(o) = o.orphan_dependents {
        m.insert("orphanDependents".into(), json!(o));
    }
    if let Some(p) = o.propagation_policy {
        m.insert("propagationPolicy".into(), json!(p));
    }
    if !o.dry_run.is_empty() {
        m.insert("dryRun".into(), json!(o.dry_run));
    }
    if let Some(i) = o.ignore_store_read_error_with_cluster_breaking_potential {
        m.insert(
            "ignoreStoreReadErrorWithClusterBreakingPotential".into(),
            json!(i),
        );
    }
    Value::Object(m)
}

/// Decodes the protobuf body of a request whose kind is not a stored kind (`DeleteOptions`,
/// `Eviction`, `TokenRequest`, `Scale`) or any kind kcache-proto has a type for (`Binding`),
/// into its JSON form (with `apiVersion` and `kind`). `expected` names the kind the request
/// takes, for the error.
pub(crate) fn subresource_body(body: &[u8], expected: &str) -> Result<Value, ProtoError> {
    use prost::Message;
    let env = kcache_proto::envelope::Envelope::decode(bytes::Bytes::copy_from_slice(body))
        .map_err(|_| ProtoError::Malformed("not a k8s\\0 runtime.Unknown envelope"))?;
    let raw = env.raw.clone();
    let bad = |_| ProtoError::Malformed("the message does not decode as its kind");
    let mut v = match env.kind.as_str() {
        "DeleteOptions" => delete_options_json(
            kcache_proto::apimachinery::pkg::apis::meta::v1::DeleteOptions::decode(raw)
                .map_err(bad)?,
        ),
        "Eviction" => {
            let e = messages::Eviction::decode(raw).map_err(bad)?;
            let mut m = Map::new();
            m.insert("metadata".into(), object_meta_json(e.metadata)?);
            if let Some(o) = e.delete_options {
                m.insert("deleteOptions".into(), delete_options_json(o));
            }
            Value::Object(m)
        }
        "Scale" => {
            let sc = messages::Scale::decode(raw).map_err(bad)?;
            let spec = sc.spec.unwrap_or_default();
            let mut v = json!({"metadata": object_meta_json(sc.metadata)?, "spec": {}});
            if let Some(r) = spec.replicas {
                v["spec"]["replicas"] = json!(r);
            }
            if let Some(st) = sc.status {
                v["status"] = json!({"replicas": st.replicas.unwrap_or(0),
                                     "selector": st.selector.unwrap_or_default()});
            }
            v
        }
        "TokenRequest" => {
            let t = messages::TokenRequest::decode(raw).map_err(bad)?;
            let spec = t.spec.unwrap_or_default();
            let mut s = Map::new();
            if !spec.audiences.is_empty() {
                s.insert("audiences".into(), json!(spec.audiences));
            }
            if let Some(e) = spec.expiration_seconds {
                s.insert("expirationSeconds".into(), json!(e));
            }
            if let Some(b) = spec.bound_object_ref {
                s.insert(
                    "boundObjectRef".into(),
                    json!({"kind": b.kind, "apiVersion": b.api_version, "name": b.name, "uid": b.uid}),
                );
            }
            json!({"metadata": object_meta_json(t.metadata)?, "spec": s})
        }
        _ if kcache_proto::kind_is_supported(&env.api_version, &env.kind) => {
            let (api_version, kind) = (env.api_version.clone(), env.kind.clone());
            let mut v: Value = kcache_proto::decode_object(env.clone())
                .map_err(|_| ProtoError::Malformed("the message does not decode as its kind"))?;
            v["apiVersion"] = json!(api_version);
            v["kind"] = json!(kind);
            v
        }
        other if super::schema::message_for(&env.api_version, other).is_some() => {
            let message = super::schema::message_for(&env.api_version, other).unwrap_or_default();
            super::schema::message(&message, &env.raw)?
        }
        other => {
            return Err(ProtoError::Unsupported(if other.is_empty() {
                expected.to_owned()
            } else {
                other.to_owned()
            }));
        }
    };
    if !env.api_version.is_empty() {
        v["apiVersion"] = json!(env.api_version);
    }
    v["kind"] = json!(env.kind);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![
            u8::try_from(n << 3 | 2).unwrap(),
            u8::try_from(payload.len()).unwrap(),
        ];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn decodes_a_protobuf_configmap_like_kubectl_sends() {
        let meta = [
            field(1, b"cm1"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let raw = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [
            MAGIC.to_vec(),
            field(1, &type_meta),
            field(2, &raw),
            field(3, b""),
            field(4, b""),
        ]
        .concat();
        let obj = Value::Object(decode(&body).unwrap());
        assert_eq!(
            obj,
            json!({"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"name": "cm1", "labels": {"app": "web"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn rejects_truncated_and_unsupported_bodies() {
        assert!(matches!(
            decode(b"k8s\0\x0a\x05ab"),
            Err(ProtoError::Malformed(_))
        ));
        let tm = [field(1, b"v1"), field(2, b"Pod")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm)].concat();
        assert_eq!(decode(&body), Err(ProtoError::Unsupported("Pod".into())));
        assert!(decode(b"not protobuf").is_err());
    }
}
