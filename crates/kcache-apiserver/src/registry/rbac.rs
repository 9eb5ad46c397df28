//! kube-apiserver's RBAC validation (`pkg/apis/rbac/validation`): the defaults of a binding,
//! its role reference and subjects, the rules of a role, and a role reference that may not
//! change.

use serde_json::{Map, Value, json};

use super::field_rules::{DNS_SUBDOMAIN_MSG, RBAC_GROUP, invalid, is_subdomain_format, required};
use crate::resource::ResourceInfo;
use crate::status::Cause;

/// RBAC defaults: a binding's `roleRef.apiGroup` and its User/Group subjects' `apiGroup`.
pub(crate) fn rbac_defaults(info: &ResourceInfo, obj: &mut Map<String, Value>) {
    if info.group != RBAC_GROUP || !info.plural.ends_with("bindings") {
        return;
    }
    let role_ref = obj.entry("roleRef").or_insert_with(|| json!({}));
    if let Some(r) = role_ref.as_object_mut()
        && r.get("apiGroup")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        r.insert("apiGroup".into(), json!(RBAC_GROUP));
    }
    if let Some(subjects) = obj.get_mut("subjects").and_then(Value::as_array_mut) {
        for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
            let kind = s.get("kind").and_then(Value::as_str).unwrap_or("");
            if matches!(kind, "User" | "Group")
                && s.get("apiGroup")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                s.insert("apiGroup".into(), json!(RBAC_GROUP));
            }
        }
    }
}

/// A binding's role reference and subjects (`ValidateRoleBinding`, `ValidateClusterRoleBinding`).
pub(super) fn binding_causes(info: &ResourceInfo, obj: &Map<String, Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let r = obj.get("roleRef");
    let s = |k: &str| {
        r.and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    if s("apiGroup") != RBAC_GROUP {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!(
                "Unsupported value: \"{}\": supported values: \"{RBAC_GROUP}\"",
                s("apiGroup")
            ),
            "roleRef.apiGroup",
        ));
    }
    let kinds: &[&str] = if info.plural == "clusterrolebindings" {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    if !kinds.contains(&s("kind")) {
        let quoted: Vec<String> = kinds.iter().map(|k| format!("\"{k}\"")).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!(
                "Unsupported value: \"{}\": supported values: {}",
                s("kind"),
                quoted.join(", ")
            ),
            "roleRef.kind",
        ));
    }
    if s("name").is_empty() {
        causes.push(required("roleRef.name"));
    }
    let namespaced = info.plural == "rolebindings";
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, subject) in subjects.into_iter().flatten().enumerate() {
        causes.extend(subject_causes(
            subject,
            namespaced,
            &format!("subjects[{i}]"),
        ));
    }
    causes
}

/// `ValidateRoleBindingSubject`: a name, and per kind its name, API group and namespace.
fn subject_causes(subject: &Value, namespaced: bool, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    let (name, group) = (s("name"), s("apiGroup"));
    if name.is_empty() {
        causes.push(required(&format!("{at}.name")));
    }
    let unsupported = |field: &str, value: &str, supported: &str| {
        Cause::new(
            "FieldValueNotSupported",
            format!("Unsupported value: \"{value}\": supported values: {supported}"),
            &format!("{at}.{field}"),
        )
    };
    match s("kind") {
        "ServiceAccount" => {
            if name.len() > 253 {
                causes.push(invalid(
                    &format!("{at}.name"),
                    name,
                    "must be no more than 253 characters",
                ));
            }
            if !name.is_empty() && !is_subdomain_format(name) {
                causes.push(invalid(&format!("{at}.name"), name, DNS_SUBDOMAIN_MSG));
            }
            if !group.is_empty() {
                causes.push(unsupported("apiGroup", group, "\"\""));
            }
            if !namespaced && s("namespace").is_empty() {
                causes.push(required(&format!("{at}.namespace")));
            }
        }
        "User" | "Group" => {
            if group != RBAC_GROUP {
                causes.push(unsupported("apiGroup", group, &format!("\"{RBAC_GROUP}\"")));
            }
        }
        kind => causes.push(unsupported(
            "kind",
            kind,
            "\"ServiceAccount\", \"User\", \"Group\"",
        )),
    }
    causes
}

/// The rules of a Role or ClusterRole, as kube-apiserver's `ValidatePolicyRule`.
pub(super) fn rule_causes(info: &ResourceInfo, obj: &Map<String, Value>) -> Vec<Cause> {
    let namespaced = info.plural == "roles";
    let mut causes = Vec::new();
    let len = |r: &Value, k: &str| r.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    let rules = obj.get("rules").and_then(Value::as_array);
    for (i, r) in rules.into_iter().flatten().enumerate() {
        let at = format!("rules[{i}]");
        if len(r, "verbs") == 0 {
            causes.push(Cause::new(
                "FieldValueRequired",
                "Required value: verbs must contain at least one value",
                &format!("{at}.verbs"),
            ));
        }
        if len(r, "nonResourceURLs") > 0 {
            let urls = r.get("nonResourceURLs").and_then(Value::as_array);
            let shown: Vec<String> = urls
                .into_iter()
                .flatten()
                .map(|u| u.as_str().unwrap_or("").to_owned())
                .collect();
            let shown = format!("[]string{{\"{}\"}}", shown.join("\", \""));
            if namespaced {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!(
                        "Invalid value: {shown}: namespaced rules cannot apply to non-resource URLs"
                    ),
                    &format!("{at}.nonResourceURLs"),
                ));
            }
            if len(r, "apiGroups") + len(r, "resources") + len(r, "resourceNames") > 0 {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!(
                        "Invalid value: {shown}: rules cannot apply to both regular resources \
                         and non-resource URLs"
                    ),
                    &format!("{at}.nonResourceURLs"),
                ));
            }
            continue;
        }
        if len(r, "apiGroups") == 0 {
            causes.push(Cause::new(
                "FieldValueRequired",
                "Required value: resource rules must supply at least one api group",
                &format!("{at}.apiGroups"),
            ));
        }
        if len(r, "resources") == 0 {
            causes.push(Cause::new(
                "FieldValueRequired",
                "Required value: resource rules must supply at least one resource",
                &format!("{at}.resources"),
            ));
        }
    }
    causes
}

/// `cannot change roleRef`, as the RBAC update validation words it.
pub(crate) fn rbac_update_causes(
    info: &ResourceInfo,
    old: &Value,
    new: &Map<String, Value>,
) -> Vec<Cause> {
    if info.group != RBAC_GROUP || !info.plural.ends_with("bindings") {
        return Vec::new();
    }
    let (a, b) = (old.get("roleRef"), new.get("roleRef"));
    if a == b {
        return Vec::new();
    }
    let s = |k: &str| {
        b.and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    vec![Cause::new(
        "FieldValueInvalid",
        format!(
            "Invalid value: rbac.RoleRef{{APIGroup:\"{}\", Kind:\"{}\", Name:\"{}\"}}: cannot change roleRef",
            s("apiGroup"),
            s("kind"),
            s("name")
        ),
        "roleRef",
    )]
}
