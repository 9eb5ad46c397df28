//! Which webhooks a request calls: the configurations in name order, each webhook's `rules`
//! (operations, API groups, versions, resources with their `*` and `pods/*` forms, scope),
//! `namespaceSelector` (the namespace's labels; the object's own for a namespace) and
//! `objectSelector` (the labels of the new or the old object).

use std::sync::Arc;

use serde_json::Value;

use super::Attributes;
#[cfg(test)]
use super::Operation;
use crate::object::StoredObject;
use crate::registry::AppState;
use crate::selector::LabelSelector;

/// Where a webhook is called.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The URL called (`?timeout=Ns` is added).
    pub(crate) url: String,
    /// The name its certificate must hold.
    pub(crate) server_name: String,
    /// The PEM certificates trusted (`caBundle`); empty: none.
    pub(crate) ca_bundle: Vec<u8>,
}

/// One webhook of a configuration, ready to call.
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    /// The webhook's name (`x.example.com`).
    pub(crate) name: String,
    /// Whether it is a mutating webhook.
    pub(crate) mutating: bool,
    /// Where it is called; `Err` the reason it cannot be (a Service that does not exist).
    pub(crate) endpoint: Result<Endpoint, String>,
    /// `failurePolicy: Ignore`.
    pub(crate) ignore_failures: bool,
    /// `timeoutSeconds`.
    pub(crate) timeout_seconds: u64,
    /// `sideEffects`.
    pub(crate) side_effects: String,
    /// `reinvocationPolicy: IfNeeded`.
    pub(crate) reinvoke: bool,
}

/// The stored configurations of one kind, in name order.
pub(crate) fn configurations(state: &AppState, mutating: bool) -> Vec<Arc<StoredObject>> {
    let plural = if mutating {
        "mutatingwebhookconfigurations"
    } else {
        "validatingwebhookconfigurations"
    };
    let Some(info) =
        state
            .registry
            .get(crate::registry::admissionregistration::GROUP, "v1", plural)
    else {
        return Vec::new();
    };
    let mut all = state.store.objects(&info.id());
    all.sort_by(|a, b| a.name().cmp(b.name()));
    all
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Whether `pattern` (`*`, `pods`, `pods/*`, `*/status`, `*/*`) names `resource/sub`.
pub(crate) fn resource_matches(pattern: &str, resource: &str, sub: Option<&str>) -> bool {
    let (pr, ps) = match pattern.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (pattern, None),
    };
    let res_ok = pr == "*" || pr == resource;
    let sub_ok = match (ps, sub) {
        (None, None) => true,
        (Some("*"), _) => true,
        (Some(p), Some(s)) => p == s,
        _ => false,
    };
    res_ok && sub_ok
}

/// Whether a `rules` entry matches the request.
pub(crate) fn rule_matches(rule: &Value, attrs: &Attributes) -> bool {
    let any = |key: &str, v: &str| strings(rule.get(key)).iter().any(|x| *x == "*" || *x == v);
    if !any("operations", attrs.operation.as_str())
        || !any("apiGroups", &attrs.info.group)
        || !any("apiVersions", &attrs.info.version)
    {
        return false;
    }
    if !strings(rule.get("resources"))
        .iter()
        .any(|p| resource_matches(p, &attrs.info.plural, attrs.sub.as_deref()))
    {
        return false;
    }
    match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Namespaced" => attrs.info.namespaced,
        "Cluster" => !attrs.info.namespaced,
        _ => true,
    }
}

/// Whether a `metav1.LabelSelector` selects an object (an invalid one selects nothing).
pub(crate) fn selects(selector: Option<&Value>, obj: &Value) -> bool {
    let Some(sel) = selector.filter(|s| !s.is_null()) else {
        return true;
    };
    let text = crate::registry::selector_string(sel);
    LabelSelector::parse(&text).is_ok_and(|s| s.matches(obj))
}

fn namespace_matches(state: &AppState, hook: &Value, attrs: &Attributes) -> bool {
    let sel = hook.get("namespaceSelector");
    if attrs.info.group.is_empty() && attrs.info.plural == "namespaces" {
        let obj = attrs.object.as_ref().or(attrs.old_object.as_ref());
        return obj.is_none_or(|o| selects(sel, o));
    }
    let Some(ns) = attrs.namespace.as_deref().filter(|_| attrs.info.namespaced) else {
        return true;
    };
    let ns_obj = state
        .registry
        .get("", "v1", "namespaces")
        .and_then(|i| state.store.get(&i.id(), ns))
        .map_or(Value::Null, |o| o.value());
    selects(sel, &ns_obj)
}

fn object_matches(hook: &Value, attrs: &Attributes) -> bool {
    let sel = hook.get("objectSelector");
    [&attrs.object, &attrs.old_object]
        .into_iter()
        .flatten()
        .any(|o| selects(sel, o))
}

fn endpoint(state: &AppState, hook: &Value) -> Result<Endpoint, String> {
    use base64::Engine;
    let cc = hook.get("clientConfig").cloned().unwrap_or(Value::Null);
    let ca_bundle = cc
        .get("caBundle")
        .and_then(Value::as_str)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default();
    if let Some(url) = cc.get("url").and_then(Value::as_str) {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
        };
        return Ok(Endpoint {
            url: url.to_owned(),
            server_name: host.to_owned(),
            ca_bundle,
        });
    }
    let svc = cc.get("service").cloned().unwrap_or(Value::Null);
    let name = svc.get("name").and_then(Value::as_str).unwrap_or_default();
    let ns = svc
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
    let path = svc.get("path").and_then(Value::as_str).unwrap_or("/");
    let found = state
        .registry
        .get("", "v1", "services")
        .and_then(|i| state.store.get(&i.id(), &format!("{ns}/{name}")))
        .ok_or_else(|| format!("service \"{name}\" not found"))?
        .value();
    // No kube-proxy: the Service's port is served on the loopback address, at its
    // targetPort when that is a number (a webhook server listens there), else at its port.
    let local = found
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(port))
        .ok_or_else(|| format!("service {ns}/{name} has no port {port}"))?
        .get("targetPort")
        .and_then(Value::as_i64)
        .unwrap_or(port);
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    Ok(Endpoint {
        url: format!("https://127.0.0.1:{local}{path}"),
        server_name: format!("{name}.{ns}.svc"),
        ca_bundle,
    })
}

/// Whether any webhook of either kind has a rule matching the request (selectors aside).
pub(crate) fn any_rule_matches(state: &AppState, attrs: &Attributes) -> bool {
    [true, false].into_iter().any(|mutating| {
        configurations(state, mutating).iter().any(|cfg| {
            let cfg = cfg.value();
            cfg.get("webhooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|h| h.get("rules").and_then(Value::as_array))
                .flatten()
                .any(|r| rule_matches(r, attrs))
        })
    })
}

/// Whether every `matchConditions` expression of a webhook holds (CEL, with `object`,
/// `oldObject` and `request`); `Err` the evaluation error of one that does not evaluate to a
/// bool.
pub(crate) fn conditions_hold(hook: &Value, attrs: &Attributes) -> Result<bool, String> {
    let Some(conditions) = hook.get("matchConditions").and_then(Value::as_array) else {
        return Ok(true);
    };
    let request = super::review::review(attrs, "")["request"].clone();
    let mut errors = Vec::new();
    for c in conditions {
        let expr = c
            .get("expression")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let program = match cel::Program::compile(expr) {
            Ok(p) => p,
            Err(e) => {
                errors.push(format!("compilation failed: {e}"));
                continue;
            }
        };
        let mut ctx = cel::Context::default();
        let to_cel = crate::registry::crd::cel::to_cel;
        ctx.add_variable_from_value(
            "object",
            to_cel(attrs.object.as_ref().unwrap_or(&Value::Null)),
        );
        ctx.add_variable_from_value(
            "oldObject",
            to_cel(attrs.old_object.as_ref().unwrap_or(&Value::Null)),
        );
        ctx.add_variable_from_value("request", to_cel(&request));
        match program.execute(&ctx) {
            Ok(cel::Value::Bool(false)) => return Ok(false),
            Ok(cel::Value::Bool(true)) => {}
            Ok(other) => errors.push(format!(
                "expression '{expr}' resulted in error: no such overload ({other:?})"
            )),
            Err(e) => errors.push(format!("expression '{expr}' resulted in error: {e}")),
        }
    }
    match errors.len() {
        0 => Ok(true),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// The webhooks of one kind a request calls, in order.
///
/// # Errors
/// A `matchConditions` expression that fails to evaluate on a webhook whose `failurePolicy`
/// is `Fail` (500, as kube-apiserver).
pub(crate) fn hooks(
    state: &AppState,
    mutating: bool,
    attrs: &Attributes,
) -> Result<Vec<Hook>, crate::status::ApiError> {
    let mut out = Vec::new();
    for cfg in configurations(state, mutating) {
        let cfg = cfg.value();
        for hook in cfg
            .get("webhooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let rules = hook.get("rules").and_then(Value::as_array);
            if !rules.into_iter().flatten().any(|r| rule_matches(r, attrs))
                || !namespace_matches(state, hook, attrs)
                || !object_matches(hook, attrs)
            {
                continue;
            }
            let s = |k: &str| hook.get(k).and_then(Value::as_str).unwrap_or_default();
            match conditions_hold(hook, attrs) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) if s("failurePolicy") == "Ignore" => continue,
                Err(e) => return Err(crate::status::ApiError::internal(e)),
            }
            out.push(Hook {
                name: s("name").to_owned(),
                mutating,
                endpoint: endpoint(state, hook),
                ignore_failures: s("failurePolicy") == "Ignore",
                timeout_seconds: hook
                    .get("timeoutSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(10),
                side_effects: s("sideEffects").to_owned(),
                reinvoke: s("reinvocationPolicy") == "IfNeeded",
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::ResourceInfo;
    use serde_json::json;

    fn attrs(op: Operation, plural: &str, sub: Option<&str>) -> Attributes {
        Attributes {
            operation: op,
            info: Arc::new(ResourceInfo::namespaced("", "v1", plural, "Pod")),
            sub: sub.map(str::to_owned),
            namespace: Some("ns".into()),
            name: "p".into(),
            object: Some(json!({"metadata": {"labels": {"app": "web"}}})),
            old_object: None,
            dry_run: false,
            options: json!({}),
        }
    }

    #[test]
    fn resource_patterns_name_resources_and_subresources() {
        assert!(resource_matches("pods", "pods", None));
        assert!(!resource_matches("pods", "pods", Some("status")));
        assert!(resource_matches("pods/*", "pods", Some("status")));
        assert!(resource_matches("pods/*", "pods", None));
        assert!(resource_matches("*/status", "deployments", Some("status")));
        assert!(!resource_matches("*/status", "deployments", None));
        assert!(resource_matches("*", "configmaps", None));
        assert!(!resource_matches("*", "pods", Some("status")));
        assert!(resource_matches("*/*", "pods", Some("binding")));
        assert!(!resource_matches("configmaps", "pods", None));
    }

    #[test]
    fn rules_check_operation_group_version_and_scope() {
        let rule = json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["pods"], "scope": "Namespaced"});
        assert!(rule_matches(&rule, &attrs(Operation::Create, "pods", None)));
        assert!(!rule_matches(
            &rule,
            &attrs(Operation::Update, "pods", None)
        ));
        assert!(!rule_matches(
            &rule,
            &attrs(Operation::Create, "pods", Some("status"))
        ));
        let cluster = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
            "resources": ["*"], "scope": "Cluster"});
        assert!(!rule_matches(
            &cluster,
            &attrs(Operation::Delete, "pods", None)
        ));
        let apps = json!({"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["*"],
            "resources": ["*"]});
        assert!(!rule_matches(
            &apps,
            &attrs(Operation::Create, "pods", None)
        ));
    }

    #[test]
    fn match_conditions_filter_on_the_object_and_the_request() {
        let a = attrs(Operation::Create, "pods", None);
        let hook = |e: &str| json!({"matchConditions": [{"name": "c", "expression": e}]});
        assert_eq!(conditions_hold(&json!({}), &a), Ok(true));
        assert_eq!(
            conditions_hold(&hook("object.metadata.labels.app == 'web'"), &a),
            Ok(true)
        );
        assert_eq!(
            conditions_hold(&hook("request.operation == 'UPDATE'"), &a),
            Ok(false)
        );
        assert_eq!(conditions_hold(&hook("oldObject == null"), &a), Ok(true));
        assert!(conditions_hold(&hook("object.nosuchfield == 1"), &a).is_err());
        assert!(conditions_hold(&hook("'not a bool'"), &a).is_err());
    }

    #[test]
    fn selectors_match_labels_and_an_empty_one_matches_all() {
        let obj = json!({"metadata": {"labels": {"app": "web"}}});
        assert!(selects(Some(&json!({})), &obj));
        assert!(selects(Some(&json!({"matchLabels": {"app": "web"}})), &obj));
        assert!(!selects(Some(&json!({"matchLabels": {"app": "db"}})), &obj));
        let expr = json!({"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]});
        assert!(selects(Some(&expr), &obj));
        assert!(!selects(
            Some(&expr),
            &json!({"metadata": {"labels": {"skip": "yes"}}})
        ));
    }
}
