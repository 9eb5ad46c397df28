//! Dynamic objects: resolve a group/version/kind to its resource (plural, scope) through the
//! API server's discovery, then list and watch [`DynamicObject`]s.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube_core::{DynamicObject, GroupVersionKind, discovery::ApiResource};

use crate::{
    Client, HttpListerWatcher,
    error::{Error, Result},
};

/// Whether a resource lives in namespaces or at cluster scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceScope {
    /// Namespaced (pods, configmaps, leases, …).
    Namespaced,
    /// Cluster-scoped (nodes, namespaces, CRDs, …).
    Cluster,
}

/// Resolves `gvk` through discovery: its [`ApiResource`] (plural, group, version) and scope.
///
/// # Errors
/// [`Error::UnknownResource`] when the server does not serve that kind; transport and API
/// errors otherwise (an answer that is not a discovery document, a redirect, says so: see
/// [`Client::get_json`]).
pub async fn discover(
    client: &Client,
    gvk: &GroupVersionKind,
) -> Result<(ApiResource, ResourceScope)> {
    // Transient failures (connection refused or reset, 429, 5xx) are retried: 4 retries,
    // 500 ms doubling (7.5 s in all), so that one dropped request does not end a program.
    let mut delay = std::time::Duration::from_millis(500);
    let mut attempt = 1;
    loop {
        match discover_once(client, gvk).await {
            Err(Error::Request(e))
                if attempt < DISCOVERY_ATTEMPTS
                    && (e.is_transport() || e.is_server_error() || e.is_too_many_requests()) =>
            {
                tracing::warn!(attempt, error = %e, ?delay, "discovery failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Discovery requests made before a transient failure is returned.
const DISCOVERY_ATTEMPTS: u32 = 5;

/// One discovery request, as kube-client's `pinned_kind`: the group version's resource list,
/// searched for the kind (subresources skipped).
async fn discover_once(
    client: &Client,
    gvk: &GroupVersionKind,
) -> Result<(ApiResource, ResourceScope)> {
    let path = if gvk.group.is_empty() {
        format!("/api/{}", gvk.version)
    } else {
        format!("/apis/{}/{}", gvk.group, gvk.version)
    };
    let list = match client.get_json::<APIResourceList>(&path).await {
        Ok(list) => list,
        Err(e) if e.code() == Some(404) => return Err(Error::UnknownResource(describe(gvk))),
        Err(e) => return Err(e),
    };
    let found = list
        .resources
        .iter()
        .find(|r| r.kind == gvk.kind && !r.name.contains('/'))
        .ok_or_else(|| Error::UnknownResource(describe(gvk)))?;
    let resource = ApiResource {
        group: found.group.clone().unwrap_or_else(|| gvk.group.clone()),
        version: found.version.clone().unwrap_or_else(|| gvk.version.clone()),
        api_version: gvk.api_version(),
        kind: found.kind.clone(),
        plural: found.name.clone(),
    };
    let scope = if found.namespaced {
        ResourceScope::Namespaced
    } else {
        ResourceScope::Cluster
    };
    Ok((resource, scope))
}

/// A lister-watcher of `DynamicObject`s of `gvk`, resolved through discovery, in `namespace`
/// (or across all namespaces / at cluster scope with `None`).
///
/// # Errors
/// As [`discover`], plus [`Error::Scope`] when a namespace is given for a cluster-scoped kind.
pub async fn lister_watcher(
    client: Client,
    gvk: &GroupVersionKind,
    namespace: Option<&str>,
) -> Result<HttpListerWatcher<DynamicObject>> {
    let (resource, scope) = discover(&client, gvk).await?;
    Ok(match (namespace, scope) {
        (Some(_), ResourceScope::Cluster) => {
            return Err(Error::Scope(format!(
                "{} is cluster-scoped: list it without a namespace",
                describe(gvk)
            )));
        }
        (Some(ns), ResourceScope::Namespaced) => {
            HttpListerWatcher::namespaced_with(client, &resource, ns)
        }
        (None, _) => HttpListerWatcher::all_with(client, &resource),
    })
}

fn describe(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("kind {} in {}", gvk.kind, gvk.version)
    } else {
        format!("kind {} in {}/{}", gvk.kind, gvk.group, gvk.version)
    }
}
