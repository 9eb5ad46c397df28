//! The RBAC authorizer: which rules of the server's Roles and ClusterRoles are bound to a
//! user (kube-apiserver's `DefaultRuleResolver.VisitRulesFor`) and whether one allows a
//! request (`RuleAllows`). The objects are read from the store into a [`Snapshot`] rebuilt
//! when one of the four RBAC types changed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::watch;

use super::Authz;
use super::attrs::Attributes;
use super::{MASTERS, UserInfo};
use crate::resource::ResourceId;

/// The RBAC API group.
pub(crate) const GROUP: &str = "rbac.authorization.k8s.io";

/// One PolicyRule.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Rule {
    pub(crate) verbs: Vec<String>,
    pub(crate) api_groups: Vec<String>,
    pub(crate) resources: Vec<String>,
    pub(crate) resource_names: Vec<String>,
    pub(crate) non_resource_urls: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl Rule {
    /// A rule from its JSON.
    pub(crate) fn from_json(v: &Value) -> Self {
        Self {
            verbs: strings(v.get("verbs")),
            api_groups: strings(v.get("apiGroups")),
            resources: strings(v.get("resources")),
            resource_names: strings(v.get("resourceNames")),
            non_resource_urls: strings(v.get("nonResourceURLs")),
        }
    }

    /// The rules of a Role or ClusterRole object.
    pub(crate) fn all_from(obj: &Value) -> Vec<Self> {
        obj.get("rules")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(Self::from_json).collect())
            .unwrap_or_default()
    }

    /// The rule as JSON (fields omitted when empty, as the API's `omitempty`).
    pub(crate) fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("verbs".into(), serde_json::json!(self.verbs));
        for (k, v) in [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !v.is_empty() {
                m.insert(k.into(), serde_json::json!(v));
            }
        }
        Value::Object(m)
    }

    /// kube-apiserver's `RuleAllows`.
    pub(crate) fn allows(&self, a: &Attributes) -> bool {
        let verb = self.verbs.iter().any(|v| v == "*" || *v == a.verb);
        if !verb {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|u| {
                u == "*"
                    || *u == a.path
                    || (u.ends_with('*') && a.path.starts_with(u.trim_end_matches('*')))
            });
        }
        let group = self.api_groups.iter().any(|g| g == "*" || *g == a.group);
        // `resource` or `resource/subresource`, compared without building the string.
        let combined = |r: &str| {
            if a.subresource.is_empty() {
                r == a.resource
            } else {
                r.strip_prefix(a.resource.as_str())
                    .and_then(|rest| rest.strip_prefix('/'))
                    .is_some_and(|sub| sub == a.subresource)
            }
        };
        let resource = self.resources.iter().any(|r| {
            r == "*"
                || combined(r)
                || (!a.subresource.is_empty()
                    && r.len() == a.subresource.len() + 2
                    && r.starts_with("*/")
                    && r.ends_with(&a.subresource))
        });
        let name = self.resource_names.is_empty() || self.resource_names.contains(&a.name);
        group && resource && name
    }
}

/// A subject of a binding.
#[derive(Debug, Clone)]
struct Subject {
    kind: String,
    name: String,
    namespace: String,
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Debug, Clone)]
struct Binding {
    name: String,
    /// Empty for a ClusterRoleBinding.
    namespace: String,
    role_kind: String,
    role_name: String,
    subjects: Vec<Subject>,
}

impl Binding {
    fn from_json(v: &Value) -> Self {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let role = v.get("roleRef").cloned().unwrap_or(Value::Null);
        Self {
            name: v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            namespace: v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            role_kind: s(&role, "kind"),
            role_name: s(&role, "name"),
            subjects: v
                .get("subjects")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|x| Subject {
                            kind: s(x, "kind"),
                            name: s(x, "name"),
                            namespace: s(x, "namespace"),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// kube-apiserver's `appliesTo` (`namespace`: the binding's, for service accounts without
    /// one).
    fn applies_to(&self, user: &UserInfo) -> Option<&Subject> {
        self.subjects.iter().find(|s| match s.kind.as_str() {
            "User" => user.name == s.name,
            "Group" => user.in_group(&s.name),
            "ServiceAccount" => {
                let ns = if s.namespace.is_empty() {
                    &self.namespace
                } else {
                    &s.namespace
                };
                !ns.is_empty()
                    && user
                        .name
                        .strip_prefix("system:serviceaccount:")
                        .and_then(|rest| rest.strip_prefix(ns.as_str()))
                        .and_then(|rest| rest.strip_prefix(':'))
                        .is_some_and(|name| name == s.name)
            }
            _ => false,
        })
    }

    /// kube-apiserver's describer of a binding and the subject that matched.
    fn describe(&self, s: &Subject) -> String {
        let subject = match s.kind.as_str() {
            "ServiceAccount" => {
                let ns = if s.namespace.is_empty() {
                    &self.namespace
                } else {
                    &s.namespace
                };
                format!("{} {:?}", s.kind, format!("{}/{ns}", s.name))
            }
            _ => format!("{} {:?}", s.kind, s.name),
        };
        if self.namespace.is_empty() {
            format!(
                "ClusterRoleBinding {:?} of {} {:?} to {subject}",
                self.name, self.role_kind, self.role_name
            )
        } else {
            format!(
                "RoleBinding {:?} of {} {:?} to {subject}",
                format!("{}/{}", self.name, self.namespace),
                self.role_kind,
                self.role_name
            )
        }
    }
}

/// What [`Snapshot::visit`] calls: a bound rule with its binding and the subject that
/// matched, or a resolution error; returns whether to go on.
type Visitor<'a> = dyn FnMut(Result<(&Rule, &Binding, &Subject), String>) -> bool + 'a;

/// The RBAC objects at one moment.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    cluster_roles: HashMap<String, Vec<Rule>>,
    roles: HashMap<(String, String), Vec<Rule>>,
    cluster_bindings: Vec<Binding>,
    bindings: HashMap<String, Vec<Binding>>,
}

/// The ids of the four RBAC resource types.
pub(crate) fn id(plural: &str) -> ResourceId {
    ResourceId {
        group: GROUP.to_owned(),
        version: "v1".to_owned(),
        plural: plural.to_owned(),
    }
}

const PLURALS: [&str; 4] = [
    "clusterroles",
    "roles",
    "clusterrolebindings",
    "rolebindings",
];

impl Snapshot {
    fn load(state: &Authz<'_>) -> Self {
        let mut s = Self::default();
        for o in state.store.objects(&id("clusterroles")) {
            s.cluster_roles
                .insert(o.name().to_owned(), Rule::all_from(&o.value()));
        }
        for o in state.store.objects(&id("roles")) {
            s.roles.insert(
                (o.namespace().to_owned(), o.name().to_owned()),
                Rule::all_from(&o.value()),
            );
        }
        let mut crbs: BTreeMap<String, Binding> = BTreeMap::new();
        for o in state.store.objects(&id("clusterrolebindings")) {
            crbs.insert(o.name().to_owned(), Binding::from_json(&o.value()));
        }
        s.cluster_bindings = crbs.into_values().collect();
        for o in state.store.objects(&id("rolebindings")) {
            s.bindings
                .entry(o.namespace().to_owned())
                .or_default()
                .push(Binding::from_json(&o.value()));
        }
        s
    }

    /// The RBAC objects among `objects` (manifests: Roles, ClusterRoles and their bindings
    /// of `rbac.authorization.k8s.io`; other objects are ignored).
    pub(crate) fn from_objects(objects: &[Value]) -> Self {
        let mut s = Self::default();
        for o in objects {
            let api = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            if api.split('/').next() != Some(GROUP) {
                continue;
            }
            let meta = |k: &str| {
                o.pointer(&format!("/metadata/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            match o.get("kind").and_then(Value::as_str).unwrap_or("") {
                "ClusterRole" => {
                    s.cluster_roles.insert(meta("name"), Rule::all_from(o));
                }
                "Role" => {
                    s.roles
                        .insert((meta("namespace"), meta("name")), Rule::all_from(o));
                }
                "ClusterRoleBinding" => s.cluster_bindings.push(Binding::from_json(o)),
                "RoleBinding" => s
                    .bindings
                    .entry(meta("namespace"))
                    .or_default()
                    .push(Binding::from_json(o)),
                _ => {}
            }
        }
        s
    }

    /// Every rule bound to `user`, in every namespace: the namespace of the binding (empty for
    /// a ClusterRoleBinding), the binding's description, and the rule.
    pub(crate) fn all_bound_rules(&self, user: &UserInfo) -> Vec<(String, String, Rule)> {
        let mut out = Vec::new();
        let namespaced = self
            .bindings
            .iter()
            .flat_map(|(ns, bs)| bs.iter().map(move |b| (b, ns.as_str())));
        for (b, ns) in self
            .cluster_bindings
            .iter()
            .map(|b| (b, ""))
            .chain(namespaced)
        {
            if let (Some(subject), Ok(rules)) = (b.applies_to(user), self.role_rules(b, ns)) {
                for r in rules {
                    out.push((ns.to_owned(), b.describe(subject), r.clone()));
                }
            }
        }
        out
    }

    fn role_rules(&self, b: &Binding, namespace: &str) -> Result<&[Rule], String> {
        match b.role_kind.as_str() {
            "ClusterRole" => self
                .cluster_roles
                .get(&b.role_name)
                .map(Vec::as_slice)
                .ok_or_else(|| format!("clusterrole.{GROUP} {:?} not found", b.role_name)),
            "Role" => self
                .roles
                .get(&(namespace.to_owned(), b.role_name.clone()))
                .map(Vec::as_slice)
                .ok_or_else(|| format!("role.{GROUP} {:?} not found", b.role_name)),
            k => Err(format!("unsupported role reference kind: {k:?}")),
        }
    }

    /// The rules of the role a binding refers to (`kind` Role or ClusterRole), if it exists.
    pub(crate) fn role_rules_of(
        &self,
        kind: &str,
        name: &str,
        namespace: &str,
    ) -> Option<Vec<Rule>> {
        match kind {
            "ClusterRole" => self.cluster_roles.get(name).cloned(),
            "Role" => self
                .roles
                .get(&(namespace.to_owned(), name.to_owned()))
                .cloned(),
            _ => None,
        }
    }

    /// Calls `visit` with every rule bound to `user` in `namespace` (cluster-wide bindings
    /// first), or with the error resolving a binding's role; stops when `visit` says so.
    fn visit(&self, user: &UserInfo, namespace: &str, visit: &mut Visitor<'_>) {
        let namespaced = self
            .bindings
            .get(namespace)
            .filter(|_| !namespace.is_empty())
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (b, ns) in self
            .cluster_bindings
            .iter()
            .map(|b| (b, ""))
            .chain(namespaced.iter().map(|b| (b, namespace)))
        {
            let Some(subject) = b.applies_to(user) else {
                continue;
            };
            match self.role_rules(b, ns) {
                Ok(rules) => {
                    for r in rules {
                        if !visit(Ok((r, b, subject))) {
                            return;
                        }
                    }
                }
                Err(e) => {
                    if !visit(Err(e)) {
                        return;
                    }
                }
            }
        }
    }

    /// The rules bound to `user` in `namespace`, and the errors resolving them.
    pub(crate) fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<Rule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        self.visit(user, namespace, &mut |r| {
            match r {
                Ok((r, _, _)) => rules.push(r.clone()),
                Err(e) => errors.push(e),
            }
            true
        });
        (rules, errors)
    }

    /// Whether `user` may do `a`: `Ok(reason)` (which binding allowed it), or the denial's
    /// reason (empty, or RBAC's resolution errors).
    pub(crate) fn authorize(&self, user: &UserInfo, a: &Attributes) -> Result<String, String> {
        if user.in_group(MASTERS) {
            return Ok(String::new());
        }
        let mut allowed = None;
        let mut errors = Vec::new();
        self.visit(user, &a.namespace, &mut |r| match r {
            Ok((r, b, s)) if r.allows(a) => {
                allowed = Some(format!("RBAC: allowed by {}", b.describe(s)));
                false
            }
            Ok(_) => true,
            Err(e) => {
                errors.push(e);
                true
            }
        });
        if let Some(reason) = allowed {
            return Ok(reason);
        }
        Err(match errors.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", errors[0]),
            _ => format!("RBAC: [{}]", errors.join(", ")),
        })
    }
}

/// The snapshot cache of a server.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    versions: OnceLock<Vec<watch::Receiver<u64>>>,
    current: Mutex<Option<(Vec<u64>, Arc<Snapshot>)>>,
}

/// The current RBAC snapshot of `state`.
pub(crate) fn snapshot(state: &Authz<'_>) -> Arc<Snapshot> {
    let cache = &state.auth.rbac;
    let receivers = cache.versions.get_or_init(|| {
        PLURALS
            .iter()
            .map(|p| state.store.subscribe(&id(p)))
            .collect()
    });
    let key: Vec<u64> = receivers.iter().map(|r| *r.borrow()).collect();
    let mut current = cache.current.lock();
    if let Some((k, s)) = current.as_ref()
        && *k == key
    {
        return s.clone();
    }
    let s = Arc::new(Snapshot::load(state));
    *current = Some((key, s.clone()));
    s
}

/// Whether `user` may do `a` on this server (always, with authorization off).
pub(crate) fn authorize(
    state: &Authz<'_>,
    user: &UserInfo,
    a: &Attributes,
) -> Result<String, String> {
    if !state.enabled || user.in_group(MASTERS) {
        return Ok(String::new());
    }
    snapshot(state).authorize(user, a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> Rule {
        Rule::from_json(&v)
    }

    #[test]
    fn rule_matching_as_rule_allows() {
        let r = rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "*/scale"],
                            "resourceNames": ["p1"]}),
        );
        let a = |verb: &str, res: &str, sub: &str, name: &str| {
            Attributes::resource(verb, "", res, sub, "ns", name)
        };
        assert!(r.allows(&a("get", "pods", "", "p1")));
        assert!(!r.allows(&a("get", "pods", "", "p2")));
        assert!(!r.allows(&a("list", "pods", "", "")));
        assert!(!r.allows(&a("get", "pods", "log", "p1")));
        assert!(r.allows(&a("get", "deployments", "scale", "p1")));
        let all = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(all.allows(&a("deletecollection", "pods", "status", "")));
        let urls = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/api/*"]}));
        assert!(urls.allows(&Attributes::non_resource("get", "/healthz")));
        assert!(urls.allows(&Attributes::non_resource("get", "/api/v1")));
        assert!(!urls.allows(&Attributes::non_resource("get", "/apis")));
        assert!(!urls.allows(&Attributes::non_resource("post", "/healthz")));
        assert!(!urls.allows(&a("get", "pods", "", "p1")));
    }

    #[test]
    fn bindings_apply_to_users_groups_and_service_accounts() {
        let b = Binding::from_json(&json!({"metadata": {"namespace": "ns"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"},
                         {"kind": "Group", "name": "devs"}]}));
        let sa = b.applies_to(&UserInfo::new("system:serviceaccount:ns:sa", [""; 0]));
        assert_eq!(
            b.describe(sa.unwrap()),
            "RoleBinding \"/ns\" of Role \"r\" to ServiceAccount \"sa/ns\""
        );
        assert!(
            b.applies_to(&UserInfo::new("system:serviceaccount:other:sa", [""; 0]))
                .is_none()
        );
        assert!(b.applies_to(&UserInfo::new("bob", ["devs"])).is_some());
        assert!(b.applies_to(&UserInfo::new("devs", [""; 0])).is_none());
    }

    #[test]
    fn a_missing_role_is_the_denial_reason() {
        let mut s = Snapshot::default();
        s.cluster_bindings.push(Binding::from_json(&json!({
            "roleRef": {"kind": "ClusterRole", "name": "gone"},
            "subjects": [{"kind": "User", "name": "alice"}]})));
        let alice = UserInfo::new("alice", ["system:authenticated"]);
        let a = Attributes::resource("get", "", "pods", "", "ns", "p");
        assert_eq!(
            s.authorize(&alice, &a),
            Err("RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found".to_owned())
        );
        assert_eq!(
            s.authorize(&UserInfo::new("root", [MASTERS]), &a),
            Ok(String::new())
        );
    }
}
