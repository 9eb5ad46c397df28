//! Decoding and validating request bodies the way kube-apiserver reports problems:
//! JSON syntax errors in Go's words, kind/apiVersion mismatches, type errors and unknown
//! fields at any depth (Warning header or strict 400; from the recorded OpenAPI schema), object
//! names, ConfigMap keys and Lease MicroTimes.

use serde_json::{Map, Value};

use super::field_rules::is_subdomain_format;
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

/// The `Warning` header value kube-apiserver sends for an unknown or pruned field.
pub(crate) fn unknown_field_warning(field: &str) -> String {
    format!("299 - \"unknown field \\\"{field}\\\"\"")
}

/// Decodes a built-in object as kube-apiserver's Go types do, from the recorded OpenAPI
/// schema: a type error is a 400 (`json: cannot unmarshal ...`, a malformed quantity); fields
/// no type declares, at any depth, are dropped with a `Warning` header value each
/// (`fieldValidation` (`mode`) `Ignore` drops them silently, `Strict` makes them a 400).
/// Kinds the schema does not know (custom resources) pass unchanged.
pub(crate) fn unknown_fields(
    info: &ResourceInfo,
    obj: &mut Map<String, Value>,
    mode: &str,
) -> Result<Vec<String>, ApiError> {
    if info.schema.is_some() {
        return Ok(Vec::new());
    }
    let model = crate::schema::model();
    let Some(root) = model.kind(&info.group, &info.version, &info.kind) else {
        return Ok(Vec::new());
    };
    let cannot = |why: String| {
        ApiError::bad_request(format!(
            "{kind} in version \"{}\" cannot be handled as a {kind}: {why}",
            info.version,
            kind = info.kind
        ))
    };
    let mut v = Value::Object(std::mem::take(obj));
    let found = crate::schema::check::decode(model, root, &mut v, mode != "Strict");
    if let Value::Object(m) = v {
        *obj = m;
    }
    let unknown = found.map_err(cannot)?;
    unknown_fields_outcome(&unknown, mode, cannot)
}

/// Server-side apply's check of an applied configuration of a built-in kind, in every
/// validation mode: kube-apiserver converts it to its structured-merge type first, and an
/// unknown field fails that conversion with a 500 without reason naming the body's namespace,
/// name, apiVersion and kind and the first unknown field (`failed to create typed patch object
/// (/ac; /v1, Kind=ConfigMap): .dataa: field not declared in schema`, recorded from v1.36.5).
/// Fields inside list items are named by index here (`.spec.containers[0].x`), by key there
/// (`.spec.containers[name="c"].x`); of several, the first in key order is named. A type error
/// is left to the apply itself.
pub(crate) fn applied_unknown_fields(info: &ResourceInfo, applied: &Value) -> Result<(), ApiError> {
    if info.schema.is_some() {
        return Ok(());
    }
    let model = crate::schema::model();
    let Some(root) = model.kind(&info.group, &info.version, &info.kind) else {
        return Ok(());
    };
    let mut copy = applied.clone();
    let Ok(unknown) = crate::schema::check::decode(model, root, &mut copy, true) else {
        return Ok(());
    };
    let Some(first) = unknown.first() else {
        return Ok(());
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let api_version = text(&applied["apiVersion"]);
    // Go prints a GroupVersionKind as `group/version, Kind=kind` (`/v1` for the core group).
    let group_version = if api_version.contains('/') {
        api_version
    } else {
        format!("/{api_version}")
    };
    Err(ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({}/{}; {group_version}, Kind={}): \
             .{first}: field not declared in schema",
            text(&applied["metadata"]["namespace"]),
            text(&applied["metadata"]["name"]),
            text(&applied["kind"]),
        ),
    ))
}

/// The decoding of a patched built-in object (JSON, merge and strategic merge patches), as
/// [`unknown_fields`] but failing as kube-apiserver fails a patch: a 422 whose one cause, on
/// the field `patch`, quotes the patched object (`Invalid value: "{...}": strict decoding
/// error: unknown field "dataa"`).
pub(crate) fn patched_unknown_fields(
    info: &ResourceInfo,
    obj: &mut Value,
    mode: &str,
) -> Result<Vec<String>, ApiError> {
    if info.schema.is_some() {
        return Ok(Vec::new());
    }
    let model = crate::schema::model();
    let Some(root) = model.kind(&info.group, &info.version, &info.kind) else {
        return Ok(Vec::new());
    };
    let mut shown = obj.clone();
    if let Some(m) = shown.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    let refuse = |why: String| {
        let message = format!("Invalid value: {}: {why}", Value::String(shown.to_string()));
        ApiError::new(
            422,
            "Invalid",
            format!(" \"\" is invalid: patch: {message}"),
        )
        .with_details(
            serde_json::json!({"causes": [Cause::new("FieldValueInvalid", message, "patch")]}),
        )
    };
    let unknown =
        crate::schema::check::decode(model, root, obj, mode != "Strict").map_err(&refuse)?;
    unknown_fields_outcome(&unknown, mode, refuse)
}

/// What the unknown fields a decode found make of a request under `fieldValidation` `mode`:
/// nothing (`Ignore`), the error `refuse` makes of a strict decoding error (`Strict`), or a
/// `Warning` header value each (`Warn`).
fn unknown_fields_outcome(
    unknown: &[String],
    mode: &str,
    refuse: impl Fn(String) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    if unknown.is_empty() || mode == "Ignore" {
        return Ok(Vec::new());
    }
    if mode == "Strict" {
        let list: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        return Err(refuse(format!(
            "strict decoding error: {}",
            list.join(", ")
        )));
    }
    Ok(unknown.iter().map(|f| unknown_field_warning(f)).collect())
}

/// The RFC 1123 label regex alone (no length limit).
fn is_dns_label_format(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// kube-apiserver's check of the name an update or patch leaves in the object against the
/// name in the URL (a 400 before any other check of the object).
pub(crate) fn check_url_name(obj: &Map<String, Value>, url_name: &str) -> Result<(), ApiError> {
    let name = obj
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({url_name} based on URL) was undeterminable: name must be provided"
        )));
    }
    if name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        )));
    }
    Ok(())
}

/// Validates `metadata.name` of an object about to be created (RFC 1123 subdomain; label for
/// namespaces), with what the kind derives from it.
pub(crate) fn check_name(
    info: &ResourceInfo,
    obj: &Map<String, Value>,
    name: &str,
) -> Result<(), ApiError> {
    let mut causes = name_causes(info, name);
    causes.extend(super::validation::create_name_causes(info, obj, name));
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(info, name, causes))
}

/// What is wrong with `name` as an object name of `info` (nothing when valid).
pub(crate) fn name_causes(info: &ResourceInfo, name: &str) -> Vec<Cause> {
    // RBAC objects and PodDisruptionBudgets have no name rule of their own: kube-apiserver's
    // generic one (`path.ValidatePathSegmentName`) applies.
    if info.group == "rbac.authorization.k8s.io"
        || (info.group == "policy" && info.plural == "poddisruptionbudgets")
    {
        return path_segment_causes(name);
    }
    let label_only = info.plural == "namespaces" && info.group.is_empty();
    let invalid = |why: &str| {
        Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: \"{name}\": {why}"),
            "metadata.name",
        )
    };
    // `IsDNS1123Label` / `IsDNS1123Subdomain`: the length and the format are checked apart.
    let (max, format_ok) = if label_only {
        (63, is_dns_label_format(name))
    } else {
        (253, is_subdomain_format(name))
    };
    let mut causes = Vec::new();
    if name.len() > max {
        causes.push(invalid(&format!("must be no more than {max} characters")));
    }
    if !format_ok {
        causes.push(invalid(if label_only {
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
             '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
             '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        } else {
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character (e.g. \
             'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        }));
    }
    causes
}

/// kube-apiserver's check of RBAC object names (`ValidateRBACName`): only what keeps the
/// name a safe URL path segment (not `.` or `..`, no `/` or `%`); case and length are free.
fn path_segment_causes(name: &str) -> Vec<Cause> {
    let invalid = |why: String| {
        Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: \"{name}\": {why}"),
            "metadata.name",
        )
    };
    if name == "." || name == ".." {
        return vec![invalid(format!("may not be '{name}'"))];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| invalid(format!("may not contain '{bad}'")))
        .collect()
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
