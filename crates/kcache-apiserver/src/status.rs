//! `metav1.Status` errors, worded as kube-apiserver v1.36 words them.
//!
//! Every failure the server answers is an [`ApiError`]: the HTTP status code, the Status
//! `reason`, the exact `message` and the optional `details` of the real server (see the
//! recorded fixtures in the repository's `testdata/kube-apiserver-v1.36/`).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::resource::ResourceInfo;

/// One `details.causes[]` entry of a Status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// Machine-readable reason, e.g. `FieldValueRequired`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// The field the cause is about, e.g. `metadata.name`; omitted when empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Cause {
    /// A cause with a field path.
    #[must_use]
    pub fn new(reason: &str, message: impl Into<String>, field: &str) -> Self {
        Self {
            reason: reason.to_owned(),
            message: message.into(),
            field: field.to_owned(),
        }
    }

    /// Go's `field.NotSupported`: `value` at `field` is none of `supported`.
    pub(crate) fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        Self::new(
            "FieldValueNotSupported",
            format!(
                "Unsupported value: \"{value}\": supported values: {}",
                list.join(", ")
            ),
            field,
        )
    }
}

/// A failed request, rendered as a `metav1.Status` body with the same HTTP code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (also the Status `code`).
    pub code: u16,
    /// Status `reason` (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// Status `message`, worded as the real server words it.
    pub message: String,
    /// Status `details`, when the real server sends them.
    pub details: Option<Box<Value>>,
    /// Extra `metadata` of the Status (the fresh continue token of a 410).
    pub metadata: Option<Box<Value>>,
    /// Value of a `Retry-After` header, in seconds.
    pub retry_after: Option<u64>,
}

/// `Result` with [`ApiError`].
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

fn resource_details(info: &ResourceInfo, name: Option<&str>) -> Value {
    let mut d = Map::new();
    if let Some(n) = name {
        d.insert("name".into(), json!(n));
    }
    if !info.group.is_empty() {
        d.insert("group".into(), json!(info.group));
    }
    d.insert("kind".into(), json!(info.plural));
    Value::Object(d)
}

impl ApiError {
    /// A Status with no details.
    #[must_use]
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            metadata: None,
            retry_after: None,
        }
    }

    /// Adds `details` (builder style).
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// Adds a `Retry-After` header and `details.retryAfterSeconds`.
    #[must_use]
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        let mut d = match self.details.take().map(|b| *b) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        d.insert("retryAfterSeconds".into(), json!(secs));
        self.details = Some(Box::new(Value::Object(d)));
        self
    }

    /// 400 BadRequest without details.
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 NotFound for a named object: `configmaps "x" not found`.
    #[must_use]
    pub fn not_found(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", info.qualified_plural()),
        )
        .with_details(resource_details(info, Some(name)))
    }

    /// 404 for a namespace that does not exist.
    #[must_use]
    pub fn namespace_not_found(ns: &str) -> Self {
        Self::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
            .with_details(json!({"name": ns, "kind": "namespaces"}))
    }

    /// 404 for an unknown resource inside a known group version.
    #[must_use]
    pub fn unknown_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 AlreadyExists.
    #[must_use]
    pub fn already_exists(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", info.qualified_plural()),
        )
        .with_details(resource_details(info, Some(name)))
    }

    /// 409 Conflict on a stale resourceVersion.
    #[must_use]
    pub fn conflict(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                info.qualified_plural()
            ),
        )
        .with_details(resource_details(info, Some(name)))
    }

    /// 409 Conflict on a failed UID precondition.
    #[must_use]
    pub fn uid_conflict(info: &ResourceInfo, name: &str, wanted: &str, actual: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the UID in the precondition \
                 ({wanted}) does not match the UID in record ({actual}). The object might have \
                 been deleted and then recreated",
                info.kind
            ),
        )
        .with_details(json!({"name": name, "kind": info.kind}))
    }

    /// 409 Conflict on a failed resourceVersion precondition of a delete.
    #[must_use]
    pub fn rv_precondition_conflict(
        info: &ResourceInfo,
        name: &str,
        wanted: &str,
        actual: &str,
    ) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the ResourceVersion in the \
                 precondition ({wanted}) does not match the ResourceVersion in record ({actual}). \
                 The object might have been modified",
                info.kind
            ),
        )
        .with_details(json!({"name": name, "kind": info.kind}))
    }

    /// 422 Invalid for an object of `info`'s kind.
    #[must_use]
    pub fn invalid(info: &ResourceInfo, name: &str, causes: Vec<Cause>) -> Self {
        let kind = if info.group.is_empty() {
            info.kind.clone()
        } else {
            format!("{}.{}", info.kind, info.group)
        };
        let mut details = Map::new();
        if !name.is_empty() {
            details.insert("name".into(), json!(name));
        }
        if !info.group.is_empty() {
            details.insert("group".into(), json!(info.group));
        }
        details.insert("kind".into(), json!(info.kind));
        Self::invalid_with(&kind, name, details, causes)
    }

    /// 422 Invalid naming the resource rather than the kind (`leases.coordination.k8s.io "l"
    /// is invalid`), as the generic registry's update checks word it.
    #[must_use]
    pub fn invalid_resource(info: &ResourceInfo, name: &str, causes: Vec<Cause>) -> Self {
        let qualified = if info.group.is_empty() {
            info.plural.clone()
        } else {
            format!("{}.{}", info.plural, info.group)
        };
        let mut details = Map::new();
        details.insert("name".into(), json!(name));
        if !info.group.is_empty() {
            details.insert("group".into(), json!(info.group));
        }
        details.insert("kind".into(), json!(info.plural));
        Self::invalid_with(&qualified, name, details, causes)
    }

    /// 403 Forbidden for a create in a namespace being deleted.
    #[must_use]
    pub fn namespace_terminating(info: &ResourceInfo, name: &str, ns: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                info.plural
            ),
        )
        .with_details(resource_details(info, Some(name)))
    }

    /// 422 Invalid for `ListOptions.meta.k8s.io` / `PatchOptions.meta.k8s.io`.
    #[must_use]
    pub fn invalid_options(kind: &str, causes: Vec<Cause>) -> Self {
        let mut details = Map::new();
        details.insert("group".into(), json!("meta.k8s.io"));
        details.insert("kind".into(), json!(kind));
        Self::invalid_with(&format!("{kind}.meta.k8s.io"), "", details, causes)
    }

    fn invalid_with(
        qualified_kind: &str,
        name: &str,
        mut details: Map<String, Value>,
        causes: Vec<Cause>,
    ) -> Self {
        // Go's aggregate lists each distinct error once; the causes keep every one.
        let mut parts: Vec<String> = Vec::new();
        for part in causes.iter().map(|c| format!("{}: {}", c.field, c.message)) {
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        details.insert("causes".into(), json!(causes));
        Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
        )
        .with_details(Value::Object(details))
    }

    /// 410 Expired (no details).
    #[must_use]
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 410 Expired for a list at a compacted resourceVersion.
    #[must_use]
    pub fn list_too_old() -> Self {
        Self::expired("The resourceVersion for the provided list is too old.")
    }

    /// 410 Expired for a continue token older than the history window, carrying a fresh
    /// inconsistent continue token.
    #[must_use]
    pub fn continue_too_old(fresh_token: String) -> Self {
        let mut e = Self::expired(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter, or use the continue token \
             in this response to retrieve the remainder of the results. Continuing with the \
             provided token results in an inconsistent list - objects that were created, \
             modified, or deleted between the time the first chunk was returned and now may \
             show up in the list.",
        );
        e.metadata = Some(Box::new(json!({ "continue": fresh_token })));
        e
    }

    /// 410 Expired carried by a watch ERROR event (watch-cache wording).
    #[must_use]
    pub fn watch_too_old(requested: u64, oldest: u64) -> Self {
        Self::expired(format!("too old resource version: {requested} ({oldest})"))
    }

    /// 504 Timeout for a resourceVersion newer than the server's.
    #[must_use]
    pub fn too_large_rv(requested: u64, current: u64) -> Self {
        Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({"causes": [
            {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
        ]}))
        .with_retry_after(1)
    }

    /// 405 MethodNotAllowed.
    #[must_use]
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 406 NotAcceptable.
    #[must_use]
    pub fn not_acceptable() -> Self {
        Self::new(
            406,
            "NotAcceptable",
            "406: Not Acceptable\n\nAvailable representations: application/json, \
             application/yaml, application/vnd.kubernetes.protobuf",
        )
        .with_details(json!({}))
    }

    /// 415 for a create/update body in an unknown format.
    #[must_use]
    pub fn unsupported_body() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml, application/vnd.kubernetes.protobuf",
        )
    }

    /// 415 for a PATCH with a non-patch content type.
    #[must_use]
    pub fn unsupported_patch() -> Self {
        Self::new(415, "UnsupportedMediaType", "415: Unsupported Media Type")
            .with_details(json!({}))
    }

    /// 401 Unauthorized.
    #[must_use]
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 413 RequestEntityTooLarge.
    #[must_use]
    pub fn too_large_body(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 500 InternalError.
    #[must_use]
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({"causes": [{"message": message}]}))
    }

    /// 429 TooManyRequests with a Retry-After.
    #[must_use]
    pub fn too_many_requests(retry_after: u64) -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "The server has received too many requests and has asked us to try again later",
        )
        .with_retry_after(retry_after)
    }

    /// The `metav1.Status` document for this error.
    #[must_use]
    pub fn to_status(&self) -> Value {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Status<'a> {
            kind: &'static str,
            api_version: &'static str,
            metadata: Value,
            status: &'static str,
            message: &'a str,
            // Go omits an empty reason (`StatusReasonUnknown`).
            #[serde(skip_serializing_if = "str::is_empty")]
            reason: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            details: Option<&'a Value>,
            code: u16,
        }
        serde_json::to_value(Status {
            kind: "Status",
            api_version: "v1",
            metadata: self
                .metadata
                .as_deref()
                .cloned()
                .unwrap_or_else(|| json!({})),
            status: "Failure",
            message: &self.message,
            reason: self.reason,
            details: self.details.as_deref(),
            code: self.code,
        })
        .unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_with_two_causes_joins_them_in_brackets() {
        let e = ApiError::invalid_options(
            "ListOptions",
            vec![
                Cause::new(
                    "FieldValueForbidden",
                    "Forbidden: a",
                    "resourceVersionMatch",
                ),
                Cause::new("FieldValueForbidden", "Forbidden: b", "sendInitialEvents"),
            ],
        );
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: a, \
             sendInitialEvents: Forbidden: b]"
        );
        assert_eq!(e.details.unwrap()["group"], "meta.k8s.io");
    }

    #[test]
    fn too_large_rv_carries_retry_after_in_details_and_header() {
        let e = ApiError::too_large_rv(99, 7);
        assert_eq!(e.retry_after, Some(1));
        let s = e.to_status();
        assert_eq!(s["details"]["retryAfterSeconds"], 1);
        assert_eq!(s["code"], 504);
        assert_eq!(
            s["message"],
            "Timeout: Too large resource version: 99, current: 7"
        );
    }
}
