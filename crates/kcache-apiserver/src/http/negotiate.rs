//! Content negotiation: what the client accepts and what it sent.

use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_TYPE};

use crate::status::ApiError;

/// The representation a response is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Plain JSON objects.
    Json,
    /// `meta.k8s.io` Table (kubectl); the payload is the API version of the table.
    Table(&'static str),
    /// `PartialObjectMetadata[List]`.
    Metadata(&'static str),
    /// Aggregated discovery (`apidiscovery.k8s.io/v2`).
    Discovery,
}

fn param<'a>(media: &'a str, key: &str) -> Option<&'a str> {
    media.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// Picks the first acceptable representation from the `Accept` header.
///
/// # Errors
/// 406 NotAcceptable when nothing listed can be produced (e.g. only protobuf or XML).
pub(crate) fn output(headers: &HeaderMap) -> Result<Output, ApiError> {
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim();
    if accept.is_empty() {
        return Ok(Output::Json);
    }
    for media in accept.split(',') {
        let media = media.trim();
        let base = media
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if !matches!(base.as_str(), "application/json" | "*/*" | "application/*") {
            continue;
        }
        let group = param(media, "g");
        let version = param(media, "v");
        match param(media, "as") {
            None => return Ok(Output::Json),
            Some("Table") if group == Some("meta.k8s.io") => {
                return Ok(Output::Table(if version == Some("v1beta1") {
                    "meta.k8s.io/v1beta1"
                } else {
                    "meta.k8s.io/v1"
                }));
            }
            Some("PartialObjectMetadataList" | "PartialObjectMetadata")
                if group == Some("meta.k8s.io") =>
            {
                return Ok(Output::Metadata(if version == Some("v1beta1") {
                    "meta.k8s.io/v1beta1"
                } else {
                    "meta.k8s.io/v1"
                }));
            }
            Some("APIGroupDiscoveryList") if group == Some("apidiscovery.k8s.io") => {
                return Ok(Output::Discovery);
            }
            Some(_) => {}
        }
    }
    Err(ApiError::not_acceptable())
}

/// The body formats a write request may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyType {
    /// `application/json` (or no Content-Type).
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/merge-patch+json`.
    MergePatch,
    /// `application/json-patch+json`.
    JsonPatch,
    /// `application/strategic-merge-patch+json`.
    StrategicMergePatch,
    /// `application/apply-patch+yaml` (server-side apply).
    ApplyPatch,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
    /// Anything else.
    Other,
}

/// Classifies the request's `Content-Type`.
#[must_use]
pub(crate) fn body_type(headers: &HeaderMap) -> BodyType {
    let ct = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let base = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match base.as_str() {
        "" | "application/json" => BodyType::Json,
        "application/yaml" => BodyType::Yaml,
        "application/merge-patch+json" => BodyType::MergePatch,
        "application/json-patch+json" => BodyType::JsonPatch,
        "application/strategic-merge-patch+json" => BodyType::StrategicMergePatch,
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => BodyType::ApplyPatch,
        "application/vnd.kubernetes.protobuf" => BodyType::Protobuf,
        _ => BodyType::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn accept(v: &str) -> Result<Output, ApiError> {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_str(v).unwrap());
        output(&h)
    }

    #[test]
    fn kubectl_table_accept_header_selects_a_table() {
        let v = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(accept(v).unwrap(), Output::Table("meta.k8s.io/v1"));
        assert_eq!(
            accept("application/json;as=Table;v=v1beta1;g=meta.k8s.io").unwrap(),
            Output::Table("meta.k8s.io/v1beta1")
        );
    }

    #[test]
    fn protobuf_with_json_fallback_is_answered_in_json_and_xml_is_not_acceptable() {
        assert_eq!(
            accept("application/vnd.kubernetes.protobuf, application/json").unwrap(),
            Output::Json
        );
        assert_eq!(accept("application/xml").unwrap_err().code, 406);
        assert_eq!(
            accept("application/vnd.kubernetes.protobuf")
                .unwrap_err()
                .code,
            406
        );
    }
}
