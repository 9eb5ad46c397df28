//! Escalation and bind checks on writes of roles and bindings (kube-apiserver's
//! `pkg/registry/rbac` policy-based storage): a user may write a Role or ClusterRole only with
//! rules it holds itself (or the `escalate` verb on it), and a binding only to a role whose
//! rules it holds (or the `bind` verb on it); `system:masters` may do both.

use serde_json::Value;

use super::Authz;
use super::attrs::{Attributes, forbidden_resource};
use super::rbac::{GROUP, Rule, snapshot};
use super::{MASTERS, UserInfo};
use crate::status::ApiError;

/// A servant rule broken down into rules of one verb, group, resource and name (or one URL).
fn breakdown(r: &Rule) -> Vec<Rule> {
    let one = |s: &String| vec![s.clone()];
    let mut out = Vec::new();
    for g in &r.api_groups {
        for res in &r.resources {
            for v in &r.verbs {
                if r.resource_names.is_empty() {
                    out.push(Rule {
                        verbs: one(v),
                        api_groups: one(g),
                        resources: one(res),
                        ..Rule::default()
                    });
                } else {
                    for n in &r.resource_names {
                        out.push(Rule {
                            verbs: one(v),
                            api_groups: one(g),
                            resources: one(res),
                            resource_names: one(n),
                            ..Rule::default()
                        });
                    }
                }
            }
        }
    }
    for u in &r.non_resource_urls {
        for v in &r.verbs {
            out.push(Rule {
                verbs: one(v),
                non_resource_urls: one(u),
                ..Rule::default()
            });
        }
    }
    out
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| set.contains(w))
}

fn covers(owner: &Rule, sub: &Rule) -> bool {
    let star = |v: &[String], s: &str| v.iter().any(|x| x == s);
    let verbs = star(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = star(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = star(&owner.resources, "*")
        || has_all(&owner.resources, &sub.resources)
        || sub.resources.iter().all(|p| {
            owner.resources.contains(p)
                || p.split_once('/')
                    .is_some_and(|(_, s)| owner.resources.contains(&format!("*/{s}")))
        });
    let urls = sub.non_resource_urls.iter().all(|p| {
        owner
            .non_resource_urls
            .iter()
            .any(|o| o == p || (o.ends_with('*') && p.starts_with(o.trim_end_matches('*'))))
    });
    let names = owner.resource_names.is_empty()
        || (!sub.resource_names.is_empty() && has_all(&owner.resource_names, &sub.resource_names));
    verbs && groups && resources && names && urls
}

/// The rules of `servant` no rule of `owner` covers (kube-apiserver's `Covers`).
pub(crate) fn uncovered(owner: &[Rule], servant: &[Rule]) -> Vec<Rule> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|s| !owner.iter().any(|o| covers(o, s)))
        .collect()
}

/// Simple rules (one group, one resource, at most one name) merged by verbs.
fn compact(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    let mut simple: Vec<Rule> = Vec::new();
    for r in rules {
        let is_simple = r.resource_names.len() <= 1
            && r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1;
        if !is_simple {
            out.push(r);
            continue;
        }
        match simple.iter_mut().find(|s| {
            s.api_groups == r.api_groups
                && s.resources == r.resources
                && s.resource_names == r.resource_names
        }) {
            Some(s) => s.verbs.extend(r.verbs),
            None => simple.push(r),
        }
    }
    out.extend(simple);
    out
}

fn go_list(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// `rbacv1helpers.CompactString`.
fn compact_string(r: &Rule) -> String {
    let mut parts = Vec::new();
    for (k, v) in [
        ("APIGroups", &r.api_groups),
        ("Resources", &r.resources),
        ("NonResourceURLs", &r.non_resource_urls),
        ("ResourceNames", &r.resource_names),
        ("Verbs", &r.verbs),
    ] {
        if !v.is_empty() {
            parts.push(format!("{k}:{}", go_list(v)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// Storage-side NotFound wording of a role resolution error (the registry's getters name the
/// plural resource, the authorizer's listers the singular).
fn storage_wording(e: &str) -> String {
    e.replacen(
        &format!("clusterrole.{GROUP}"),
        &format!("clusterroles.{GROUP}"),
        1,
    )
    .replacen(&format!("role.{GROUP}"), &format!("roles.{GROUP}"), 1)
}

/// `ConfirmNoEscalation`: `Err(message)` when `user` does not hold all of `rules` in
/// `namespace`.
fn confirm_no_escalation(
    state: &Authz<'_>,
    user: &UserInfo,
    namespace: &str,
    rules: &[Rule],
) -> Result<(), String> {
    let (owned, errors) = snapshot(state).rules_for(user, namespace);
    let missing = uncovered(&owned, rules);
    if missing.is_empty() {
        return Ok(());
    }
    let mut described: Vec<String> = compact(missing).iter().map(compact_string).collect();
    described.sort();
    described.dedup();
    let mut msg = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        go_list(&user.groups),
        described.join("\n")
    );
    if !errors.is_empty() {
        let errs: Vec<String> = errors.iter().map(|e| storage_wording(e)).collect();
        let agg = if errs.len() == 1 {
            errs[0].clone()
        } else {
            format!("[{}]", errs.join(", "))
        };
        msg.push_str(&format!("; resolution errors: [{agg}]"));
    }
    Err(msg)
}

/// Whether this write needs the checks: RBAC on, the user not in `system:masters`, a create,
/// update or patch of one of the four RBAC kinds (not a subresource).
pub(crate) fn applies(state: &Authz<'_>, user: &UserInfo, a: &Attributes) -> bool {
    state.enabled
        && !user.in_group(MASTERS)
        && a.resource_request
        && a.group == GROUP
        && a.subresource.is_empty()
        && matches!(a.verb.as_str(), "create" | "update" | "patch")
        && matches!(
            a.resource.as_str(),
            "roles" | "clusterroles" | "rolebindings" | "clusterrolebindings"
        )
}

/// The escalation or bind check of writing `obj` (the object as it would be stored) by
/// `user`, for the request `a`.
pub(crate) fn check(
    state: &Authz<'_>,
    user: &UserInfo,
    a: &Attributes,
    obj: &Value,
) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&a.name)
        .to_owned();
    let denied = |msg: &str| forbidden_resource(GROUP, &a.resource, &name, msg);
    match a.resource.as_str() {
        "roles" | "clusterroles" => {
            let mut esc = a.clone();
            esc.verb = "escalate".into();
            if super::rbac::authorize(state, user, &esc).is_ok() {
                return Ok(());
            }
            confirm_no_escalation(state, user, &a.namespace, &Rule::all_from(obj))
                .map_err(|m| denied(&m))?;
            if a.resource == "clusterroles"
                && obj.get("aggregationRule").is_some_and(|r| !r.is_null())
            {
                let full = [
                    Rule {
                        verbs: vec!["*".into()],
                        api_groups: vec!["*".into()],
                        resources: vec!["*".into()],
                        ..Rule::default()
                    },
                    Rule {
                        verbs: vec!["*".into()],
                        non_resource_urls: vec!["*".into()],
                        ..Rule::default()
                    },
                ];
                if confirm_no_escalation(state, user, "", &full).is_err() {
                    return Err(denied(
                        "must have cluster-admin privileges to use the aggregationRule",
                    ));
                }
            }
            Ok(())
        }
        _ => {
            let role = obj.get("roleRef").cloned().unwrap_or(Value::Null);
            let s = |k: &str| role.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            let (kind, role_name) = (s("kind"), s("name"));
            let plural = match kind.as_str() {
                "ClusterRole" => "clusterroles",
                "Role" => "roles",
                _ => return Ok(()),
            };
            let bind =
                Attributes::resource("bind", &s("apiGroup"), plural, "", &a.namespace, &role_name);
            if super::rbac::authorize(state, user, &bind).is_ok() {
                return Ok(());
            }
            let snap = snapshot(state);
            let rules = match snap.role_rules_of(&kind, &role_name, &a.namespace) {
                Some(r) => r,
                None => {
                    return Err(ApiError::new(
                        404,
                        "NotFound",
                        format!("{}.{GROUP} {role_name:?} not found", a.resource),
                    )
                    .with_details(
                        serde_json::json!({"name": role_name, "group": GROUP, "kind": a.resource}),
                    ));
                }
            };
            confirm_no_escalation(state, user, &a.namespace, &rules).map_err(|m| denied(&m))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn covers_as_the_policy_comparator() {
        let owner = vec![
            Rule::from_json(
                &json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "*/status"]}),
            ),
            Rule::from_json(&json!({"verbs": ["get"], "nonResourceURLs": ["/api/*"]})),
        ];
        let ok = [Rule::from_json(
            &json!({"verbs": ["get"], "apiGroups": [""],
            "resources": ["pods", "services/status"], "resourceNames": ["a"]}),
        )];
        assert!(uncovered(&owner, &ok).is_empty());
        let url = [Rule::from_json(
            &json!({"verbs": ["get"], "nonResourceURLs": ["/api/v1"]}),
        )];
        assert!(uncovered(&owner, &url).is_empty());
        let more = [Rule::from_json(
            &json!({"verbs": ["get", "delete"], "apiGroups": [""],
            "resources": ["pods", "secrets"]}),
        )];
        let missing = compact(uncovered(&owner, &more));
        let text: Vec<String> = missing.iter().map(compact_string).collect();
        assert_eq!(
            text,
            [
                "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}"
            ]
        );
    }
}
