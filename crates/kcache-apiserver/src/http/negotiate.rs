//! Content negotiation: what the client accepts and what it sent.

use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_TYPE};

use crate::status::ApiError;

/// The representation a response is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Plain JSON objects.
    Json,
    /// Kubernetes protobuf (`application/vnd.kubernetes.protobuf`, `;stream=watch` for
    /// watches): only for kinds with a protobuf type.
    Protobuf,
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

/// One media range of an `Accept` header.
struct Range<'a> {
    /// `type/subtype`, lower case.
    base: String,
    /// The whole range, parameters included.
    media: &'a str,
    q: f32,
}

impl Range<'_> {
    /// Wildcards rank after concrete types of the same quality (goautoneg's order).
    fn rank(&self) -> (u8, u8) {
        let (t, sub) = self.base.split_once('/').unwrap_or((&self.base, ""));
        (u8::from(t == "*"), u8::from(sub == "*"))
    }
}

/// The media ranges of `accept`, best first: by quality, then concrete before wildcard, then
/// in the order written. Ranges with `q=0` are left out.
fn ranges(accept: &str) -> Vec<Range<'_>> {
    let mut out: Vec<Range<'_>> = accept
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|media| Range {
            base: media
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase(),
            media,
            q: param(media, "q")
                .and_then(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0),
        })
        .filter(|r| r.q > 0.0)
        .collect();
    out.sort_by(|a, b| b.q.total_cmp(&a.q).then_with(|| a.rank().cmp(&b.rank())));
    out
}

/// Picks the best acceptable representation from the `Accept` header, as kube-apiserver's
/// negotiation does: protobuf only where `protobuf` (the kind has a protobuf type), else the
/// next acceptable range (e.g. the `application/json` fallback client-go sends).
///
/// # Errors
/// 406 NotAcceptable when nothing listed can be produced (e.g. only protobuf for a custom
/// resource, or XML).
pub(crate) fn output(headers: &HeaderMap, protobuf: bool) -> Result<Output, ApiError> {
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim();
    if accept.is_empty() {
        return Ok(Output::Json);
    }
    for range in ranges(accept) {
        let media = range.media;
        // Only `stream=watch` names a stream kube-apiserver serves.
        if param(media, "stream").is_some_and(|s| !s.is_empty() && s != "watch") {
            continue;
        }
        if range.base == "application/vnd.kubernetes.protobuf" {
            // Tables and metadata in protobuf are not served; the next range may be JSON.
            if protobuf && param(media, "as").is_none() {
                return Ok(Output::Protobuf);
            }
            continue;
        }
        if !matches!(
            range.base.as_str(),
            "application/json" | "*/*" | "application/*"
        ) {
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

    fn accept_for(v: &str, protobuf: bool) -> Result<Output, ApiError> {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_str(v).unwrap());
        output(&h, protobuf)
    }

    fn accept(v: &str) -> Result<Output, ApiError> {
        accept_for(v, true)
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
    fn protobuf_is_chosen_for_kinds_that_have_it_and_json_is_the_fallback() {
        for v in [
            "application/vnd.kubernetes.protobuf",
            "application/vnd.kubernetes.protobuf, application/json",
            "application/vnd.kubernetes.protobuf;stream=watch",
            "application/vnd.kubernetes.protobuf;stream=watch, application/json;stream=watch",
            "application/json;q=0.5, application/vnd.kubernetes.protobuf",
            "*/*;q=0.1, application/vnd.kubernetes.protobuf;q=0.9",
        ] {
            assert_eq!(accept(v).unwrap(), Output::Protobuf, "{v}");
        }
        // A custom resource (no protobuf type): JSON if allowed, else 406.
        assert_eq!(
            accept_for(
                "application/vnd.kubernetes.protobuf, application/json",
                false
            )
            .unwrap(),
            Output::Json
        );
        assert_eq!(
            accept_for("application/vnd.kubernetes.protobuf", false)
                .unwrap_err()
                .code,
            406
        );
        // Quality and wildcards.
        assert_eq!(
            accept("application/vnd.kubernetes.protobuf;q=0.5, application/json").unwrap(),
            Output::Json
        );
        assert_eq!(
            accept("*/*, application/vnd.kubernetes.protobuf").unwrap(),
            Output::Protobuf
        );
        assert_eq!(
            accept("application/json;q=0, application/vnd.kubernetes.protobuf;q=0")
                .unwrap_err()
                .code,
            406
        );
        // Tables in protobuf are not served: the JSON range after it is.
        assert_eq!(
            accept("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1;g=meta.k8s.io").unwrap(),
            Output::Table("meta.k8s.io/v1")
        );
        assert_eq!(
            accept("application/vnd.kubernetes.protobuf;stream=other")
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn xml_is_not_acceptable() {
        assert_eq!(accept("application/xml").unwrap_err().code, 406);
        assert_eq!(accept("application/json").unwrap(), Output::Json);
    }
}
