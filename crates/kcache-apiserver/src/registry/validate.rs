//! Decoding and validating request bodies the way kube-apiserver reports problems:
//! JSON syntax errors in Go's words, kind/apiVersion mismatches, unknown top-level fields
//! (Warning header or strict 400), object names, ConfigMap keys and Lease MicroTimes.

use serde_json::{Map, Value};

use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};

/// Go's `summarizeData`: the first 30 bytes, as text for JSON objects, else as hex.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    if body.is_empty() {
        return "<empty>".into();
    }
    let cut = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    if body[0] == b'{' {
        format!("{}{more}", String::from_utf8_lossy(cut))
    } else {
        let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}{more}")
    }
}

/// A JSON syntax error worded like Go's `encoding/json`.
pub(crate) fn go_json_error(body: &[u8]) -> String {
    let trimmed: Vec<u8> = body
        .iter()
        .copied()
        .skip_while(u8::is_ascii_whitespace)
        .collect();
    let Some(&first) = trimmed.first() else {
        return "unexpected end of JSON input".into();
    };
    for lit in ["null", "true", "false"] {
        if first == lit.as_bytes()[0] {
            for (i, want) in lit.bytes().enumerate() {
                match trimmed.get(i) {
                    None => return "unexpected end of JSON input".into(),
                    Some(&got) if got != want => {
                        return format!(
                            "invalid character '{}' in literal {lit} (expecting '{}')",
                            got as char, want as char
                        );
                    }
                    Some(_) => {}
                }
            }
        }
    }
    if !b"{[\"-0123456789ntf".contains(&first) {
        return format!(
            "invalid character '{}' looking for beginning of value",
            first as char
        );
    }
    match serde_json::from_slice::<Value>(body) {
        Err(e) if e.is_eof() => "unexpected end of JSON input".into(),
        Err(e) if e.to_string().starts_with("key must be a string") => {
            match byte_at(body, e.line(), e.column()) {
                Some(c) => format!(
                    "invalid character '{}' looking for beginning of object key string",
                    c as char
                ),
                None => e.to_string(),
            }
        }
        Err(e) => e.to_string(),
        Ok(_) => "invalid JSON".into(),
    }
}

/// The byte at serde_json's 1-based `line` and `column`.
fn byte_at(body: &[u8], line: usize, column: usize) -> Option<u8> {
    let start: usize = body
        .split(|b| *b == b'\n')
        .take(line.saturating_sub(1))
        .map(|l| l.len() + 1)
        .sum();
    body.get(start + column.checked_sub(1)?).copied()
}

/// Parses a create/update body into a JSON object.
pub(crate) fn decode_object(
    info: &ResourceInfo,
    body: &[u8],
) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; \
             json parse error: json: cannot unmarshal into Go value of type struct ({})",
            info.kind,
            summarize(body)
        ))),
        Err(_) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; \
             json parse error: {} ({})",
            info.kind,
            go_json_error(body),
            summarize(body)
        ))),
    }
}

/// Checks (and defaults) `kind` and `apiVersion` against the URL's resource.
pub(crate) fn check_type(
    info: &ResourceInfo,
    obj: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let want_av = info.api_version();
    if !kind.is_empty() && kind != info.kind {
        let (_, ver) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let ver = if ver.is_empty() {
            info.version.as_str()
        } else {
            ver
        };
        let internal = if info.group.is_empty() {
            "core"
        } else {
            info.group.split('.').next().unwrap_or("")
        };
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{ver}\" cannot be handled as a {}: converting ({ver}.{kind}) to \
             ({internal}.{}): unknown conversion",
            info.kind, info.kind
        )));
    }
    if !api_version.is_empty() && api_version != want_av {
        return Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: no kind \"{}\" is registered for \
             version \"{api_version}\" in scheme \"pkg/runtime/scheme.go:111\"",
            info.kind, info.version, info.kind, info.kind
        )));
    }
    obj.insert("kind".into(), Value::String(info.kind.clone()));
    obj.insert("apiVersion".into(), Value::String(want_av));
    Ok(())
}

/// The top-level fields a built-in kind allows; `None` for schemaless resources.
fn known_fields(info: &ResourceInfo) -> Option<&'static [&'static str]> {
    Some(match (info.group.as_str(), info.kind.as_str()) {
        ("", "ConfigMap") => &["data", "binaryData", "immutable"],
        ("", "Secret") => &["data", "stringData", "type", "immutable"],
        ("", "Pod" | "Service" | "Namespace") => &["spec", "status"],
        ("coordination.k8s.io", "Lease") => &["spec"],
        ("", "Event") => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ],
        _ => return None,
    })
}

/// The `Warning` header value kube-apiserver sends for an unknown or pruned field.
pub(crate) fn unknown_field_warning(field: &str) -> String {
    format!("299 - \"unknown field \\\"{field}\\\"\"")
}

/// `metav1.ObjectMeta`'s fields.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Drops unknown top-level and `metadata` fields of built-in kinds, returning `Warning`
/// header values; `fieldValidation` (`mode`) `Ignore` drops them silently, `Strict` makes them
/// a 400.
pub(crate) fn unknown_fields(
    info: &ResourceInfo,
    obj: &mut Map<String, Value>,
    mode: &str,
) -> Result<Vec<String>, ApiError> {
    let Some(known) = known_fields(info) else {
        return Ok(Vec::new());
    };
    let mut unknown: Vec<String> = obj
        .keys()
        .filter(|k| {
            !matches!(k.as_str(), "kind" | "apiVersion" | "metadata")
                && !known.contains(&k.as_str())
        })
        .cloned()
        .collect();
    let meta_unknown: Vec<String> = obj
        .get("metadata")
        .and_then(Value::as_object)
        .map(|m| {
            m.keys()
                .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    unknown.extend(meta_unknown.iter().map(|f| format!("metadata.{f}")));
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    if mode == "Strict" {
        let list: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
            info.kind,
            info.version,
            info.kind,
            list.join(", ")
        )));
    }
    for f in &unknown {
        match f.strip_prefix("metadata.") {
            Some(m) if meta_unknown.iter().any(|u| u == m) => {
                if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove(m);
                }
            }
            _ => {
                obj.remove(f);
            }
        }
    }
    if mode == "Ignore" {
        return Ok(Vec::new());
    }
    Ok(unknown.iter().map(|f| unknown_field_warning(f)).collect())
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// An RFC 1123 subdomain as Kubernetes checks it: at most 253 characters of dot-separated
/// labels (no length limit per label).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// Validates `metadata.name` (RFC 1123 subdomain; label for namespaces).
pub(crate) fn check_name(info: &ResourceInfo, name: &str) -> Result<(), ApiError> {
    let causes = name_causes(info, name);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(info, name, causes))
}

/// What is wrong with `name` as an object name of `info` (nothing when valid).
pub(crate) fn name_causes(info: &ResourceInfo, name: &str) -> Vec<Cause> {
    if info.group == "rbac.authorization.k8s.io" {
        // RBAC names are path segments (`system:...` is valid), as `ValidateRBACName`.
        let why = match name {
            "." => Some("may not be '.'"),
            ".." => Some("may not be '..'"),
            n if n.contains('/') => Some("may not contain '/'"),
            n if n.contains('%') => Some("may not contain '%'"),
            _ => None,
        };
        return why
            .map(|why| {
                vec![Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: \"{name}\": {why}"),
                    "metadata.name",
                )]
            })
            .unwrap_or_default();
    }
    let label_only = info.plural == "namespaces" && info.group.is_empty();
    let ok = if label_only {
        is_dns_label(name)
    } else {
        is_dns_subdomain(name)
    };
    if ok {
        return Vec::new();
    }
    let why = if label_only {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
         and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', \
         regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    } else {
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' \
         or '.', and must start and end with an alphanumeric character (e.g. 'example.com', \
         regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    };
    vec![Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: \"{name}\": {why}"),
        "metadata.name",
    )]
}

const MICRO_LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// Parses a MicroTime exactly as Go's layout does (exactly 6 fractional digits) and
/// returns it normalised to UTC; the error is the text after "parsing time".
fn micro_time(s: &str) -> Result<String, String> {
    let fail = |rest: &str, elem: &str| {
        format!("parsing time \"{s}\" as \"{MICRO_LAYOUT}\": cannot parse \"{rest}\" as \"{elem}\"")
    };
    let head = s.get(..19).ok_or_else(|| fail(s, "2006-01-02T15:04:05"))?;
    if chrono::NaiveDateTime::parse_from_str(head, "%Y-%m-%dT%H:%M:%S").is_err() {
        return Err(fail(s, "2006-01-02T15:04:05"));
    }
    let rest = &s[19..];
    let frac_ok = rest.len() >= 7
        && rest.starts_with('.')
        && rest.as_bytes()[1..7].iter().all(u8::is_ascii_digit);
    if !frac_ok {
        return Err(fail(rest, ".000000"));
    }
    let zone = &rest[7..];
    let zone_ok = zone == "Z"
        || (zone.len() == 6
            && (zone.starts_with('+') || zone.starts_with('-'))
            && zone.as_bytes()[3] == b':');
    if !zone_ok {
        return Err(fail(zone, "Z07:00"));
    }
    let parsed = chrono::DateTime::parse_from_rfc3339(s).map_err(|_| fail(zone, "Z07:00"))?;
    Ok(parsed
        .with_timezone(&chrono::Utc)
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string())
}

/// Kind-specific checks of built-ins: ConfigMap keys, Lease MicroTimes and duration.
pub(crate) fn check_kind(
    info: &ResourceInfo,
    obj: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    let name = obj
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "ConfigMap" | "Secret") => {
            let mut causes = Vec::new();
            for field in ["data", "binaryData", "stringData"] {
                if let Some(Value::Object(m)) = obj.get(field) {
                    for k in m.keys() {
                        let ok = !k.is_empty()
                            && k.len() <= 253
                            && k.bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
                        if !ok {
                            causes.push(Cause::new(
                                "FieldValueInvalid",
                                format!(
                                    "Invalid value: \"{k}\": a valid config key must consist of \
                                     alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  \
                                     or 'KEY_NAME',  or 'key-name', regex used for validation is \
                                     '[-._a-zA-Z0-9]+')"
                                ),
                                &format!("{field}[{k}]"),
                            ));
                        }
                    }
                }
            }
            if causes.is_empty() {
                Ok(())
            } else {
                Err(ApiError::invalid(info, &name, causes))
            }
        }
        ("coordination.k8s.io", "Lease") => {
            let Some(Value::Object(spec)) = obj.get_mut("spec") else {
                return Ok(());
            };
            for field in ["acquireTime", "renewTime"] {
                if let Some(Value::String(t)) = spec.get(field) {
                    let normalised = micro_time(t).map_err(|e| {
                        ApiError::bad_request(format!(
                            "Lease in version \"v1\" cannot be handled as a Lease: {e}"
                        ))
                    })?;
                    spec.insert(field.into(), Value::String(normalised));
                }
            }
            if let Some(d) = spec.get("leaseDurationSeconds").and_then(Value::as_i64)
                && d <= 0
            {
                return Err(ApiError::invalid(
                    info,
                    &name,
                    vec![Cause::new(
                        "FieldValueInvalid",
                        format!("Invalid value: {d}: must be greater than 0"),
                        "spec.leaseDurationSeconds",
                    )],
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_json_is_described_in_go_words() {
        assert_eq!(
            go_json_error(b"not json at all"),
            "invalid character 'o' in literal null (expecting 'u')"
        );
        assert_eq!(go_json_error(b"{\"a\":"), "unexpected end of JSON input");
        assert_eq!(
            go_json_error(b"{oops"),
            "invalid character 'o' looking for beginning of object key string"
        );
        assert_eq!(
            go_json_error(b"{\"a\": 1,\n  x}"),
            "invalid character 'x' looking for beginning of object key string"
        );
        assert_eq!(
            summarize(b"not json at all"),
            "6e6f74206a736f6e20617420616c6c"
        );
        assert_eq!(
            summarize(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x""#),
            r#"{"apiVersion":"v1","kind":"Con ..."#
        );
    }

    #[test]
    fn microtime_requires_exactly_six_fractional_digits() {
        assert_eq!(
            micro_time("2030-01-01T00:00:00.000000+01:00").unwrap(),
            "2029-12-31T23:00:00.000000Z"
        );
        assert!(
            micro_time("2030-01-01T00:00:00Z")
                .unwrap_err()
                .ends_with("cannot parse \"Z\" as \".000000\"")
        );
        assert!(
            micro_time("2030-01-01T00:00:00.123Z")
                .unwrap_err()
                .ends_with("cannot parse \".123Z\" as \".000000\"")
        );
        assert!(
            micro_time("2030-01-01T00:00:00.123456789Z")
                .unwrap_err()
                .ends_with("cannot parse \"789Z\" as \"Z07:00\"")
        );
    }
}
