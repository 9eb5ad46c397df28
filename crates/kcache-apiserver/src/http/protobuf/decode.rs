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

/// Decodes the protobuf body of a subresource request (`Eviction`, `Binding`,
/// `TokenRequest`, `Scale`, `DeleteOptions`) into its JSON form.
pub(crate) fn subresource_body(_body: &[u8], kind: &str) -> Result<Value, ProtoError> {
    Err(ProtoError::Unsupported(kind.to_owned()))
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
