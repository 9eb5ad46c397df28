//! kube-apiserver's validation of Ingresses and NetworkPolicies
//! (`pkg/apis/networking/validation`), with its field paths, words and order of causes.

use serde_json::Value;

use super::field_rules::{
    PORT_RANGE_MSG, array, cause, int_at, invalid_int, invalid_str, not_supported,
    port_name_errors, present, required_detail, str_at,
};
use crate::status::Cause;

/// `ValidateIngressSpec`: a default backend or rules, and each path's type and backend.
pub(super) fn ingress_causes(spec: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let rules = array(spec, "rules");
    let default_backend = spec
        .and_then(|s| s.get("defaultBackend"))
        .filter(|b| !b.is_null());
    if rules.is_empty() && default_backend.is_none() {
        causes.push(cause(
            "FieldValueInvalid",
            "spec",
            "Invalid value: []: either `defaultBackend` or `rules` must be specified".to_owned(),
        ));
    }
    if let Some(b) = default_backend {
        causes.extend(backend_causes(b, "spec.defaultBackend"));
    }
    for (i, rule) in rules.iter().enumerate() {
        let Some(http) = rule.get("http").filter(|h| !h.is_null()) else {
            continue;
        };
        let at = format!("spec.rules[{i}].http.paths");
        let paths = array(Some(http), "paths");
        if paths.is_empty() {
            causes.push(required_detail(&at, ""));
        }
        for (j, p) in paths.iter().enumerate() {
            causes.extend(http_path_causes(p, &format!("{at}[{j}]")));
        }
    }
    causes
}

/// `validateHTTPIngressPath` (the path checks of the common types, then the backend).
fn http_path_causes(p: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(typ) = p.get("pathType").and_then(Value::as_str) else {
        return vec![required_detail(
            &format!("{at}.pathType"),
            "pathType must be specified",
        )];
    };
    let path = str_at(Some(p), "path");
    let path_field = format!("{at}.path");
    match typ {
        "Exact" | "Prefix" => {
            if !path.starts_with('/') {
                causes.push(invalid_str(&path_field, path, "must be an absolute path"));
            }
        }
        "ImplementationSpecific" => {
            if !path.is_empty() && !path.starts_with('/') {
                causes.push(invalid_str(&path_field, path, "must be an absolute path"));
            }
        }
        _ => causes.push(not_supported(
            &format!("{at}.pathType"),
            typ,
            &["Exact", "ImplementationSpecific", "Prefix"],
        )),
    }
    if let Some(b) = p.get("backend") {
        causes.extend(backend_causes(b, &format!("{at}.backend")));
    } else {
        causes.extend(backend_causes(&Value::Null, &format!("{at}.backend")));
    }
    causes
}

/// `validateIngressBackend`: exactly one of a resource or a service, a service's port.
fn backend_causes(b: &Value, at: &str) -> Vec<Cause> {
    let b = Some(b);
    let (resource, service) = (present(b, "resource"), present(b, "service"));
    let empty = |msg: &str| invalid_str(at, "", msg);
    if resource && service {
        return vec![empty("cannot set both resource and service backends")];
    }
    if resource {
        return Vec::new();
    }
    if !service {
        return vec![empty("resource or service backend is required")];
    }
    let mut causes = Vec::new();
    let svc = b.and_then(|b| b.get("service"));
    if str_at(svc, "name").is_empty() {
        causes.push(required_detail(&format!("{at}.service.name"), ""));
    }
    let port = svc.and_then(|s| s.get("port"));
    let name = str_at(port, "name");
    let number = int_at(port, "number").unwrap_or(0);
    if !name.is_empty() && number != 0 {
        causes.push(empty("cannot set both port name & port number"));
    } else if number != 0 && !(1..=65535).contains(&number) {
        causes.push(invalid_int(
            &format!("{at}.service.port.number"),
            number,
            PORT_RANGE_MSG,
        ));
    } else if name.is_empty() && number == 0 {
        causes.push(required_detail(at, "port name or number is required"));
    }
    causes
}

/// `ValidateNetworkPolicySpec`'s port checks, ingress rules then egress rules.
pub(super) fn network_policy_causes(spec: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    for dir in ["ingress", "egress"] {
        for (i, rule) in array(spec, dir).iter().enumerate() {
            for (j, port) in array(Some(rule), "ports").iter().enumerate() {
                causes.extend(network_policy_port_causes(
                    port,
                    &format!("spec.{dir}[{i}].ports[{j}]"),
                ));
            }
        }
    }
    causes
}

/// `ValidateNetworkPolicyPort`: the protocol, a numeric port and its `endPort`.
fn network_policy_port_causes(p: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(proto) = p.get("protocol").and_then(Value::as_str)
        && !matches!(proto, "TCP" | "UDP" | "SCTP")
    {
        causes.push(not_supported(
            &format!("{at}.protocol"),
            proto,
            &["TCP", "UDP", "SCTP"],
        ));
    }
    let end = int_at(Some(p), "endPort");
    match p.get("port") {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&n) {
                causes.push(invalid_int(&format!("{at}.port"), n, PORT_RANGE_MSG));
            }
            if let Some(e) = end {
                if e < n {
                    causes.push(invalid_int(
                        &format!("{at}.endPort"),
                        n,
                        "must be greater than or equal to `port`",
                    ));
                }
                if !(1..=65535).contains(&e) {
                    causes.push(invalid_int(&format!("{at}.endPort"), e, PORT_RANGE_MSG));
                }
            }
        }
        Some(Value::String(name)) => {
            if let Some(e) = end {
                causes.push(invalid_int(
                    &format!("{at}.endPort"),
                    e,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for e in port_name_errors(name) {
                causes.push(invalid_str(&format!("{at}.port"), name, e));
            }
        }
        _ => {
            if let Some(e) = end {
                causes.push(invalid_int(
                    &format!("{at}.endPort"),
                    e,
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
    causes
}
