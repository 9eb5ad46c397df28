//! The RBAC objects kube-apiserver v1.36.5 creates at start (its `rbac/bootstrap-roles`
//! post-start hook): the ClusterRoles (cluster-admin, admin, edit, view, system:discovery,
//! system:basic-user, system:public-info-viewer, the controllers' roles, ...), their
//! ClusterRoleBindings, and the Roles and RoleBindings in `kube-system` and `kube-public`.
//! Recorded from a real kube-apiserver (`kubectl get ... -o json`, without uid,
//! resourceVersion, creationTimestamp and managedFields) into `data/rbac-bootstrap-v1.36.5.json`.
//! The server creates them through its handle at start (`ServerHandle::seed_rbac`).

use serde_json::Value;

const RECORDED: &str = include_str!("../../data/rbac-bootstrap-v1.36.5.json");

/// The recorded objects: (collection path, object), in creation order.
pub(crate) fn objects() -> Vec<(String, Value)> {
    let Ok(doc) = serde_json::from_str::<Value>(RECORDED) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (plural, namespaced) in [
        ("clusterroles", false),
        ("clusterrolebindings", false),
        ("roles", true),
        ("rolebindings", true),
    ] {
        for obj in doc
            .get(plural)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let path = match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
                Some(ns) if namespaced => {
                    format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{plural}")
                }
                _ => format!("/apis/rbac.authorization.k8s.io/v1/{plural}"),
            };
            out.push((path, obj.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_recorded_roles_are_there() {
        let objects = super::objects();
        let name = |o: &serde_json::Value| {
            o.pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let names: Vec<String> = objects.iter().map(|(_, o)| name(o)).collect();
        for wanted in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:discovery",
            "system:basic-user",
            "system:public-info-viewer",
        ] {
            assert!(names.iter().any(|n| n == wanted), "{wanted} missing");
        }
    }
}
