//! The name of a lister-watcher's collection in logs and errors: its resource, namespace and
//! selectors.

/// `pods`, `deployments.apps in namespace ns with labels app=web`: the resource of a collection
/// path (`/api/v1/pods`, `/apis/apps/v1/namespaces/ns/deployments`), its namespace and
/// selectors.
pub(crate) fn describe_collection(
    path: &str,
    labels: Option<&str>,
    fields: Option<&str>,
) -> String {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => ("", &parts[..]),
    };
    let (namespace, resource) = match rest {
        ["namespaces", ns, resource, ..] => (Some(*ns), *resource),
        [resource, ..] => (None, *resource),
        [] => (None, path),
    };
    let mut out = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    if let Some(ns) = namespace {
        out.push_str(&format!(" in namespace {ns}"));
    }
    if let Some(l) = labels.filter(|l| !l.is_empty()) {
        out.push_str(&format!(" with labels {l}"));
    }
    if let Some(f) = fields.filter(|f| !f.is_empty()) {
        out.push_str(&format!(" with fields {f}"));
    }
    out
}

#[cfg(test)]
mod describe_tests {
    use super::describe_collection;

    #[test]
    fn reflectors_are_named_after_their_resource_namespace_and_selectors() {
        assert_eq!(describe_collection("/api/v1/pods", None, None), "pods");
        assert_eq!(
            describe_collection(
                "/apis/apps/v1/namespaces/ns/deployments",
                Some("app=web"),
                None
            ),
            "deployments.apps in namespace ns with labels app=web"
        );
        assert_eq!(
            describe_collection(
                "/api/v1/namespaces/kube-system/configmaps",
                None,
                Some("metadata.name=x")
            ),
            "configmaps in namespace kube-system with fields metadata.name=x"
        );
    }
}
