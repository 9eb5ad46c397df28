//! Dynamic objects: resolve a group/version/kind to its resource (plural, scope) through the
//! API server's discovery, then list and watch [`DynamicObject`]s.

use kube_client::discovery::{self, Scope};
use kube_core::{DynamicObject, GroupVersionKind, discovery::ApiResource};

use crate::{
    Client, HttpListerWatcher,
    client::transport_error,
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
/// errors otherwise.
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

async fn discover_once(
    client: &Client,
    gvk: &GroupVersionKind,
) -> Result<(ApiResource, ResourceScope)> {
    match discovery::pinned_kind(client.kube(), gvk).await {
        Ok((resource, caps)) => {
            let scope = match caps.scope {
                Scope::Namespaced => ResourceScope::Namespaced,
                Scope::Cluster => ResourceScope::Cluster,
            };
            Ok((resource, scope))
        }
        Err(kube_client::Error::Discovery(_)) => Err(Error::UnknownResource(describe(gvk))),
        Err(kube_client::Error::Api(status)) if status.code == 404 => {
            Err(Error::UnknownResource(describe(gvk)))
        }
        Err(e) => Err(Error::Request(transport_error(e, client.server_url()))),
    }
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
