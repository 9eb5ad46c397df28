//! The access and identity reviews answered from the server's authorizer, as
//! kube-apiserver's `pkg/registry/authorization` and `authentication` REST answer them:
//! SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview,
//! SelfSubjectRulesReview and SelfSubjectReview.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Authz;
use super::UserInfo;
use super::attrs::Attributes;
use crate::status::ApiError;

fn s(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_owned()
}

fn invalid(kind: &str, field: &str, value: &str, why: &str) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!(
            "{kind}.authorization.k8s.io \"\" is invalid: {field}: Invalid value: {value}: {why}"
        ),
    )
    .with_details(json!({"group": "authorization.k8s.io", "kind": kind,
        "causes": [{"reason": "FieldValueInvalid",
                    "message": format!("Invalid value: {value}: {why}"), "field": field}]}))
}

/// The attributes a review's spec asks about.
fn spec_attributes(kind: &str, spec: &Value) -> Result<Attributes, ApiError> {
    let res = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    match (res, non) {
        (Some(_), Some(n)) => Err(invalid(
            kind,
            "spec.nonResourceAttributes",
            &go_value(n),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => Err(invalid(
            kind,
            "spec.resourceAttributes",
            "\"null\"",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        (Some(r), None) => {
            let mut a = Attributes::resource(
                &s(r, "verb"),
                &s(r, "group"),
                &s(r, "resource"),
                &s(r, "subresource"),
                &s(r, "namespace"),
                &s(r, "name"),
            );
            a.version = s(r, "version");
            Ok(a)
        }
        (None, Some(n)) => Ok(Attributes::non_resource(&s(n, "verb"), &s(n, "path"))),
    }
}

fn go_value(v: &Value) -> String {
    format!("{:?}", v.to_string())
}

/// The user a SubjectAccessReview's spec names.
fn spec_user(spec: &Value) -> UserInfo {
    let list = |k: &str| -> Vec<String> {
        spec.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let vals = v
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default();
                    (k.clone(), vals)
                })
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        name: s(spec, "user"),
        uid: s(spec, "uid"),
        groups: list("groups"),
        extra,
    }
}

fn decision(state: &Authz<'_>, user: &UserInfo, a: &Attributes) -> Value {
    let mut status = Map::new();
    match super::rbac::authorize(state, user, a) {
        Ok(reason) => {
            status.insert("allowed".into(), json!(true));
            if !reason.is_empty() {
                status.insert("reason".into(), json!(reason));
            }
        }
        Err(reason) => {
            status.insert("allowed".into(), json!(false));
            if !reason.is_empty() {
                status.insert("reason".into(), json!(reason));
            }
        }
    }
    Value::Object(status)
}

/// The status of the review `obj` of kind `plural` posted by `requester` (at `namespace`
/// for the namespaced LocalSubjectAccessReview).
pub(crate) fn answer(
    state: &Authz<'_>,
    requester: &UserInfo,
    plural: &str,
    obj: &Value,
    namespace: Option<&str>,
) -> Result<Value, ApiError> {
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    match plural {
        "selfsubjectreviews" => Ok(json!({"userInfo": requester.to_json()})),
        "selfsubjectaccessreviews" => {
            let a = spec_attributes("SelfSubjectAccessReview", &spec)?;
            Ok(decision(state, requester, &a))
        }
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            let kind = if plural == "subjectaccessreviews" {
                "SubjectAccessReview"
            } else {
                "LocalSubjectAccessReview"
            };
            let user = spec_user(&spec);
            if user.name.is_empty() && user.groups.is_empty() {
                return Err(invalid(
                    kind,
                    "spec.user",
                    "\"\"",
                    "at least one of user or group must be specified",
                ));
            }
            let a = spec_attributes(kind, &spec)?;
            if plural == "localsubjectaccessreviews" {
                let ns = namespace.unwrap_or("");
                if !a.resource_request {
                    return Err(invalid(
                        kind,
                        "spec.nonResourceAttributes",
                        &go_value(spec.get("nonResourceAttributes").unwrap_or(&Value::Null)),
                        "disallowed on this kind of request",
                    ));
                }
                if a.namespace != ns {
                    return Err(ApiError::bad_request(format!(
                        "spec.resourceAttributes.namespace must match namespace: {ns}"
                    )));
                }
            }
            Ok(decision(state, &user, &a))
        }
        "selfsubjectrulesreviews" => {
            let ns = s(&spec, "namespace");
            let (rules, errors) = if state.enabled {
                super::rbac::snapshot(state).rules_for(requester, &ns)
            } else {
                (
                    vec![
                        super::rbac::Rule {
                            verbs: vec!["*".into()],
                            api_groups: vec!["*".into()],
                            resources: vec!["*".into()],
                            ..Default::default()
                        },
                        super::rbac::Rule {
                            verbs: vec!["*".into()],
                            non_resource_urls: vec!["*".into()],
                            ..Default::default()
                        },
                    ],
                    Vec::new(),
                )
            };
            let resource: Vec<Value> = rules
                .iter()
                .filter(|r| !r.resources.is_empty())
                .map(|r| {
                    super::rbac::Rule {
                        non_resource_urls: Vec::new(),
                        ..r.clone()
                    }
                    .to_json()
                })
                .collect();
            let non_resource: Vec<Value> = rules
                .iter()
                .filter(|r| !r.non_resource_urls.is_empty())
                .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}))
                .collect();
            let mut status = json!({"resourceRules": resource, "nonResourceRules": non_resource,
                                    "incomplete": !errors.is_empty()});
            if !errors.is_empty() {
                status["evaluationError"] = json!(if errors.len() == 1 {
                    errors[0].clone()
                } else {
                    format!("[{}]", errors.join(", "))
                });
            }
            Ok(status)
        }
        _ => Ok(json!({"allowed": true})),
    }
}
