//! Validation and wording: Service defaults, Secret rules, size limits, selectors, unknown
//! paths, 405 and 415, `fieldValidation` warnings, the RV=0 watch with bookmarks.

use serde_json::json;

use crate::script::{Script, config_map};

pub(crate) async fn service_defaults(s: &mut Script<'_>) -> anyhow::Result<()> {
    let svcs = s.core("services");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
    let r = s.req("create", "POST", &svcs, Some(svc)).await?;
    s.present("clusterIP allocated", &r.body, "/spec/clusterIP");
    s.field("type", &r.body, "/spec/type");
    s.field("port protocol", &r.body, "/spec/ports/0/protocol");
    s.field("targetPort", &r.body, "/spec/ports/0/targetPort");
    s.field("sessionAffinity", &r.body, "/spec/sessionAffinity");
    let bad =
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "noports"}, "spec": {}});
    s.req("no ports", "POST", &svcs, Some(bad)).await?;
    Ok(())
}

pub(crate) async fn secret_rules(s: &mut Script<'_>) -> anyhow::Result<()> {
    let secrets = s.core("secrets");
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "frozen"}, "immutable": true, "data": {"k": "dg=="}});
    s.req("create immutable", "POST", &secrets, Some(body))
        .await?;
    s.req(
        "change immutable data",
        "PATCH",
        &format!("{secrets}/frozen"),
        Some(json!({"data": {"k": "dw=="}})),
    )
    .await?;
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "typed"}, "type": "Opaque"});
    s.req("create opaque", "POST", &secrets, Some(body)).await?;
    s.req(
        "change type",
        "PATCH",
        &format!("{secrets}/typed"),
        Some(json!({"type": "kubernetes.io/basic-auth"})),
    )
    .await?;
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"}, "data": {"k": "not base64!"}});
    s.req("bad base64", "POST", &secrets, Some(body)).await?;
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {}});
    s.req("tls without keys", "POST", &secrets, Some(body))
        .await?;
    Ok(())
}

pub(crate) async fn configmap_size_limit(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let big = "x".repeat(1024 * 1024 + 1);
    s.req(
        "over 1 MiB",
        "POST",
        &cms,
        Some(config_map("big", json!({"k": big}))),
    )
    .await?;
    let fits = "x".repeat(1024 * 1024 - 10);
    s.req(
        "under 1 MiB",
        "POST",
        &cms,
        Some(config_map("fits", json!({"k": fits}))),
    )
    .await?;
    let huge = "x".repeat(3 * 1024 * 1024 + 10);
    s.req(
        "over 3 MiB request",
        "POST",
        &cms,
        Some(config_map("huge", json!({"k": huge}))),
    )
    .await?;
    Ok(())
}

pub(crate) async fn field_selectors(s: &mut Script<'_>) -> anyhow::Result<()> {
    let secrets = s.core("secrets");
    for (name, ty) in [("a", "Opaque"), ("b", "kubernetes.io/basic-auth")] {
        let mut body =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": ty});
        if ty != "Opaque" {
            body["data"] = json!({"username": "dQ==", "password": "cA=="});
        }
        s.req(&format!("create {name}"), "POST", &secrets, Some(body))
            .await?;
    }
    let r = s
        .req(
            "by type",
            "GET",
            &format!("{secrets}?fieldSelector=type%3DOpaque"),
            None,
        )
        .await?;
    s.note(format!(
        "items {}",
        kcache_conformance::item_names(&r.body).join(",")
    ));
    let r = s
        .req(
            "by name",
            "GET",
            &format!("{secrets}?fieldSelector=metadata.name%3Db"),
            None,
        )
        .await?;
    s.note(format!(
        "items {}",
        kcache_conformance::item_names(&r.body).join(",")
    ));
    s.req(
        "unsupported field",
        "GET",
        &format!("{secrets}?fieldSelector=data.k%3Dv"),
        None,
    )
    .await?;
    s.req(
        "configmap unsupported field",
        "GET",
        &format!("{}?fieldSelector=data.k%3Dv", s.core("configmaps")),
        None,
    )
    .await?;
    s.req(
        "malformed",
        "GET",
        &format!("{secrets}?fieldSelector=%3D%3D"),
        None,
    )
    .await?;
    Ok(())
}

pub(crate) async fn invalid_label_selector(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    for sel in ["a%3D%3D%3Db", "a%20in%20(", "!", "a%3Db%2C"] {
        s.req(
            &format!("labelSelector {sel}"),
            "GET",
            &format!("{cms}?labelSelector={sel}"),
            None,
        )
        .await?;
    }
    Ok(())
}

pub(crate) async fn unknown_paths(s: &mut Script<'_>) -> anyhow::Result<()> {
    let ns = s.ns.clone();
    s.req(
        "unknown resource",
        "GET",
        &format!("/api/v1/namespaces/{ns}/widgets"),
        None,
    )
    .await?;
    s.req("unknown version", "GET", "/api/v2/namespaces", None)
        .await?;
    s.req("unknown group", "GET", "/apis/example.com/v1/widgets", None)
        .await?;
    s.req(
        "cluster-scoped under a namespace",
        "GET",
        &format!("/api/v1/namespaces/{ns}/nodes"),
        None,
    )
    .await?;
    s.req(
        "namespaced without namespace",
        "GET",
        "/api/v1/configmaps",
        None,
    )
    .await?;
    s.req(
        "unknown subresource",
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps/a/frob"),
        None,
    )
    .await?;
    Ok(())
}

pub(crate) async fn method_not_allowed(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    s.req("create", "POST", &cms, Some(config_map("a", json!({}))))
        .await?;
    s.req(
        "POST on an object",
        "POST",
        &format!("{cms}/a"),
        Some(config_map("a", json!({}))),
    )
    .await?;
    s.req(
        "PUT on a collection",
        "PUT",
        &cms,
        Some(config_map("a", json!({}))),
    )
    .await?;
    s.req("PATCH on a collection", "PATCH", &cms, Some(json!({})))
        .await?;
    Ok(())
}

pub(crate) async fn unsupported_media_type(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    s.raw("text/plain", "POST", &cms, "text/plain", "hello")
        .await?;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\ndata:\n  k: v\n";
    let r = s
        .raw("yaml", "POST", &cms, "application/yaml", yaml)
        .await?;
    s.field("yaml data", &r.body, "/data/k");
    s.raw(
        "patch as json",
        "PATCH",
        &format!("{cms}/yml"),
        "application/json",
        "{}",
    )
    .await?;
    Ok(())
}

pub(crate) async fn field_validation_modes(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    for (i, mode) in ["", "Ignore", "Warn", "Strict"].iter().enumerate() {
        let mut body = config_map(&format!("v{i}"), json!({}));
        body["bogus"] = json!(1);
        body["metadata"]["alsoBogus"] = json!(2);
        let q = if mode.is_empty() {
            String::new()
        } else {
            format!("?fieldValidation={mode}")
        };
        s.req(
            &format!("create fieldValidation={mode}"),
            "POST",
            &format!("{cms}{q}"),
            Some(body),
        )
        .await?;
    }
    s.req(
        "bad mode",
        "POST",
        &format!("{cms}?fieldValidation=Loud"),
        Some(config_map("x", json!({}))),
    )
    .await?;
    Ok(())
}

pub(crate) async fn watch_rv0_bookmarks(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let r = s
        .req("create", "POST", &cms, Some(config_map("a", json!({}))))
        .await?;
    // Wait for kube-apiserver's watch cache to hold the create (a list NotOlderThan its RV is
    // served from the cache once it caught up), so the RV=0 watch sees it in its initial
    // events rather than as a live event.
    let rv = r
        .body
        .pointer("/metadata/resourceVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("0")
        .to_owned();
    s.req(
        "list not older than the create",
        "GET",
        &format!("{cms}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"),
        None,
    )
    .await?;
    let r = s
        .req(
            "watch rv=0 with bookmarks",
            "GET",
            &format!(
                "{cms}?watch=true&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=2"
            ),
            None,
        )
        .await?;
    // Progress bookmarks (without annotations) come on kube-apiserver's timer: left out.
    let lines: Vec<String> = kcache_conformance::event_lines(&r.events)
        .into_iter()
        .filter(|l| l != "BOOKMARK ")
        .collect();
    s.note(format!("events {}", lines.join(" | ")));
    Ok(())
}

/// Invalid objects of the kinds controllers write most, refused with kube-apiserver's field
/// paths and wording.
pub(crate) async fn common_kinds_validation(s: &mut Script<'_>) -> anyhow::Result<()> {
    let pods = s.core("pods");
    let cases: Vec<(&str, String, serde_json::Value)> = vec![
        (
            "pod without containers",
            pods.clone(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"}, "spec": {"containers": []}}),
        ),
        (
            "pod container without image",
            pods.clone(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p2"}, "spec": {"containers": [{"name": "c"}]}}),
        ),
        (
            "pod container bad name",
            pods.clone(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p3"}, "spec": {"containers": [{"name": "C_1", "image": "i"}]}}),
        ),
        (
            "pod duplicate container names",
            pods.clone(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p4"}, "spec": {"containers": [{"name": "c", "image": "i"}, {"name": "c", "image": "i"}]}}),
        ),
        (
            "bad label value",
            s.core("configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "labels": {"a": "not valid!"}}}),
        ),
        (
            "bad label key",
            s.core("configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c2", "labels": {"-a": "v"}}}),
        ),
        (
            "bad annotation key",
            s.core("configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c3", "annotations": {"a b": "v"}}}),
        ),
        (
            "service bad port",
            s.core("services"),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s1"}, "spec": {"ports": [{"port": 70000}]}}),
        ),
        (
            "deployment negative replicas",
            format!("/apis/apps/v1/namespaces/{}/deployments", s.ns),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
                "spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}},
                         "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        ),
        (
            "serviceaccount bad name",
            s.core("serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "Bad_Name"}}),
        ),
        (
            "rolebinding without roleRef",
            format!(
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/rolebindings",
                s.ns
            ),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"}}),
        ),
        (
            "job without template containers",
            format!("/apis/batch/v1/namespaces/{}/jobs", s.ns),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                "spec": {"template": {"spec": {"containers": [], "restartPolicy": "Never"}}}}),
        ),
        (
            "node bad name",
            "/api/v1/nodes".to_owned(),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "Bad_Node"}}),
        ),
    ];
    for (label, path, body) in cases {
        s.req(label, "POST", &path, Some(body)).await?;
    }
    Ok(())
}
