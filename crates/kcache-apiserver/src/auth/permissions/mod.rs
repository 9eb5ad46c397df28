//! What each user did, and the least-privilege RBAC that allows exactly that: beyond
//! kube-apiserver (which has no such record; people read audit logs for it).
//!
//! The server records, per user name (service accounts as `system:serviceaccount:<ns>:<name>`),
//! every distinct request it authorized or refused: `(verb, apiGroup, resource, subresource,
//! namespace, name)` for resource requests, `(verb, path)` for the others, with whether it was
//! allowed, denied, or both at different times. The record is bounded ([`CAPACITY`] distinct
//! entries; more are counted in [`Record::dropped`]). Requests refused before authorization
//! (a bad token: 401; a refused impersonation) are not in it.
//!
//! From a user's record, [`least_privilege`] writes the smallest Roles and ClusterRoles (with
//! bindings to that user) allowing every recorded request, and [`check`] compares a set of RBAC
//! manifests with the record: what the record did that they refuse (with the 403 message the
//! server would answer) and what they grant that was never done. Both use the authorizer's own
//! rule matching, and both count a recorded watch of a collection as needing the list of it too
//! (a reflector lists when its streaming list is refused).
//!
//! ```
//! use kcache_apiserver::auth::permissions::{self, Access, Options, UserRecord};
//!
//! let record = UserRecord {
//!     groups: vec!["system:authenticated".into()],
//!     accesses: vec![
//!         Access::resource("list", "apps", "deployments", "", "", ""),
//!         Access::resource("patch", "", "configmaps", "", "web", "page"),
//!     ],
//! };
//! let objects = permissions::least_privilege("ops", &record, &Options::default());
//! // A ClusterRole for the all-namespace list, a Role in "web" for the patch, and bindings.
//! assert_eq!(objects.len(), 4);
//! let yaml = permissions::to_yaml(&objects)?;
//! let report = permissions::check(&yaml, "ops", &record)?;
//! assert!(report.missing.is_empty() && report.excess.is_empty(), "{report:?}");
//! # Ok::<(), permissions::Error>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::UserInfo;
use super::attrs::Attributes;
use super::rbac::{GROUP, Rule, Snapshot};

mod recorder;
pub(crate) use recorder::Recorder;

/// How many distinct entries (over all users) a server records; more are counted as dropped.
pub const CAPACITY: usize = 100_000;

/// One distinct request of a user, as the authorizer saw it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Access {
    /// The verb (`get`, `list`, `watch`, `create`, … for resources; the lowercase HTTP method
    /// for other paths).
    pub verb: String,
    /// The API group (empty: the core group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The resource (empty for a non-resource request).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The subresource (`status`, `scale`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// The namespace (empty: cluster-scoped, or all namespaces).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name (empty for a list, watch or create without one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The URL path of a non-resource request (empty for a resource request).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Whether it was allowed at least once.
    #[serde(default)]
    pub allowed: bool,
    /// Whether it was denied at least once.
    #[serde(default)]
    pub denied: bool,
}

impl Access {
    /// A resource request (neither allowed nor denied yet).
    #[must_use]
    pub fn resource(
        verb: &str,
        api_group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        Self {
            verb: verb.to_owned(),
            api_group: api_group.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ..Self::default()
        }
    }

    /// A non-resource request (`verb`: the lowercase HTTP method).
    #[must_use]
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Self {
            verb: verb.to_owned(),
            path: path.to_owned(),
            ..Self::default()
        }
    }

    fn from_attributes(a: &Attributes) -> Self {
        if a.resource_request {
            Self::resource(
                &a.verb,
                &a.group,
                &a.resource,
                &a.subresource,
                &a.namespace,
                &a.name,
            )
        } else {
            Self::non_resource(&a.verb, &a.path)
        }
    }

    fn attributes(&self) -> Attributes {
        if self.path.is_empty() {
            Attributes::resource(
                &self.verb,
                &self.api_group,
                &self.resource,
                &self.subresource,
                &self.namespace,
                &self.name,
            )
        } else {
            Attributes::non_resource(&self.verb, &self.path)
        }
    }

    /// The same request (every field but the outcomes `allowed` and `denied`).
    fn same_request(&self, other: &Self) -> bool {
        let outcomes_aside = Self {
            allowed: other.allowed,
            denied: other.denied,
            ..self.clone()
        };
        outcomes_aside == *other
    }

    /// `resource` or `resource/subresource`.
    fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// What one user did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserRecord {
    /// The groups the user was last seen with.
    pub groups: Vec<String>,
    /// The distinct requests, sorted.
    pub accesses: Vec<Access>,
}

/// A snapshot of a server's record ([`RunningServer::permissions`](crate::RunningServer::permissions)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Per user name.
    pub users: BTreeMap<String, UserRecord>,
    /// Distinct requests not recorded because the record was full.
    pub dropped: u64,
}

impl Record {
    /// The record of `user`, if it made a request.
    #[must_use]
    pub fn user(&self, user: &str) -> Option<&UserRecord> {
        self.users.get(user)
    }

    /// The record as YAML (its JSON form is `serde_json::to_string(&record)`).
    ///
    /// # Errors
    /// When it cannot be written (not expected).
    pub fn to_yaml(&self) -> Result<String, Error> {
        serde_saphyr::to_string(self).map_err(|e| Error::Write(e.to_string()))
    }
}

/// Errors of [`check`] and [`to_yaml`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The manifests are not YAML or JSON objects.
    #[error("the RBAC manifests are not YAML or JSON: {0}")]
    Parse(String),
    /// The objects could not be written as YAML.
    #[error("writing YAML: {0}")]
    Write(String),
}

/// Options of [`least_privilege`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// The name of the roles and bindings (default: `recorded:<user>`, characters other than
    /// letters, digits, `.`, `-` and `:` replaced by `-`).
    pub name: Option<String>,
    /// Restrict `get`, `update`, `patch` and `delete` of named objects to those names
    /// (`resourceNames`). Off by default: a controller usually creates the objects it then
    /// reads and writes, whose names are not known in advance.
    pub resource_names: bool,
}

impl Options {
    /// With this name for the roles and bindings.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// With `resourceNames` for named gets, updates, patches and deletes.
    #[must_use]
    pub fn resource_names(mut self, on: bool) -> Self {
        self.resource_names = on;
        self
    }
}

/// The objects of kube-apiserver's bootstrap RBAC (the roles and bindings every cluster has),
/// with their `apiVersion` and `kind`.
fn bootstrap_objects() -> Vec<Value> {
    super::bootstrap::objects()
        .into_iter()
        .map(|(path, mut o)| {
            let kind = match path.rsplit('/').next().unwrap_or("") {
                "clusterroles" => "ClusterRole",
                "clusterrolebindings" => "ClusterRoleBinding",
                "roles" => "Role",
                _ => "RoleBinding",
            };
            o["apiVersion"] = json!(format!("{GROUP}/v1"));
            o["kind"] = json!(kind);
            o
        })
        .collect()
}

fn user_info(user: &str, record: &UserRecord) -> UserInfo {
    UserInfo {
        name: user.to_owned(),
        groups: record.groups.clone(),
        ..UserInfo::default()
    }
}

/// The subject of a binding to `user`.
fn subject(user: &str) -> Value {
    match user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, name)) => json!({"kind": "ServiceAccount", "name": name, "namespace": ns}),
        None => json!({"kind": "User", "apiGroup": GROUP, "name": user}),
    }
}

const NAMED_VERBS: [&str; 4] = ["get", "update", "patch", "delete"];

/// What `accesses` need: each of them, and for a watch of a collection the list of the same
/// resource and scope. An informer that watched may need to list even when its streaming list
/// (a watch with `sendInitialEvents=true`) spared the LIST on the recorded run: reflectors —
/// client-go's and kcache's — list when the server refuses the stream or its end bookmark does
/// not come, and kcache-runtime's caches stream or list by the server's version.
fn needed(accesses: &[Access]) -> Vec<Access> {
    let mut out: Vec<Access> = accesses.to_vec();
    for a in accesses {
        if a.verb == "watch" && a.path.is_empty() && a.name.is_empty() {
            let list = Access {
                verb: "list".to_owned(),
                allowed: a.allowed,
                denied: false,
                ..a.clone()
            };
            if !out.iter().any(|o| o.same_request(&list)) {
                out.push(list);
            }
        }
    }
    out
}

/// The rules allowing `accesses` (all in one scope): one per API group, verb set and
/// resource-name set, listing its resources.
fn rules(accesses: &[&Access], options: &Options) -> Vec<Rule> {
    // (group, resource, names) -> verbs
    let mut by_resource: BTreeMap<(String, String, BTreeSet<String>), BTreeSet<String>> =
        BTreeMap::new();
    // (group, resource, verb) -> names, for the named verbs
    let mut named: BTreeMap<(String, String, String), BTreeSet<String>> = BTreeMap::new();
    let mut urls: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for a in accesses {
        if !a.path.is_empty() {
            urls.entry(a.path.clone())
                .or_default()
                .insert(a.verb.clone());
        } else if options.resource_names
            && !a.name.is_empty()
            && NAMED_VERBS.contains(&a.verb.as_str())
        {
            let key = (a.api_group.clone(), a.combined_resource(), a.verb.clone());
            named.entry(key).or_default().insert(a.name.clone());
        } else {
            let key = (a.api_group.clone(), a.combined_resource(), BTreeSet::new());
            by_resource.entry(key).or_default().insert(a.verb.clone());
        }
    }
    for ((group, resource, verb), names) in named {
        by_resource
            .entry((group, resource, names))
            .or_default()
            .insert(verb);
    }
    let mut merged: BTreeMap<(String, Vec<String>, Vec<String>), Vec<String>> = BTreeMap::new();
    for ((group, resource, names), verbs) in by_resource {
        let key = (
            group,
            verbs.into_iter().collect(),
            names.into_iter().collect(),
        );
        merged.entry(key).or_default().push(resource);
    }
    let mut out: Vec<Rule> = merged
        .into_iter()
        .map(|((group, verbs, names), resources)| Rule {
            verbs,
            api_groups: vec![group],
            resources,
            resource_names: names,
            non_resource_urls: Vec::new(),
        })
        .collect();
    let mut by_verbs: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for (url, verbs) in urls {
        by_verbs
            .entry(verbs.into_iter().collect())
            .or_default()
            .push(url);
    }
    out.extend(by_verbs.into_iter().map(|(verbs, urls)| Rule {
        verbs,
        non_resource_urls: urls,
        ..Rule::default()
    }));
    out
}

/// The smallest Roles and ClusterRoles, with their bindings to `user`, that allow every
/// request of `record` (allowed or denied alike: a denied request was needed too) that
/// kube-apiserver's bootstrap roles do not already allow the user (with the groups it was
/// recorded with: discovery, `/version`, its own access reviews…). Requests
/// in a namespace get a Role and RoleBinding in it; cluster-scoped and all-namespace requests
/// and non-resource paths a ClusterRole and ClusterRoleBinding. Write them with [`to_yaml`].
#[must_use]
pub fn least_privilege(user: &str, record: &UserRecord, options: &Options) -> Vec<Value> {
    let name = options.name.clone().unwrap_or_else(|| {
        let safe: String = user
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        format!("recorded:{safe}")
    });
    let bootstrap = Snapshot::from_objects(&bootstrap_objects());
    let info = user_info(user, record);
    let mut scopes: BTreeMap<&str, Vec<&Access>> = BTreeMap::new();
    let needed = needed(&record.accesses);
    for a in &needed {
        if bootstrap.authorize(&info, &a.attributes()).is_ok() {
            continue;
        }
        scopes.entry(a.namespace.as_str()).or_default().push(a);
    }
    let api_version = format!("{GROUP}/v1");
    let mut out = Vec::new();
    for (ns, accesses) in scopes {
        let rules: Vec<Value> = rules(&accesses, options)
            .iter()
            .map(Rule::to_json)
            .collect();
        let (role, binding, meta) = if ns.is_empty() {
            ("ClusterRole", "ClusterRoleBinding", json!({"name": name}))
        } else {
            (
                "Role",
                "RoleBinding",
                json!({"name": name, "namespace": ns}),
            )
        };
        out.push(
            json!({"apiVersion": api_version, "kind": role, "metadata": meta,
            "rules": rules}),
        );
        out.push(
            json!({"apiVersion": api_version, "kind": binding, "metadata": meta,
            "roleRef": {"apiGroup": GROUP, "kind": role, "name": name},
            "subjects": [subject(user)]}),
        );
    }
    out
}

/// `objects` as a multi-document YAML stream (what `kubectl apply -f` takes).
///
/// # Errors
/// When an object cannot be written as YAML.
pub fn to_yaml(objects: &[Value]) -> Result<String, Error> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(o).map_err(|e| Error::Write(e.to_string()))?);
    }
    Ok(out)
}

/// A recorded request the manifests do not allow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Missing {
    /// The request.
    pub access: Access,
    /// The message of the 403 Forbidden the server would answer.
    pub message: String,
}

/// A rule of the manifests that grants what the record never did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Excess {
    /// The binding granting it, as kube-apiserver describes it (`RoleBinding "b/ns" of Role
    /// "r" to User "u"`).
    pub binding: String,
    /// The rule (JSON, as in the manifest).
    pub rule: Value,
    /// What of the rule was never used: `verb group/resource[/name]` or `verb path` (a `*`
    /// stays a `*`), each unused by every recorded request in the binding's scope.
    pub unused: Vec<String>,
}

/// The result of [`check`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// What the record did that the manifests refuse.
    pub missing: Vec<Missing>,
    /// What the manifests grant beyond the record.
    pub excess: Vec<Excess>,
}

/// Compares RBAC `manifests` (YAML or JSON, multi-document; objects other than Roles,
/// ClusterRoles and bindings ignored) with what `user` did (as the groups it was recorded
/// with): the recorded requests that a cluster with the manifests and kube-apiserver's
/// bootstrap roles would refuse (with the 403 message), and the parts of the manifests' rules
/// bound to `user` that no recorded request used.
///
/// # Errors
/// When `manifests` are not YAML or JSON.
pub fn check(manifests: &str, user: &str, record: &UserRecord) -> Result<Report, Error> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(manifests).map_err(|e| Error::Parse(e.to_string()))?;
    let objects: Vec<Value> = docs
        .into_iter()
        .flat_map(|d| match d.get("items").and_then(Value::as_array) {
            Some(items) if d.get("kind").and_then(Value::as_str) == Some("List") => items.clone(),
            _ => vec![d],
        })
        .collect();
    let snapshot = Snapshot::from_objects(&objects);
    let mut with_bootstrap = bootstrap_objects();
    with_bootstrap.extend(objects);
    let cluster = Snapshot::from_objects(&with_bootstrap);
    let info = user_info(user, record);
    let mut report = Report::default();
    let needed = needed(&record.accesses);
    let attrs: Vec<Attributes> = needed.iter().map(Access::attributes).collect();
    for (access, a) in needed.iter().zip(&attrs) {
        if let Err(reason) = cluster.authorize(&info, a) {
            let message = super::attrs::forbidden(&info, a, &reason).message;
            report.missing.push(Missing {
                access: access.clone(),
                message,
            });
        }
    }
    for (ns, binding, rule) in snapshot.all_bound_rules(&info) {
        let in_scope = |a: &&Attributes| ns.is_empty() || a.namespace == ns;
        let used = |part: &Rule| attrs.iter().filter(in_scope).any(|a| part.allows(a));
        let mut unused = Vec::new();
        for verb in &rule.verbs {
            for url in &rule.non_resource_urls {
                let part = Rule {
                    verbs: vec![verb.clone()],
                    non_resource_urls: vec![url.clone()],
                    ..Rule::default()
                };
                if !used(&part) {
                    unused.push(format!("{verb} {url}"));
                }
            }
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let names: Vec<Option<&String>> = if rule.resource_names.is_empty() {
                        vec![None]
                    } else {
                        rule.resource_names.iter().map(Some).collect()
                    };
                    for name in names {
                        let part = Rule {
                            verbs: vec![verb.clone()],
                            api_groups: vec![group.clone()],
                            resources: vec![resource.clone()],
                            resource_names: name.into_iter().cloned().collect(),
                            non_resource_urls: Vec::new(),
                        };
                        if !used(&part) {
                            let name = name.map(|n| format!("/{n}")).unwrap_or_default();
                            unused.push(format!("{verb} {group}/{resource}{name}"));
                        }
                    }
                }
            }
        }
        if !unused.is_empty() {
            report.excess.push(Excess {
                binding,
                rule: rule.to_json(),
                unused,
            });
        }
    }
    Ok(report)
}
