//! The scenario: every request, as every user, on one server, with what it must answer.

use super::*;

pub(super) async fn scenario(s: &Server, ns: &str) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let admin = who("admin", Some(&s.admin), None);
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let setup: Vec<(String, Value)> = vec![
        (
            "/api/v1/namespaces".into(),
            json!({"metadata": {"name": ns}}),
        ),
        (
            format!("/api/v1/namespaces/{ns}/configmaps"),
            json!({"metadata": {"name": "cm1"}}),
        ),
        (
            format!("/api/v1/namespaces/{ns}/configmaps"),
            json!({"metadata": {"name": "cm2"}}),
        ),
        (
            format!("/api/v1/namespaces/{ns}/secrets"),
            json!({"metadata": {"name": "s1"}}),
        ),
        (
            format!("/api/v1/namespaces/{ns}/serviceaccounts"),
            json!({"metadata": {"name": "robot"}}),
        ),
        (
            format!("{rbac}/namespaces/{ns}/roles"),
            json!({"metadata": {"name": "cm-reader"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]},
                      {"verbs": ["create", "update", "patch"], "apiGroups": ["rbac.authorization.k8s.io"],
                       "resources": ["roles", "rolebindings"]}]}),
        ),
        (
            format!("{rbac}/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": "alice-cm"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "Role", "name": "cm-reader", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            format!("{rbac}/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": "robot-cm"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": ns}],
            "roleRef": {"kind": "Role", "name": "cm-reader", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            format!("{rbac}/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": "cert-users-cm"},
            "subjects": [{"kind": "Group", "name": "kcache:cert-users", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "Role", "name": "cm-reader", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            format!("{rbac}/clusterroles"),
            json!({"metadata": {"name": format!("cm1-only-{ns}")},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cm1"]}]}),
        ),
        (
            format!("{rbac}/clusterrolebindings"),
            json!({"metadata": {"name": format!("bob-cm1-{ns}")},
            "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": format!("cm1-only-{ns}"), "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            format!("{rbac}/clusterroles"),
            json!({"metadata": {"name": format!("agg-{ns}")},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {format!("kcache.test/agg-{ns}"): "true"}}]},
            "rules": []}),
        ),
        (
            format!("{rbac}/clusterroles"),
            json!({"metadata": {"name": format!("agg-part-{ns}"),
                "labels": {format!("kcache.test/agg-{ns}"): "true"}},
            "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["secrets"]}]}),
        ),
        (
            format!("{rbac}/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": "carol-agg"},
            "subjects": [{"kind": "User", "name": "carol", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": format!("agg-{ns}"), "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            format!("{rbac}/clusterroles"),
            json!({"metadata": {"name": format!("imp-bob-{ns}")},
            "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": ["bob"]}]}),
        ),
        (
            format!("{rbac}/clusterrolebindings"),
            json!({"metadata": {"name": format!("alice-imp-{ns}")},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": format!("imp-bob-{ns}"), "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
    ];
    for (path, body) in setup {
        let r = s.send(&admin, "POST", &path, Some(body)).await?;
        line(&mut out, ns, format!("setup {path}: {}", summary(&r)));
    }
    let tr = s
        .send(
            &admin,
            "POST",
            &format!("/api/v1/namespaces/{ns}/serviceaccounts/robot/token"),
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
        )
        .await?;
    let robot_token = tr
        .body
        .pointer("/status/token")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    line(
        &mut out,
        ns,
        format!("robot token: {} {}", tr.status, !robot_token.is_empty()),
    );
    // The aggregation controller's work (kcache: at once and every second).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;

    let users = [
        who("nobody", Some(&s.admin), Some("nobody")),
        who("alice", Some(&s.alice), None),
        who("bob", Some(&s.admin), Some("bob")),
        who("carol", Some(&s.admin), Some("carol")),
        who("alice as bob", Some(&s.alice), Some("bob")),
        who("alice as carol", Some(&s.alice), Some("carol")),
        who(
            "alice as robot",
            Some(&s.alice),
            Some(&format!("system:serviceaccount:{ns}:robot")),
        ),
        who("robot", Some(&robot_token), None),
        Who {
            cert: Some(s.client_cert.clone()),
            ..who("erin", None, None)
        },
        Who {
            cert: Some(s.client_cert.clone()),
            ..who("erin as bob", None, Some("bob"))
        },
        who("anonymous", None, None),
    ];
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    for u in &users {
        let requests: Vec<(&str, String, String, Option<Value>)> = vec![
            ("list configmaps", "GET".into(), cms.clone(), None),
            ("get cm1", "GET".into(), format!("{cms}/cm1"), None),
            ("get cm2", "GET".into(), format!("{cms}/cm2"), None),
            (
                "list configmaps in default",
                "GET".into(),
                "/api/v1/namespaces/default/configmaps".into(),
                None,
            ),
            (
                "list cm1 by field",
                "GET".into(),
                format!("{cms}?fieldSelector=metadata.name%3Dcm1"),
                None,
            ),
            (
                "watch configmaps",
                "GET".into(),
                format!("{cms}?watch=1&timeoutSeconds=1"),
                None,
            ),
            (
                "create configmap",
                "POST".into(),
                cms.clone(),
                Some(json!({"metadata": {"name": format!("new-{}", u.label.replace(' ', "-"))}})),
            ),
            (
                "list secrets",
                "GET".into(),
                format!("/api/v1/namespaces/{ns}/secrets"),
                None,
            ),
            (
                "list namespaces",
                "GET".into(),
                "/api/v1/namespaces".into(),
                None,
            ),
            (
                "get scale",
                "GET".into(),
                format!("/apis/apps/v1/namespaces/{ns}/deployments/d/scale"),
                None,
            ),
            ("discovery", "GET".into(), "/api".into(), None),
            ("healthz", "GET".into(), "/healthz".into(), None),
            ("metrics", "GET".into(), "/metrics".into(), None),
        ];
        for (label, method, path, body) in requests {
            let r = s.send(u, &method, &path, body).await?;
            line(
                &mut out,
                ns,
                format!("{} {label}: {}", u.label, summary(&r)),
            );
        }
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": ns, "verb": "list", "resource": "secrets"}}});
        let r = s
            .send(
                u,
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                Some(review),
            )
            .await?;
        let st = &r.body["status"];
        line(
            &mut out,
            ns,
            if r.status == 201 {
                format!(
                    "{} review can list secrets: allowed={} reason={}",
                    u.label,
                    st["allowed"],
                    st["reason"].as_str().unwrap_or("")
                )
            } else {
                format!("{} review can list secrets: {}", u.label, summary(&r))
            },
        );
        let r = s
            .send(
                u,
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                Some(
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
                ),
            )
            .await?;
        line(
            &mut out,
            ns,
            format!(
                "{} whoami: {} {}",
                u.label,
                r.status,
                r.body
                    .pointer("/status/userInfo")
                    .map(|u| json!({"username": u["username"], "groups": u["groups"]}).to_string())
                    .unwrap_or_else(|| describe(&r.body))
            ),
        );
        let r = s.send(u, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            Some(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": ns}}))).await?;
        let mut rules: Vec<String> = r
            .body
            .pointer("/status/resourceRules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(
                r.body
                    .pointer("/status/nonResourceRules")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten(),
            )
            .map(Value::to_string)
            .collect();
        rules.sort();
        rules.dedup();
        line(
            &mut out,
            ns,
            format!("{} rules: {} {}", u.label, r.status, rules.join(" ")),
        );
        for args in [
            vec!["auth", "can-i", "--list", "-n", ns],
            vec!["auth", "whoami"],
        ] {
            let text = kcache_conformance::normalise(&s.kubectl(u, &args)?);
            line(
                &mut out,
                ns,
                format!("{} kubectl {}:\n{text}", u.label, args[..2].join(" ")),
            );
        }
    }

    // Escalation and bind checks, as alice (who may create roles and bindings in NS).
    let alice = &users[1];
    let writes: Vec<(&str, &str, String, Value)> = vec![
        (
            "role granting secrets",
            "POST",
            format!("{rbac}/namespaces/{ns}/roles"),
            json!({"metadata": {"name": "esc"},
            "rules": [{"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["secrets", "configmaps"]}]}),
        ),
        (
            "role within her rights",
            "POST",
            format!("{rbac}/namespaces/{ns}/roles"),
            json!({"metadata": {"name": "mine"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cm1"]}]}),
        ),
        (
            "patch role beyond her rights",
            "PATCH",
            format!("{rbac}/namespaces/{ns}/roles/mine"),
            json!({
            "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}]}),
        ),
        (
            "bind cluster-admin",
            "POST",
            format!("{rbac}/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": "esc"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": "cluster-admin", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            "bind her own role",
            "POST",
            format!("{rbac}/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": "ok"},
            "subjects": [{"kind": "User", "name": "dave", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "Role", "name": "cm-reader", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            "bind a missing role",
            "POST",
            format!("{rbac}/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": "gone"},
            "subjects": [{"kind": "User", "name": "dave", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "Role", "name": "gone", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
    ];
    for (label, method, path, body) in writes {
        let r = s.send(alice, method, &path, Some(body)).await?;
        line(&mut out, ns, format!("alice {label}: {}", summary(&r)));
    }

    for path in [
        format!("{rbac}/clusterrolebindings/alice-imp-{ns}"),
        format!("{rbac}/clusterrolebindings/bob-cm1-{ns}"),
        format!("{rbac}/clusterroles/imp-bob-{ns}"),
        format!("{rbac}/clusterroles/cm1-only-{ns}"),
        format!("{rbac}/clusterroles/agg-{ns}"),
        format!("{rbac}/clusterroles/agg-part-{ns}"),
        format!("/api/v1/namespaces/{ns}"),
    ] {
        let r = s.send(&admin, "DELETE", &path, None).await?;
        line(&mut out, ns, format!("cleanup {path}: {}", r.status));
    }
    Ok(out)
}
