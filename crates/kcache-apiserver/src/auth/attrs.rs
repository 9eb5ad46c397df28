//! A request's authorization attributes, read from its method, path and query as
//! kube-apiserver's RequestInfoFactory reads them, and the 403 kube-apiserver words for a
//! denied one (`responsewriters.ForbiddenStatusError`).

use serde_json::json;

use super::UserInfo;
use crate::status::ApiError;

/// What a request asks to do (kube-apiserver's `authorizer.Attributes`, without the user).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    pub(crate) verb: String,
    /// Resource requests: under `/api/<v>/` or `/apis/<g>/<v>/` with a resource.
    pub(crate) resource_request: bool,
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The URL path (non-resource requests).
    pub(crate) path: String,
}

impl Attributes {
    /// A resource request's attributes.
    pub(crate) fn resource(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        Self {
            verb: verb.to_owned(),
            resource_request: true,
            group: group.to_owned(),
            version: "*".to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            path: String::new(),
        }
    }

    /// A non-resource request's attributes.
    pub(crate) fn non_resource(verb: &str, path: &str) -> Self {
        Self {
            verb: verb.to_owned(),
            path: path.to_owned(),
            ..Self::default()
        }
    }
}

/// The attributes of a request (`method`, URL `path`, raw `query`).
pub(crate) fn request_attributes(method: &str, path: &str, query: Option<&str>) -> Attributes {
    let mut a = Attributes::non_resource(&method.to_ascii_lowercase(), path);
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if parts.len() < 3 {
        return a;
    }
    let mut rest: &[&str] = match parts[0] {
        "api" => &parts[1..],
        "apis" if parts.len() >= 4 => {
            a.group = parts[1].to_owned();
            &parts[2..]
        }
        _ => return a,
    };
    a.resource_request = true;
    a.version = rest[0].to_owned();
    rest = &rest[1..];
    let mut via_path = false;
    if matches!(rest[0], "watch" | "proxy") {
        if rest.len() < 2 {
            return a;
        }
        a.verb = rest[0].to_owned();
        rest = &rest[1..];
        via_path = true;
    } else {
        a.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_owned();
    }
    if rest[0] == "namespaces" && rest.len() > 1 {
        a.namespace = rest[1].to_owned();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    if rest.len() >= 3 && a.verb != "proxy" {
        a.subresource = rest[2].to_owned();
    }
    if rest.len() >= 2 {
        a.name = rest[1].to_owned();
    }
    a.resource = rest[0].to_owned();
    let pairs = || form_urlencoded::parse(query.unwrap_or("").as_bytes());
    if a.name.is_empty() && a.verb == "get" {
        let watch = pairs()
            .find(|(k, _)| k == "watch")
            .is_some_and(|(_, v)| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0" | ""));
        a.verb = if watch { "watch" } else { "list" }.to_owned();
        if let Some((_, sel)) = pairs().find(|(k, _)| k == "fieldSelector")
            && let Some(name) = exact_name(&sel)
        {
            a.name = name;
        }
    }
    let _ = via_path;
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".to_owned();
    }
    a
}

/// The name a field selector requires exactly (`metadata.name=x` or `metadata.name==x`, alone
/// or among other terms), when it is a valid path segment.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        (k.trim() == "metadata.name" && !k.ends_with('!'))
            .then(|| v.trim().to_owned())
            .filter(|v| !v.is_empty() && v != "." && v != ".." && !v.contains(['/', '%']))
    })
}

/// kube-apiserver's forbidden message for `user` doing `a`.
pub(crate) fn forbidden_message(user: &UserInfo, a: &Attributes) -> String {
    if !a.resource_request {
        return format!("User {:?} cannot {} path {:?}", user.name, a.verb, a.path);
    }
    let mut resource = a.resource.clone();
    if !a.subresource.is_empty() {
        resource = format!("{resource}/{}", a.subresource);
    }
    if a.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            user.name, a.verb, resource, a.group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            user.name, a.verb, resource, a.group, a.namespace
        )
    }
}

/// The 403 Forbidden kube-apiserver answers when `user` may not do `a` (`reason`: the
/// authorizer's, e.g. RBAC's resolution errors).
pub(crate) fn forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let msg = forbidden_message(user, a)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let err = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    forbidden_resource(&a.group, &a.resource, &a.name, &err)
}

/// `apierrors.NewForbidden(group/resource, name, err)`.
pub(crate) fn forbidden_resource(group: &str, resource: &str, name: &str, err: &str) -> ApiError {
    let qualified = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    let message = if resource.is_empty() && group.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {name:?} is forbidden: {err}")
    };
    let mut details = serde_json::Map::new();
    if !name.is_empty() {
        details.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        details.insert("group".into(), json!(group));
    }
    if !resource.is_empty() {
        details.insert("kind".into(), json!(resource));
    }
    ApiError::new(403, "Forbidden", message).with_details(serde_json::Value::Object(details))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_attributes_as_request_info_factory() {
        let a = request_attributes("GET", "/api/v1/namespaces/default/pods", None);
        assert_eq!((a.verb.as_str(), a.resource.as_str()), ("list", "pods"));
        assert_eq!(a.namespace, "default");
        let a = request_attributes("GET", "/api/v1/namespaces/default/pods", Some("watch=1"));
        assert_eq!(a.verb, "watch");
        let a = request_attributes("GET", "/api/v1/watch/namespaces/ns/pods/p", None);
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "p"));
        let a = request_attributes("GET", "/api/v1/namespaces/ns1", None);
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.namespace.as_str()),
            ("namespaces", "ns1", "ns1")
        );
        let a = request_attributes("PUT", "/api/v1/namespaces/ns1/finalize", None);
        assert_eq!(
            (a.resource.as_str(), a.subresource.as_str()),
            ("namespaces", "finalize")
        );
        let a = request_attributes("DELETE", "/apis/apps/v1/namespaces/n/deployments", None);
        assert_eq!(
            (a.verb.as_str(), a.group.as_str()),
            ("deletecollection", "apps")
        );
        let a = request_attributes("POST", "/api/v1/namespaces/n/pods/p/eviction", None);
        assert_eq!(
            (a.verb.as_str(), a.subresource.as_str()),
            ("create", "eviction")
        );
        let a = request_attributes("GET", "/apis/apps/v1", None);
        assert!(!a.resource_request);
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", "/apis/apps/v1"));
        let a = request_attributes(
            "GET",
            "/api/v1/namespaces/n/configmaps",
            Some("fieldSelector=metadata.name%3Dcm1"),
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", "cm1"));
    }

    #[test]
    fn forbidden_is_worded_as_kube_apiserver() {
        let alice = UserInfo::new("alice", ["system:authenticated"]);
        let a = Attributes::resource("list", "", "pods", "", "default", "");
        let e = forbidden(&alice, &a, "");
        assert_eq!(
            e.to_status()["message"],
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        let a = Attributes::resource("get", "apps", "deployments", "scale", "", "d");
        assert_eq!(
            forbidden(&alice, &a, "").to_status()["message"],
            "deployments.apps \"d\" is forbidden: User \"alice\" cannot get resource \"deployments/scale\" in API group \"apps\" at the cluster scope"
        );
        let a = Attributes::non_resource("get", "/metrics");
        assert_eq!(
            forbidden(&alice, &a, "").to_status()["message"],
            "forbidden: User \"alice\" cannot get path \"/metrics\""
        );
    }
}
