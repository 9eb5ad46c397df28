//! Query parameters of list and watch requests (`metav1.ListOptions`) and their
//! validation, worded as kube-apiserver words it.

use std::collections::HashMap;
use std::time::Duration;

use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Cause};

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RvMatch {
    /// `Exact`.
    Exact,
    /// `NotOlderThan`.
    NotOlderThan,
}

/// Parsed list/watch options.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListParams {
    /// `watch=1|true`.
    pub watch: bool,
    /// The raw `resourceVersion` (None when absent or empty).
    pub resource_version: Option<String>,
    /// `resourceVersion` as a number, when set and non-empty.
    pub rv: Option<u64>,
    /// `resourceVersionMatch`.
    pub rv_match: Option<RvMatch>,
    /// `limit` (absent or <= 0 means no limit).
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
}

fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "True" | "TRUE" | "t" | "T")
}

fn parse_bool(name: &str, v: &str) -> Result<bool, ApiError> {
    match v {
        "1" | "true" | "True" | "TRUE" | "t" | "T" => Ok(true),
        "0" | "false" | "False" | "FALSE" | "f" | "F" | "" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "invalid value for {name}: strconv.ParseBool: parsing \"{v}\": invalid syntax"
        ))),
    }
}

/// Parses a resourceVersion the way the server's storage does.
///
/// # Errors
/// 400 BadRequest for a non-numeric value.
pub(crate) fn parse_rv(raw: &str) -> Result<u64, ApiError> {
    raw.parse::<u64>().map_err(|e| {
        let why = if raw.chars().all(|c| c.is_ascii_digit()) && !raw.is_empty() {
            "value out of range"
        } else {
            "invalid syntax"
        };
        let _ = e;
        ApiError::bad_request(format!(
            "invalid resource version: resourceVersion: Invalid value: \"{raw}\": \
             strconv.ParseUint: parsing \"{raw}\": {why}"
        ))
    })
}

impl ListParams {
    /// Parses and validates list/watch options. `force_watch` is set for the deprecated
    /// `/watch/` path form; `field_labels` are the kind's field-selector fields when it has its
    /// own ([`crate::selector::field_labels`]).
    ///
    /// # Errors
    /// 400 for unparsable values and selectors, 422 for invalid combinations.
    pub(crate) fn parse(
        q: &HashMap<String, String>,
        force_watch: bool,
        field_labels: Option<&[&str]>,
    ) -> Result<Self, ApiError> {
        let get = |k: &str| q.get(k).map(String::as_str);
        let mut p = ListParams {
            watch: force_watch || get("watch").is_some_and(truthy),
            ..Default::default()
        };
        p.labels = LabelSelector::parse(get("labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.0))?;
        if let Some(l) = get("limit") {
            let n: i64 = l.parse().map_err(|_| {
                ApiError::bad_request(format!("strconv.ParseInt: parsing \"{l}\": invalid syntax"))
            })?;
            p.limit = (n > 0).then(|| usize::try_from(n).unwrap_or(usize::MAX));
        }
        if let Some(t) = get("timeoutSeconds") {
            let n: i64 = t.parse().map_err(|_| {
                ApiError::bad_request(format!("strconv.ParseInt: parsing \"{t}\": invalid syntax"))
            })?;
            p.timeout = (n > 0).then(|| Duration::from_secs(n.unsigned_abs()));
        }
        if let Some(b) = get("allowWatchBookmarks") {
            p.allow_bookmarks = parse_bool("allowWatchBookmarks", b)?;
        }
        if let Some(b) = get("sendInitialEvents") {
            p.send_initial_events = Some(parse_bool("sendInitialEvents", b)?);
        }
        p.resource_version = get("resourceVersion")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        p.continue_token = get("continue").filter(|s| !s.is_empty()).map(str::to_owned);
        let raw_match = get("resourceVersionMatch").unwrap_or("");
        validate(&p, raw_match)?;
        p.rv_match = match raw_match {
            "Exact" => Some(RvMatch::Exact),
            "NotOlderThan" => Some(RvMatch::NotOlderThan),
            _ => None,
        };
        if let Some(raw) = &p.resource_version {
            p.rv = Some(parse_rv(raw)?);
        }
        let raw_fields = get("fieldSelector").unwrap_or("");
        p.fields = match field_labels {
            Some(labels) => FieldSelector::parse_labels(raw_fields, labels),
            None => FieldSelector::parse(raw_fields, &[]),
        }
        .map_err(|e| ApiError::bad_request(e.0))?;
        Ok(p)
    }
}

fn forbidden(field: &str, msg: &str) -> Cause {
    Cause::new("FieldValueForbidden", format!("Forbidden: {msg}"), field)
}

fn validate(p: &ListParams, rv_match: &str) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let rv = p.resource_version.as_deref().unwrap_or("");
    if p.watch {
        if p.send_initial_events.is_some() && rv_match != "NotOlderThan" {
            causes.push(forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !rv_match.is_empty() {
            if p.send_initial_events.is_none() {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if rv_match != "NotOlderThan" {
                causes.push(Cause::not_supported(
                    "resourceVersionMatch",
                    rv_match,
                    &["NotOlderThan"],
                ));
            }
            if p.continue_token.is_some() {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
    } else {
        if !rv_match.is_empty() {
            if rv.is_empty() {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if p.continue_token.is_some() {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            match rv_match {
                "NotOlderThan" => {}
                "Exact" => {
                    if rv == "0" {
                        causes.push(forbidden(
                            "resourceVersionMatch",
                            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                        ));
                    }
                }
                other => causes.push(Cause::not_supported(
                    "resourceVersionMatch",
                    other,
                    &["Exact", "NotOlderThan", ""],
                )),
            }
        }
        if p.send_initial_events.is_some() {
            causes.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_options("ListOptions", causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<ListParams, ApiError> {
        let q = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ListParams::parse(&q, false, None)
    }

    #[test]
    fn send_initial_events_on_a_plain_list_is_rejected_with_two_causes() {
        let e = parse(&[
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
        ])
        .unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: \
             resourceVersionMatch is forbidden unless resourceVersion is provided, \
             sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]"
        );
    }

    #[test]
    fn non_numeric_resource_version_is_a_bad_request() {
        let e = parse(&[("resourceVersion", "abc")]).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message
                .contains("strconv.ParseUint: parsing \"abc\": invalid syntax")
        );
    }

    #[test]
    fn negative_limit_means_no_limit() {
        assert_eq!(parse(&[("limit", "-1")]).unwrap().limit, None);
        assert_eq!(parse(&[("limit", "3")]).unwrap().limit, Some(3));
    }
}
