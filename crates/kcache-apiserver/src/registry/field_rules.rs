//! The field errors of kube-apiserver's validation (`field.Invalid`, `field.Required`,
//! `field.NotSupported` and their words) and the name rules the kinds' checks share.

use serde_json::Value;

use crate::status::Cause;

pub(super) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

pub(super) const DNS_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
     (e.g. 'example.com', regex used for validation is \
     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

pub(super) fn invalid(field: &str, value: &str, msg: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: \"{value}\": {msg}"),
        field,
    )
}

pub(super) fn required(field: &str) -> Cause {
    Cause::new("FieldValueRequired", "Required value", field)
}

/// The RFC 1123 subdomain regex alone (no length limit).
pub(super) fn is_subdomain_format(s: &str) -> bool {
    s.split('.').all(|l| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    })
}

/// `IsValidPortName`: at most 15 of `[-a-z0-9]`, a letter, no `--`, no hyphen at an end.
pub(super) fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters");
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen");
    }
    errs
}

pub(super) const PORT_RANGE_MSG: &str = "must be between 1 and 65535, inclusive";

pub(super) fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause::new(reason, message, field)
}

pub(super) fn required_detail(field: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_owned()
    } else {
        format!("Required value: {detail}")
    };
    cause("FieldValueRequired", field, message)
}

pub(super) fn invalid_int(field: &str, n: i64, msg: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {n}: {msg}"),
    )
}

pub(super) fn invalid_str(field: &str, s: &str, msg: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: \"{s}\": {msg}"),
    )
}

pub(super) fn not_supported(field: &str, s: &str, supported: &[&str]) -> Cause {
    let quoted: Vec<String> = supported.iter().map(|v| format!("\"{v}\"")).collect();
    cause(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: \"{s}\": supported values: {}",
            quoted.join(", ")
        ),
    )
}

pub(super) fn str_at<'a>(v: Option<&'a Value>, key: &str) -> &'a str {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub(super) fn int_at(v: Option<&Value>, key: &str) -> Option<i64> {
    v.and_then(|v| v.get(key)).and_then(Value::as_i64)
}

pub(super) fn present(v: Option<&Value>, key: &str) -> bool {
    v.and_then(|v| v.get(key)).is_some_and(|v| !v.is_null())
}

pub(super) fn array<'a>(v: Option<&'a Value>, key: &str) -> &'a [Value] {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}
