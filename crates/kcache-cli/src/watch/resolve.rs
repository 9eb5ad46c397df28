//! Resource names as kubectl reads them: plural, singular, short name or kind, optionally
//! qualified by group (`deployments.apps`) or version and group (`deployments.v1.apps`),
//! resolved against the server's discovery documents.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroupList, APIResource, APIResourceList, APIVersions,
};
use kube_core::discovery::ApiResource;

use super::error::WatchError;

/// The resources one group version serves.
#[derive(Debug, Clone)]
pub(super) struct GroupVersion {
    /// Group; empty for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Its resources (subresources included, as discovery lists them).
    pub resources: Vec<APIResource>,
}

/// A resolved resource.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    /// Coordinates for the dynamic lister-watcher.
    pub api: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

impl Resolved {
    /// `pods` or `deployments.apps`, for messages.
    pub(super) fn display_name(&self) -> String {
        if self.api.group.is_empty() {
            self.api.plural.clone()
        } else {
            format!("{}.{}", self.api.plural, self.api.group)
        }
    }
}

/// Fetches discovery: the core group's versions and each group's preferred version. A group
/// whose resources cannot be listed (an aggregated API that is down) is skipped, as kubectl
/// does; failures of the first requests (401, 403, connection, an answer that is not a
/// discovery document) are returned.
///
/// # Errors
/// The first error of the core discovery requests.
pub(super) async fn discover(
    client: &kcache_client::Client,
) -> Result<Vec<GroupVersion>, kcache_client::Error> {
    let mut out = Vec::new();
    let core = client.get_json::<APIVersions>("/api").await?;
    for version in core.versions {
        let list = client
            .get_json::<APIResourceList>(&format!("/api/{version}"))
            .await?;
        out.push(GroupVersion {
            group: String::new(),
            version,
            resources: list.resources,
        });
    }
    let groups = client.get_json::<APIGroupList>("/apis").await?;
    for group in groups.groups {
        let preferred = group
            .preferred_version
            .as_ref()
            .map(|v| v.group_version.clone())
            .or_else(|| group.versions.first().map(|v| v.group_version.clone()));
        let Some(gv) = preferred else { continue };
        match client
            .get_json::<APIResourceList>(&format!("/apis/{gv}"))
            .await
        {
            Ok(list) => out.push(GroupVersion {
                group: group.name.clone(),
                version: gv.rsplit('/').next().unwrap_or_default().to_owned(),
                resources: list.resources,
            }),
            Err(e) => {
                tracing::warn!(group_version = %gv, error = %e, "skipping an API group discovery could not read")
            }
        }
    }
    Ok(out)
}

/// Finds `query` among the discovered resources (first match in discovery order: the core
/// group first).
///
/// # Errors
/// [`WatchError::UnknownResource`] when nothing matches.
pub(super) fn resolve(query: &str, discovered: &[GroupVersion]) -> Result<Resolved, WatchError> {
    let lowered = query.to_ascii_lowercase();
    let (name, qualifier) = match lowered.split_once('.') {
        Some((n, q)) => (n.to_owned(), Some(q.to_owned())),
        None => (lowered.clone(), None),
    };
    for gv in discovered {
        if let Some(q) = &qualifier {
            let by_group = *q == gv.group;
            let by_version_group = *q == format!("{}.{}", gv.version, gv.group);
            if !by_group && !by_version_group {
                continue;
            }
        }
        for r in &gv.resources {
            if r.name.contains('/') {
                continue; // a subresource
            }
            let matches = r.name == name
                || r.singular_name.eq_ignore_ascii_case(&name)
                || r.kind.eq_ignore_ascii_case(&name)
                || r.short_names
                    .iter()
                    .flatten()
                    .any(|s| s.eq_ignore_ascii_case(&name));
            if matches {
                let api_version = if gv.group.is_empty() {
                    gv.version.clone()
                } else {
                    format!("{}/{}", gv.group, gv.version)
                };
                return Ok(Resolved {
                    api: ApiResource {
                        group: gv.group.clone(),
                        version: gv.version.clone(),
                        api_version,
                        kind: r.kind.clone(),
                        plural: r.name.clone(),
                    },
                    namespaced: r.namespaced,
                });
            }
        }
    }
    Err(WatchError::UnknownResource(query.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(
        name: &str,
        singular: &str,
        kind: &str,
        short: &[&str],
        namespaced: bool,
    ) -> APIResource {
        APIResource {
            name: name.into(),
            singular_name: singular.into(),
            kind: kind.into(),
            namespaced,
            short_names: Some(short.iter().map(|s| (*s).to_owned()).collect()),
            verbs: vec!["list".into(), "watch".into()],
            ..APIResource::default()
        }
    }

    fn discovered() -> Vec<GroupVersion> {
        vec![
            GroupVersion {
                group: String::new(),
                version: "v1".into(),
                resources: vec![
                    res("pods", "pod", "Pod", &["po"], true),
                    res("pods/status", "", "Pod", &[], true),
                    res("nodes", "node", "Node", &["no"], false),
                    res("events", "event", "Event", &["ev"], true),
                ],
            },
            GroupVersion {
                group: "apps".into(),
                version: "v1".into(),
                resources: vec![res(
                    "deployments",
                    "deployment",
                    "Deployment",
                    &["deploy"],
                    true,
                )],
            },
            GroupVersion {
                group: "events.k8s.io".into(),
                version: "v1".into(),
                resources: vec![res("events", "event", "Event", &["ev"], true)],
            },
        ]
    }

    #[test]
    fn resolves_plural_singular_short_name_and_kind_like_kubectl() {
        let d = discovered();
        for q in ["pods", "pod", "po", "Pod", "PODS"] {
            let r = resolve(q, &d).unwrap();
            assert_eq!(
                (r.api.plural.as_str(), r.api.api_version.as_str()),
                ("pods", "v1"),
                "{q}"
            );
            assert!(r.namespaced);
        }
        let deploy = resolve("deploy", &d).unwrap();
        assert_eq!(deploy.api.api_version, "apps/v1");
        assert_eq!(deploy.display_name(), "deployments.apps");
        assert!(!resolve("no", &d).unwrap().namespaced);
    }

    #[test]
    fn group_qualified_names_pick_that_group_and_core_wins_otherwise() {
        let d = discovered();
        assert_eq!(resolve("events", &d).unwrap().api.group, "");
        assert_eq!(
            resolve("events.events.k8s.io", &d).unwrap().api.group,
            "events.k8s.io"
        );
        assert_eq!(
            resolve("deployments.v1.apps", &d).unwrap().api.group,
            "apps"
        );
        assert!(resolve("deployments.batch", &d).is_err());
    }

    #[test]
    fn unknown_names_and_subresources_are_unknown_resources() {
        let d = discovered();
        for q in ["frobnicators", "pods/status", "status"] {
            let e = resolve(q, &d).unwrap_err();
            assert!(matches!(e, WatchError::UnknownResource(_)), "{q}: {e}");
        }
        assert_eq!(
            resolve("frobnicators", &d).unwrap_err().to_string(),
            "the server doesn't have a resource type \"frobnicators\""
        );
    }
}
