//! Decoding of protobuf request bodies: the `k8s\0` envelope (kcache-proto's `Envelope`),
//! then its message, by kcache-proto's generated decoders for the kinds it has a type for
//! (core/v1, apps/v1, coordination/v1) and by the upstream schema table (`schema.rs`, which
//! walks the wire with kcache-proto's reader) for every other built-in kind and for the
//! request-only kinds (`DeleteOptions`, `Eviction`, `Scale`, `TokenRequest`). There is no
//! wire reader here.

use kcache_proto::envelope::Envelope;
use serde_json::{Map, Value, json};

use super::{ProtoError, schema};

/// `meta/v1` DeleteOptions in the schema table (its envelope's apiVersion varies: `v1`,
/// `meta.k8s.io/v1`, or the group of the resource deleted).
const DELETE_OPTIONS: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions";

fn envelope(body: &[u8]) -> Result<Envelope, ProtoError> {
    Envelope::decode(bytes::Bytes::copy_from_slice(body))
        .map_err(|_| ProtoError::Malformed("not a k8s\\0 runtime.Unknown envelope"))
}

/// The JSON form of the envelope's message, with the envelope's `kind` (and `apiVersion`
/// when it has one); `None` when no decoder knows the kind.
fn message(env: Envelope) -> Result<Option<Value>, ProtoError> {
    let (api_version, kind) = (env.api_version.clone(), env.kind.clone());
    let mut v = if kcache_proto::kind_is_supported(&api_version, &kind) {
        kcache_proto::decode_object::<Value>(env)
            .map_err(|_| ProtoError::Malformed("the message does not decode as its kind"))?
    } else if kind == "DeleteOptions" {
        schema::message(DELETE_OPTIONS, &env.raw)?
    } else if let Some(name) = schema::message_for(&api_version, &kind) {
        schema::message(&name, &env.raw)?
    } else {
        return Ok(None);
    };
    let Value::Object(m) = &mut v else {
        return Err(ProtoError::Malformed(
            "the message does not decode as an object",
        ));
    };
    if !api_version.is_empty() {
        m.insert("apiVersion".into(), json!(api_version));
    }
    m.insert("kind".into(), json!(kind));
    Ok(Some(v))
}

/// Decodes the protobuf body of a create or update (any built-in kind: kubectl's typed
/// generators send ConfigMaps, Secrets, Namespaces and Deployments so, client-go's protobuf
/// clients RBAC objects, Jobs, ...) into its JSON form, with `apiVersion` and `kind`.
pub(crate) fn object(body: &[u8]) -> Result<Map<String, Value>, ProtoError> {
    let env = envelope(body)?;
    let kind = env.kind.clone();
    match message(env)? {
        Some(Value::Object(mut m)) => {
            m.entry("apiVersion").or_insert(json!(""));
            Ok(m)
        }
        _ => Err(ProtoError::Unsupported(kind)),
    }
}

/// Decodes the protobuf body of a request whose kind is not a stored kind (`DeleteOptions`,
/// `Eviction`, `TokenRequest`, `Scale`) or any built-in kind (`Binding`), into its JSON form
/// (with `apiVersion` and `kind`). `expected` names the kind the request takes, for the
/// error.
pub(crate) fn subresource_body(body: &[u8], expected: &str) -> Result<Value, ProtoError> {
    let env = envelope(body)?;
    let kind = env.kind.clone();
    message(env)?.ok_or_else(|| {
        ProtoError::Unsupported(if kind.is_empty() {
            expected.to_owned()
        } else {
            kind
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAGIC: &[u8] = b"k8s\0";

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
        let obj = Value::Object(object(&body).unwrap());
        assert_eq!(
            obj,
            json!({"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"name": "cm1", "labels": {"app": "web"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn rejects_truncated_and_unsupported_bodies() {
        assert!(matches!(
            object(b"k8s\0\x0a\x05ab"),
            Err(ProtoError::Malformed(_))
        ));
        let tm = [field(1, b"example.com/v1"), field(2, b"Widget")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm)].concat();
        assert_eq!(object(&body), Err(ProtoError::Unsupported("Widget".into())));
        assert_eq!(
            subresource_body(&[MAGIC.to_vec(), field(1, b"")].concat(), "Scale"),
            Err(ProtoError::Unsupported("Scale".into()))
        );
        assert!(object(b"not protobuf").is_err());
    }
}
