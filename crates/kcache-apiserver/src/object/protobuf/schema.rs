//! Protobuf request bodies of every built-in kind, decoded by schema: the message table in
//! this crate's `data/protobuf-v0.36.5.json` (generated from `k8s.io/api` v0.36.5's
//! `generated.proto` files and Go struct tags, see its `source`) drives a wire-format walk
//! that writes the object's JSON form, as the Go types would marshal it: JSON field names,
//! `omitempty` zero values left out (a present pointer keeps its zero value), `Time` and
//! `MicroTime` as RFC 3339, `Quantity` and `IntOrString` as their JSON scalars,
//! `RawExtension` and `FieldsV1` as the JSON they carry, bytes as base64, Go slice types
//! (`ExtraValue`) as arrays.
//!
//! kcache-proto's generated decoders stay the path for the kinds they know (core/v1, apps/v1,
//! coordination/v1); this is the path for the others (RBAC, batch, policy, networking,
//! storage, certificates, ...). The same table encodes their responses (`schema_encode.rs`).

use std::collections::HashMap;
use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::ProtoError;

const TABLE: &str = include_str!("../../../data/protobuf-v0.36.5.json");

pub(super) const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

#[derive(Debug)]
pub(super) enum Label {
    Optional,
    Repeated,
    Map,
}

#[derive(Debug)]
pub(super) struct Field {
    pub(super) name: String,
    pub(super) label: Label,
    pub(super) ty: String,
    pub(super) omitempty: bool,
    pub(super) pointer: bool,
}

#[derive(Debug, Default)]
pub(super) struct Message {
    pub(super) fields: HashMap<u64, Field>,
    /// A Go slice type (`type ExtraValue []string`): its JSON form is the `items` array.
    pub(super) list: bool,
}

fn parse() -> HashMap<String, Message> {
    let doc: Value = serde_json::from_str(TABLE).unwrap_or(Value::Null);
    let mut out = HashMap::new();
    for (name, m) in doc["messages"].as_object().into_iter().flatten() {
        let mut msg = Message {
            list: m.get("list").and_then(Value::as_bool) == Some(true),
            ..Message::default()
        };
        for f in m["fields"].as_array().into_iter().flatten() {
            let s = |i: usize| f.get(i).and_then(Value::as_str).unwrap_or("").to_owned();
            let b = |i: usize| f.get(i).and_then(Value::as_bool) == Some(true);
            let label = match s(2).as_str() {
                "r" => Label::Repeated,
                l if l.starts_with("m:") => Label::Map,
                _ => Label::Optional,
            };
            let number = f.get(0).and_then(Value::as_u64).unwrap_or(0);
            msg.fields.insert(
                number,
                Field {
                    name: s(1),
                    label,
                    ty: s(3),
                    omitempty: b(4),
                    pointer: b(5),
                },
            );
        }
        out.insert(name.clone(), msg);
    }
    out
}

pub(super) fn table() -> &'static HashMap<String, Message> {
    static T: LazyLock<HashMap<String, Message>> = LazyLock::new(parse);
    &T
}

/// The protobuf message of a kind: `rbac.authorization.k8s.io/v1` `ClusterRole` is
/// `k8s.io.api.rbac.v1.ClusterRole` (the package is named after the group's first label).
pub(crate) fn message_for(api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    // Only kube-apiserver's own groups: a custom resource's group may share a first label.
    crate::resource::table().group_rank(group)?;
    let dir = if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    };
    let name = format!("k8s.io.api.{dir}.{version}.{kind}");
    table().contains_key(&name).then_some(name)
}

enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

/// A varint value (of a varint field, or one of a packed run).
fn read_varint(buf: &[u8]) -> Result<(u64, usize), ProtoError> {
    kcache_proto::varint::read(buf).map_err(|_| ProtoError::Malformed("invalid varint"))
}

/// The fields of one message level, read by kcache-proto's wire reader (its limits and
/// errors: a truncated value, a bad key or wire type is a [`ProtoError::Layout`]).
fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ProtoError> {
    let mut out = Vec::new();
    for record in kcache_proto::compact::wire::fields(buf) {
        let record = record?;
        let v = &buf[record.value];
        let w = match record.wire_type {
            0 => Wire::Varint(read_varint(v)?.0),
            1 => Wire::Fixed64(u64::from_le_bytes(v.try_into().unwrap_or_default())),
            5 => Wire::Fixed32(u32::from_le_bytes(v.try_into().unwrap_or_default())),
            _ => Wire::Bytes(v),
        };
        out.push((u64::from(record.number), w));
    }
    Ok(out)
}

fn utf8(b: &[u8]) -> Result<String, ProtoError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Malformed("string is not UTF-8"))
}

/// `time.Duration.String()`: `1h2m3.5s`, `500ms`, `0s`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, div) = if n < 1_000 {
            ("ns", 1)
        } else if n < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        let whole = n / div;
        let frac = n % div;
        let frac = if frac == 0 {
            String::new()
        } else {
            let digits = if div == 1_000 { 3 } else { 6 };
            format!(".{frac:0digits$}").trim_end_matches('0').to_owned()
        };
        return format!("{sign}{whole}{frac}{unit}");
    }
    let secs = n / 1_000_000_000;
    let frac = n % 1_000_000_000;
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let frac = if frac == 0 {
        String::new()
    } else {
        format!(".{frac:09}").trim_end_matches('0').to_owned()
    };
    let mut out = sign.to_owned();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&format!("{s}{frac}s"));
    out
}

fn timestamp(seconds: i64, nanos: i64, micro: bool) -> Value {
    // Go's zero time (what a non-pointer Time field holds when unset) marshals as null.
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let Some(t) = chrono::DateTime::from_timestamp(seconds, u32::try_from(nanos).unwrap_or(0))
    else {
        return Value::Null;
    };
    if micro {
        json!(t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
    } else {
        json!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
    }
}

/// The JSON form of one value of type `ty` on the wire.
fn value(ty: &str, w: &Wire<'_>) -> Result<Value, ProtoError> {
    Ok(match (ty, w) {
        ("string", Wire::Bytes(b)) => json!(utf8(b)?),
        ("bytes", Wire::Bytes(b)) => json!(STANDARD.encode(b)),
        ("bool", Wire::Varint(v)) => json!(*v != 0),
        #[allow(
            clippy::cast_possible_truncation,
            reason = "int32 on the wire is a varint"
        )]
        ("int32", Wire::Varint(v)) => json!(*v as i32),
        #[allow(clippy::cast_possible_wrap, reason = "int64 on the wire is a varint")]
        ("int64", Wire::Varint(v)) => json!(*v as i64),
        ("double", Wire::Fixed64(v)) => json!(f64::from_bits(*v)),
        ("float", Wire::Fixed32(v)) => json!(f32::from_bits(*v)),
        (_, Wire::Bytes(b)) => message(ty, b)?,
        _ => {
            return Err(ProtoError::Malformed(
                "a field's wire type does not match its type",
            ));
        }
    })
}

/// The JSON form of message `ty` (fully named) from its bytes.
pub(crate) fn message(ty: &str, buf: &[u8]) -> Result<Value, ProtoError> {
    match ty {
        t if t == format!("{META}.Time") || t == format!("{META}.MicroTime") => {
            let (mut s, mut n) = (0i64, 0i64);
            for (num, w) in fields(buf)? {
                #[allow(clippy::cast_possible_wrap, reason = "int64 and int32 varints")]
                match (num, w) {
                    (1, Wire::Varint(v)) => s = v as i64,
                    (2, Wire::Varint(v)) => n = v as i64,
                    _ => {}
                }
            }
            return Ok(timestamp(s, n, t.ends_with("MicroTime")));
        }
        t if t == format!("{META}.Duration") => {
            let mut d = 0i64;
            for (num, w) in fields(buf)? {
                if let (1, Wire::Varint(v)) = (num, w) {
                    #[allow(clippy::cast_possible_wrap, reason = "an int64 varint")]
                    {
                        d = v as i64;
                    }
                }
            }
            return Ok(json!(go_duration(d)));
        }
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => {
            let mut s = String::new();
            for (num, w) in fields(buf)? {
                if let (1, Wire::Bytes(b)) = (num, w) {
                    s = utf8(b)?;
                }
            }
            return Ok(json!(s));
        }
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => {
            let (mut kind, mut int, mut s) = (0u64, 0i64, String::new());
            for (num, w) in fields(buf)? {
                match (num, w) {
                    (1, Wire::Varint(v)) => kind = v,
                    #[allow(clippy::cast_possible_truncation, reason = "an int32 varint")]
                    (2, Wire::Varint(v)) => int = i64::from(v as i32),
                    (3, Wire::Bytes(b)) => s = utf8(b)?,
                    _ => {}
                }
            }
            return Ok(if kind == 1 { json!(s) } else { json!(int) });
        }
        t if t == "k8s.io.apimachinery.pkg.runtime.RawExtension"
            || t == format!("{META}.FieldsV1") =>
        {
            for (num, w) in fields(buf)? {
                if let (1, Wire::Bytes(b)) = (num, w) {
                    return serde_json::from_slice(b)
                        .map_err(|_| ProtoError::Malformed("embedded JSON"));
                }
            }
            return Ok(Value::Null);
        }
        _ => {}
    }
    let Some(msg) = table().get(ty) else {
        return Err(ProtoError::Unsupported(ty.to_owned()));
    };
    let mut obj = Map::new();
    for (num, w) in fields(buf)? {
        let Some(f) = msg.fields.get(&num) else {
            continue;
        };
        match f.label {
            Label::Optional if inline(f) => {
                // An embedded Go struct (`json:",inline"`): its fields are the parent's.
                if let Value::Object(fields) = value(&f.ty, &w)? {
                    obj.extend(fields);
                }
            }
            Label::Optional => {
                obj.insert(f.name.clone(), value(&f.ty, &w)?);
            }
            Label::Repeated => {
                let items = obj.entry(f.name.clone()).or_insert_with(|| json!([]));
                let Some(items) = items.as_array_mut() else {
                    continue;
                };
                match (&w, f.ty.as_str()) {
                    // Packed scalars.
                    (Wire::Bytes(b), "int32" | "int64" | "bool") => {
                        let mut rest = *b;
                        while !rest.is_empty() {
                            let (v, len) = read_varint(rest)?;
                            rest = &rest[len..];
                            items.push(value(&f.ty, &Wire::Varint(v))?);
                        }
                    }
                    _ => items.push(value(&f.ty, &w)?),
                }
            }
            Label::Map => {
                let Wire::Bytes(entry) = w else {
                    return Err(ProtoError::Malformed("a map entry is not a message"));
                };
                let (mut k, mut v) = (String::new(), Value::Null);
                for (n, ew) in fields(entry)? {
                    match n {
                        1 => {
                            k = match ew {
                                Wire::Bytes(b) => utf8(b)?,
                                Wire::Varint(x) => x.to_string(),
                                _ => String::new(),
                            };
                        }
                        2 => v = value(&f.ty, &ew)?,
                        _ => {}
                    }
                }
                if v.is_null() {
                    v = default_of(&f.ty);
                }
                if let Some(m) = obj
                    .entry(f.name.clone())
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                {
                    m.insert(k, v);
                }
            }
        }
    }
    // Go's `omitempty`: zero values of non-pointer fields are not written.
    for f in msg.fields.values() {
        if !f.omitempty || f.pointer {
            continue;
        }
        let struct_field = matches!(f.label, Label::Optional)
            && !matches!(
                f.ty.as_str(),
                "string" | "bytes" | "bool" | "int32" | "int64" | "double" | "float"
            )
            && !f.ty.ends_with(".Time")
            && !f.ty.ends_with(".MicroTime");
        if struct_field {
            continue;
        }
        if obj.get(&f.name).is_some_and(is_zero) {
            obj.remove(&f.name);
        }
    }
    if msg.list {
        return Ok(obj.remove("items").unwrap_or_else(|| json!([])));
    }
    Ok(Value::Object(obj))
}

/// An embedded Go struct (`json:",inline"`, e.g. `Rule` in `RuleWithOperations`): the table
/// names it by its Go type name, a capital, and its type is a message of the table.
pub(super) fn inline(f: &Field) -> bool {
    f.name.starts_with(|c: char| c.is_ascii_uppercase()) && table().contains_key(&f.ty)
}

/// A map value that was absent on the wire: the type's zero value.
fn default_of(ty: &str) -> Value {
    match ty {
        "string" | "bytes" => json!(""),
        "bool" => json!(false),
        "int32" | "int64" | "double" | "float" => json!(0),
        _ => json!({}),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema_encode::{encode, parse_go_duration};
    use super::*;

    #[test]
    fn kinds_map_to_their_packages() {
        assert_eq!(
            message_for("rbac.authorization.k8s.io/v1", "ClusterRole").as_deref(),
            Some("k8s.io.api.rbac.v1.ClusterRole")
        );
        assert_eq!(
            message_for("v1", "Pod").as_deref(),
            Some("k8s.io.api.core.v1.Pod")
        );
        assert_eq!(message_for("example.com/v1", "Widget"), None);
    }

    /// An embedded Go struct (`Rule` in `RuleWithOperations`, `json:",inline"`) is its
    /// parent's fields in JSON, as client-go sends webhook configurations in protobuf.
    #[test]
    fn embedded_structs_are_inline() {
        let ty = "k8s.io.api.admissionregistration.v1.RuleWithOperations";
        // operations: ["CREATE"]; Rule{apiGroups: ["apps"], resources: ["deployments"]}.
        let mut wire = vec![0x0a, 6];
        wire.extend_from_slice(b"CREATE");
        wire.extend_from_slice(&[0x12, 19, 0x0a, 4]);
        wire.extend_from_slice(b"apps");
        wire.extend_from_slice(&[0x1a, 11]);
        wire.extend_from_slice(b"deployments");
        let decoded = message(ty, &wire).unwrap();
        assert_eq!(
            decoded,
            json!({"operations": ["CREATE"], "apiGroups": ["apps"], "resources": ["deployments"]})
        );
        assert_eq!(encode(ty, &decoded).unwrap(), wire);
    }

    /// The schema path gives what the Go types marshal: a rich Deployment and Pod, encoded by
    /// kcache-proto's generated encoder, decode back to the JSON they came from.
    #[test]
    fn schema_decoding_round_trips_kcache_proto_encodings() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-1",
                         "resourceVersion": "7", "generation": 3,
                         "creationTimestamp": "2026-01-02T03:04:05Z",
                         "labels": {"app": "web"}, "annotations": {"a": "b"},
                         "finalizers": ["example.com/f"],
                         "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o",
                                              "uid": "u-2", "controller": true}]},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"},
                             "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "c", "image": "i:1", "args": ["-v"],
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                            "securityContext": {"privileged": false, "runAsUser": 0},
                            "env": [{"name": "X", "value": "1"}]
                        }],
                        "terminationGracePeriodSeconds": 30,
                        "nodeSelector": {"disk": "ssd"}
                    }
                },
                "paused": true
            },
            "status": {"replicas": 2, "conditions": [{"type": "Available", "status": "True",
                        "lastUpdateTime": "2026-01-02T03:04:05Z"}]}
        });
        let raw = kcache_proto::encode_json("apps/v1", "Deployment", &deployment).unwrap();
        let mut back = message("k8s.io.api.apps.v1.Deployment", &raw).unwrap();
        back["apiVersion"] = json!("apps/v1");
        back["kind"] = json!("Deployment");
        assert_eq!(back, deployment);
    }

    /// The schema encoder writes what kcache-proto's generated decoder (and the schema
    /// decoder) read back as the same object.
    #[test]
    fn schema_encoding_round_trips_through_both_decoders() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "generation": 2,
                         "creationTimestamp": "2026-01-02T03:04:05Z", "labels": {"b": "2", "a": "1"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "i",
                                      "resources": {"requests": {"cpu": "100m"}},
                                      "securityContext": {"privileged": false}}]}}},
            "status": {"conditions": [{"type": "Available", "status": "True",
                                        "lastTransitionTime": "2026-01-02T03:04:05Z"}]}
        });
        let raw = encode("k8s.io.api.apps.v1.Deployment", &deployment).unwrap();
        let env = kcache_proto::Envelope {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            raw: bytes::Bytes::from(raw.clone()),
            content_type: String::new(),
        };
        let typed: k8s_openapi::api::apps::v1::Deployment =
            kcache_proto::decode_object(env).unwrap();
        let mut via_proto = serde_json::to_value(typed).unwrap();
        via_proto["apiVersion"] = json!("apps/v1");
        via_proto["kind"] = json!("Deployment");
        assert_eq!(via_proto, deployment);
        let mut via_schema = message("k8s.io.api.apps.v1.Deployment", &raw).unwrap();
        via_schema["apiVersion"] = json!("apps/v1");
        via_schema["kind"] = json!("Deployment");
        assert_eq!(via_schema, deployment);
        let role = json!({"metadata": {"name": "r"},
                          "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
                          "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}});
        let raw = encode("k8s.io.api.rbac.v1.ClusterRole", &role).unwrap();
        assert_eq!(
            message("k8s.io.api.rbac.v1.ClusterRole", &raw).unwrap(),
            role
        );
        assert_eq!(parse_go_duration("1h2m3.5s"), Some(3_723_500_000_000));
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(3_723_000_000_000), "1h2m3s");
        assert_eq!(go_duration(500_000_000), "500ms");
        assert_eq!(go_duration(60_000_000_000), "1m0s");
    }
}
