//! Protobuf messages of the built-in kinds kcache-proto has no type for, encoded from their
//! JSON by the same schema table `schema.rs` decodes with (the reverse walk: JSON field names
//! to field numbers, RFC 3339 times and Go durations to their messages, `omitempty` zero
//! values left out).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcache_proto::varint;
use serde_json::Value;

use super::schema::{Label, META, inline, table};

fn put_key(out: &mut Vec<u8>, number: u64, wire: u8) {
    varint::put(out, (number << 3) | u64::from(wire));
}

fn put_bytes(out: &mut Vec<u8>, number: u64, b: &[u8]) {
    put_key(out, number, 2);
    varint::put(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Go's `time.ParseDuration` for the forms `time.Duration.String()` writes.
pub(super) fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_end..];
    }
    #[allow(
        clippy::cast_possible_truncation,
        reason = "durations fit in i64 nanoseconds"
    )]
    let t = total.round() as i64;
    Some(if neg { -t } else { t })
}

/// One value of type `ty` as field `number`.
fn put_value(out: &mut Vec<u8>, number: u64, ty: &str, v: &Value) -> Result<(), String> {
    match ty {
        "string" => put_bytes(out, number, v.as_str().unwrap_or_default().as_bytes()),
        "bytes" => {
            let b = STANDARD
                .decode(v.as_str().unwrap_or_default())
                .map_err(|e| format!("bytes field: {e}"))?;
            put_bytes(out, number, &b);
        }
        "bool" => {
            put_key(out, number, 0);
            varint::put(out, u64::from(v.as_bool().unwrap_or(false)));
        }
        "int32" | "int64" => {
            put_key(out, number, 0);
            #[allow(
                clippy::cast_sign_loss,
                reason = "protobuf varints are two's complement"
            )]
            varint::put(out, v.as_i64().unwrap_or(0) as u64);
        }
        "double" => {
            put_key(out, number, 1);
            out.extend_from_slice(&v.as_f64().unwrap_or(0.0).to_bits().to_le_bytes());
        }
        "float" => {
            put_key(out, number, 5);
            #[allow(clippy::cast_possible_truncation, reason = "a float field")]
            out.extend_from_slice(&(v.as_f64().unwrap_or(0.0) as f32).to_bits().to_le_bytes());
        }
        _ => put_bytes(out, number, &encode(ty, v)?),
    }
    Ok(())
}

/// The protobuf message `ty` (fully named) of the JSON value `v`: the inverse of
/// [`message`]. Fields the schema does not know are left out.
///
/// # Errors
/// A message naming what did not fit.
pub(crate) fn encode(ty: &str, v: &Value) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    match ty {
        t if t == format!("{META}.Time") || t == format!("{META}.MicroTime") => {
            let s = v.as_str().unwrap_or_default();
            let t =
                chrono::DateTime::parse_from_rfc3339(s).map_err(|e| format!("time {s:?}: {e}"))?;
            let (secs, nanos) = (t.timestamp(), t.timestamp_subsec_nanos());
            if secs != 0 {
                put_key(&mut out, 1, 0);
                #[allow(clippy::cast_sign_loss, reason = "two's complement varint")]
                varint::put(&mut out, secs as u64);
            }
            if nanos != 0 {
                put_key(&mut out, 2, 0);
                varint::put(&mut out, u64::from(nanos));
            }
            return Ok(out);
        }
        t if t == format!("{META}.Duration") => {
            let d = parse_go_duration(v.as_str().unwrap_or_default())
                .ok_or_else(|| format!("duration {v}"))?;
            put_key(&mut out, 1, 0);
            #[allow(clippy::cast_sign_loss, reason = "two's complement varint")]
            varint::put(&mut out, d as u64);
            return Ok(out);
        }
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => {
            let s = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            put_bytes(&mut out, 1, s.as_bytes());
            return Ok(out);
        }
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => {
            match v {
                Value::String(s) => {
                    put_key(&mut out, 1, 0);
                    varint::put(&mut out, 1);
                    put_bytes(&mut out, 3, s.as_bytes());
                }
                other => {
                    put_key(&mut out, 1, 0);
                    varint::put(&mut out, 0);
                    put_key(&mut out, 2, 0);
                    #[allow(clippy::cast_sign_loss, reason = "two's complement varint")]
                    varint::put(&mut out, other.as_i64().unwrap_or(0) as u64);
                }
            }
            return Ok(out);
        }
        t if t == "k8s.io.apimachinery.pkg.runtime.RawExtension"
            || t == format!("{META}.FieldsV1") =>
        {
            if !v.is_null() {
                put_bytes(
                    &mut out,
                    1,
                    &serde_json::to_vec(v).map_err(|e| e.to_string())?,
                );
            }
            return Ok(out);
        }
        _ => {}
    }
    let msg = table()
        .get(ty)
        .ok_or_else(|| format!("no protobuf message {ty}"))?;
    if msg.list {
        let field = msg.fields.get(&1).ok_or("list without items")?;
        for item in v.as_array().into_iter().flatten() {
            put_value(&mut out, 1, &field.ty, item)?;
        }
        return Ok(out);
    }
    let Some(obj) = v.as_object() else {
        return Err(format!("{ty}: not an object"));
    };
    let mut numbers: Vec<&u64> = msg.fields.keys().collect();
    numbers.sort();
    for n in numbers {
        let f = &msg.fields[n];
        if matches!(f.label, Label::Optional) && inline(f) {
            // An embedded Go struct: its fields are this object's.
            put_value(&mut out, *n, &f.ty, v)?;
            continue;
        }
        let Some(value) = obj.get(&f.name).filter(|x| !x.is_null()) else {
            continue;
        };
        match f.label {
            Label::Optional => put_value(&mut out, *n, &f.ty, value)?,
            Label::Repeated => {
                for item in value.as_array().into_iter().flatten() {
                    put_value(&mut out, *n, &f.ty, item)?;
                }
            }
            Label::Map => {
                let mut entries: Vec<(&String, &Value)> =
                    value.as_object().into_iter().flatten().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                for (k, x) in entries {
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, k.as_bytes());
                    if !x.is_null() {
                        put_value(&mut entry, 2, &f.ty, x)?;
                    }
                    put_bytes(&mut out, *n, &entry);
                }
            }
        }
    }
    Ok(out)
}
