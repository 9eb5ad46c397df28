//! Validating and Mutating WebhookConfigurations as objects: the defaults and the validation
//! kube-apiserver's admissionregistration/v1 strategy applies (`SetDefaults_*Webhook`,
//! `SetDefaults_Rule`, `SetDefaults_ServiceReference`, `validateValidatingWebhook` and
//! friends), with its field paths and wording.

use serde_json::{Map, Value, json};

use crate::resource::ResourceInfo;
use crate::status::Cause;

/// The API group of the webhook configurations.
pub(crate) const GROUP: &str = "admissionregistration.k8s.io";

/// Which configuration a resource is: `Some(true)` mutating, `Some(false)` validating.
pub(crate) fn kind_of(info: &ResourceInfo) -> Option<bool> {
    if info.group != GROUP || info.schema.is_some() {
        return None;
    }
    match info.plural.as_str() {
        "mutatingwebhookconfigurations" => Some(true),
        "validatingwebhookconfigurations" => Some(false),
        _ => None,
    }
}

/// Fills in the defaults of every webhook of a configuration.
pub(crate) fn set_defaults(info: &ResourceInfo, obj: &mut Map<String, Value>) {
    let Some(mutating) = kind_of(info) else {
        return;
    };
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks.iter_mut().filter_map(Value::as_object_mut) {
        let mut default = |k: &str, v: Value| {
            if hook.get(k).is_none_or(Value::is_null) {
                hook.insert(k.to_owned(), v);
            }
        };
        default("failurePolicy", json!("Fail"));
        default("matchPolicy", json!("Equivalent"));
        default("namespaceSelector", json!({}));
        default("objectSelector", json!({}));
        default("timeoutSeconds", json!(10));
        if mutating {
            default("reinvocationPolicy", json!("Never"));
        }
        if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                if rule.get("scope").is_none_or(Value::is_null) {
                    rule.insert("scope".into(), json!("*"));
                }
            }
        }
        if let Some(svc) = hook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
            && svc.get("port").is_none_or(Value::is_null)
        {
            svc.insert("port".into(), json!(443));
        }
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A string list as kube-apiserver's field errors print it: `["a","b"]`.
fn go_list(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn required(field: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_owned()
    } else {
        format!("Required value: {detail}")
    };
    Cause::new("FieldValueRequired", message, field)
}

fn invalid(field: &str, value: &str, detail: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: {value}: {detail}"),
        field,
    )
}

fn quoted(s: &str) -> String {
    format!("\"{s}\"")
}

/// `IsFullyQualifiedName`: a DNS subdomain with at least three segments.
fn name_causes(field: &str, name: &str) -> Vec<Cause> {
    if name.is_empty() {
        return vec![required(field, "")];
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return vec![invalid(
            field,
            &quoted(name),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character (e.g. \
             'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        )];
    }
    if name.split('.').count() < 3 {
        return vec![invalid(
            field,
            &quoted(name),
            "should be a domain with at least three segments separated by dots",
        )];
    }
    Vec::new()
}

fn rule_causes(rule: &Value, path: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    let ops = strings(rule.get("operations"));
    if ops.is_empty() {
        out.push(required(&format!("{path}.operations"), ""));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        out.push(invalid(
            &format!("{path}.operations"),
            &go_list(&ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    const OPS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    for (i, op) in ops.iter().enumerate() {
        if !OPS.contains(&op.as_str()) {
            out.push(Cause::not_supported(
                &format!("{path}.operations[{i}]"),
                op,
                &OPS,
            ));
        }
    }
    for (key, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let list = strings(rule.get(key));
        if list.is_empty() {
            out.push(required(&format!("{path}.{key}"), ""));
        }
        if list.len() > 1 && list.iter().any(|g| g == "*") {
            out.push(invalid(
                &format!("{path}.{key}"),
                &go_list(&list),
                &format!("if '*' is present, must not specify other {what}"),
            ));
        }
        if key == "apiVersions" {
            for (i, v) in list.iter().enumerate() {
                if v.is_empty() {
                    out.push(required(&format!("{path}.apiVersions[{i}]"), ""));
                }
            }
        }
    }
    let resources = strings(rule.get("resources"));
    if resources.is_empty() {
        out.push(required(&format!("{path}.resources"), ""));
    }
    for (i, r) in resources.iter().enumerate() {
        if r.is_empty() {
            out.push(required(&format!("{path}.resources[{i}]"), ""));
        }
    }
    if resources.len() > 1 && resources.iter().any(|r| r == "*/*") {
        out.push(invalid(
            &format!("{path}.resources"),
            &go_list(&resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if resources.iter().any(|r| r == "*")
        && resources
            .iter()
            .any(|r| !r.is_empty() && r != "*" && !r.contains('/'))
    {
        out.push(invalid(
            &format!("{path}.resources"),
            &go_list(&resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    if let Some(scope) = rule.get("scope").and_then(Value::as_str)
        && !["*", "Cluster", "Namespaced"].contains(&scope)
    {
        out.push(Cause::not_supported(
            &format!("{path}.scope"),
            scope,
            &["*", "Cluster", "Namespaced"],
        ));
    }
    out
}

fn client_config_causes(cc: Option<&Value>, path: &str) -> Vec<Cause> {
    let path = format!("{path}.clientConfig");
    let url = cc.and_then(|c| c.get("url")).and_then(Value::as_str);
    let svc = cc.and_then(|c| c.get("service")).filter(|s| !s.is_null());
    match (url, svc) {
        (Some(url), None) => {
            const FORM: &str = "; desired format: https://host[/path]";
            let field = format!("{path}.url");
            let mut out = Vec::new();
            let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
            if scheme != "https" {
                out.push(invalid(
                    &field,
                    &quoted(scheme),
                    &format!("'https' is the only allowed URL scheme{FORM}"),
                ));
            }
            let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
            if host.is_empty() || !url.contains("://") {
                out.push(invalid(
                    &field,
                    "\"\"",
                    &format!("host must be specified{FORM}"),
                ));
            }
            if let Some((_, q)) = rest.split_once('?') {
                let q = q.split('#').next().unwrap_or_default();
                if !q.is_empty() {
                    out.push(invalid(
                        &field,
                        &quoted(q),
                        "query parameters are not permitted in the URL",
                    ));
                }
            }
            out
        }
        (None, Some(svc)) => {
            let field = format!("{path}.service");
            let mut out = Vec::new();
            // kube-apiserver passes the service's name and namespace to its check in swapped
            // order: a missing name is reported at `namespace`, and the other way round.
            for (key, reported) in [("namespace", "name"), ("name", "namespace")] {
                if svc
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .is_empty()
                {
                    out.push(required(&format!("{field}.{reported}"), ""));
                }
            }
            let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
            if !(1..=65535).contains(&port) {
                out.push(invalid(
                    &format!("{field}.port"),
                    &port.to_string(),
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
            out
        }
        _ => vec![required(&path, "exactly one of url or service is required")],
    }
}

fn hook_causes(hook: &Value, mutating: bool, path: &str) -> Vec<Cause> {
    let mut out = name_causes(
        &format!("{path}.name"),
        hook.get("name").and_then(Value::as_str).unwrap_or_default(),
    );
    for (i, rule) in hook
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        out.extend(rule_causes(rule, &format!("{path}.rules[{i}]")));
    }
    let mut one_of = |key: &str, allowed: &[&str]| {
        if let Some(v) = hook.get(key).and_then(Value::as_str)
            && !allowed.contains(&v)
        {
            out.push(Cause::not_supported(&format!("{path}.{key}"), v, allowed));
        }
    };
    one_of("failurePolicy", &["Fail", "Ignore"]);
    one_of("matchPolicy", &["Equivalent", "Exact"]);
    match hook.get("sideEffects").and_then(Value::as_str) {
        None => out.push(required(
            &format!("{path}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        Some(v) if !["None", "NoneOnDryRun"].contains(&v) => out.push(Cause::not_supported(
            &format!("{path}.sideEffects"),
            v,
            &["None", "NoneOnDryRun"],
        )),
        Some(_) => {}
    }
    if let Some(t) = hook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        out.push(invalid(
            &format!("{path}.timeoutSeconds"),
            &t.to_string(),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    if mutating
        && let Some(v) = hook.get("reinvocationPolicy").and_then(Value::as_str)
        && !["IfNeeded", "Never"].contains(&v)
    {
        out.push(Cause::not_supported(
            &format!("{path}.reinvocationPolicy"),
            v,
            &["IfNeeded", "Never"],
        ));
    }
    out.extend(client_config_causes(hook.get("clientConfig"), path));
    out
}

fn review_versions_causes(hook: &Value, path: &str) -> Vec<Cause> {
    let path = format!("{path}.admissionReviewVersions");
    let versions = strings(hook.get("admissionReviewVersions"));
    if versions.is_empty() {
        return vec![required(&path, "must specify one of v1, v1beta1")];
    }
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        if seen.contains(v) {
            out.push(invalid(
                &format!("{path}[{i}]"),
                &quoted(v),
                "duplicate version",
            ));
            continue;
        }
        seen.push(v.clone());
    }
    if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
        out.push(invalid(
            &path,
            &go_list(&versions),
            "must include at least one of v1, v1beta1",
        ));
    }
    out
}

/// The validation causes of a configuration (after the metadata's), in kube-apiserver's order.
pub(crate) fn causes(info: &ResourceInfo, obj: &Map<String, Value>) -> Vec<Cause> {
    let Some(mutating) = kind_of(info) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, hook) in obj
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("webhooks[{i}]");
        out.extend(hook_causes(hook, mutating, &path));
        out.extend(review_versions_causes(hook, &path));
        let name = hook.get("name").and_then(Value::as_str).unwrap_or_default();
        if !name.is_empty() {
            if names.contains(&name) {
                out.push(Cause::new(
                    "FieldValueDuplicate",
                    format!("Duplicate value: \"{name}\""),
                    &format!("{path}.name"),
                ));
            } else {
                names.push(name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vwc() -> ResourceInfo {
        ResourceInfo::cluster(
            GROUP,
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
        )
    }

    #[test]
    fn defaults_fill_every_webhook_and_rule() {
        let info = ResourceInfo::cluster(
            GROUP,
            "v1",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
        );
        let mut obj = json!({"webhooks": [{"name": "a.b.c", "rules": [{"operations": ["*"]}],
            "clientConfig": {"service": {"name": "s", "namespace": "n"}}}]});
        let m = obj.as_object_mut().unwrap();
        set_defaults(&info, m);
        let h = &obj["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
    }

    #[test]
    fn validation_words_the_usual_mistakes_as_kube_apiserver() {
        let obj = json!({"webhooks": [{"name": "short", "timeoutSeconds": 31,
            "clientConfig": {"url": "http://x"}, "rules": [{"operations": ["CREATE"],
            "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]});
        let c = causes(&vwc(), obj.as_object().unwrap());
        let got: Vec<(String, String)> = c.into_iter().map(|c| (c.field, c.message)).collect();
        assert_eq!(got[0].0, "webhooks[0].name");
        assert!(got[0].1.contains("at least three segments"));
        assert_eq!(
            got[1],
            (
                "webhooks[0].sideEffects".into(),
                "Required value: must specify one of None, NoneOnDryRun".into()
            )
        );
        assert_eq!(got[2].0, "webhooks[0].timeoutSeconds");
        assert!(got[3].1.starts_with("Invalid value: \"http\": 'https'"));
        assert_eq!(got[4].0, "webhooks[0].admissionReviewVersions");
    }
}
