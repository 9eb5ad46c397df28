//! Admission webhooks (admissionregistration.k8s.io/v1): the configurations' defaults and
//! validation, and the calls — denials, JSON patches, failure policies, selectors, dry run and
//! the AdmissionReview's fields — against the test webhook of `hookserver.rs`; more in
//! `webhooks_more.rs`.

use serde_json::{Value, json};

use crate::script::Script;

/// `/apis/admissionregistration.k8s.io/v1/{plural}`.
pub(crate) fn configs(plural: &str) -> String {
    format!("/apis/admissionregistration.k8s.io/v1/{plural}")
}

/// One webhook calling `url` for `operations` on ConfigMaps.
pub(crate) fn hook(name: &str, url: &str, operations: &[&str]) -> Value {
    json!({"name": name, "clientConfig": {"url": url},
        "rules": [{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]})
}

/// A configuration of `kind` named `name` holding `hooks`.
pub(crate) fn config(kind: &str, name: &str, hooks: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": hooks})
}

pub(crate) async fn webhook_configuration_defaults_and_validation(
    s: &mut Script<'_>,
) -> anyhow::Result<()> {
    let url = "https://127.0.0.1:9/unused";
    for (kind, plural) in [
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    ] {
        let name = format!("{}-defaults", s.ns);
        // Never called: no rule matches anything this scenario writes.
        let mut h = hook("d.example.com", url, &["CONNECT"]);
        h["rules"][0]["resources"] = json!(["nosuchthings"]);
        let r = s
            .req(
                &format!("create {kind}"),
                "POST",
                &configs(plural),
                Some(config(kind, &name, json!([h]))),
            )
            .await?;
        for f in [
            "failurePolicy",
            "matchPolicy",
            "namespaceSelector",
            "objectSelector",
            "timeoutSeconds",
            "reinvocationPolicy",
            "rules/0/scope",
            "sideEffects",
        ] {
            s.field(f, &r.body, &format!("/webhooks/0/{f}"));
        }
        s.req("get", "GET", &format!("{}/{name}", configs(plural)), None)
            .await?;
        let bad = json!([
            {"name": "short", "clientConfig": {"url": "http://127.0.0.1/x?a=b"},
             "rules": [{"operations": ["CREATE", "*"], "apiGroups": [], "apiVersions": ["v1"],
                        "resources": ["*", "pods"], "scope": "Somewhere"}],
             "timeoutSeconds": 31, "failurePolicy": "Maybe", "admissionReviewVersions": []},
            {"name": "a.b.c", "clientConfig": {}, "sideEffects": "Some",
             "admissionReviewVersions": ["v2"]},
            {"name": "a.b.c", "clientConfig": {"service": {"name": "", "namespace": "n", "port": 0}},
             "sideEffects": "None", "admissionReviewVersions": ["v1", "v1"]}
        ]);
        s.req(
            "create invalid",
            "POST",
            &configs(plural),
            Some(config(kind, &format!("{}-bad", s.ns), bad)),
        )
        .await?;
        s.req(
            "update to a timeout of 0",
            "PATCH",
            &format!("{}/{name}", configs(plural)),
            Some(
                json!({"webhooks": [{"name": "d.example.com", "timeoutSeconds": 0,
                "clientConfig": {"url": url}, "sideEffects": "None",
                "admissionReviewVersions": ["v1"]}]}),
            ),
        )
        .await?;
        s.req(
            "delete",
            "DELETE",
            &format!("{}/{name}", configs(plural)),
            None,
        )
        .await?;
    }
    Ok(())
}

/// Admission configurations become effective after kube-apiserver's informer sees them.
pub(crate) async fn settle() {
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
}

/// A webhook of `server` at `path` for `operations` on ConfigMaps of the scenario's
/// namespace only (configurations are cluster-wide; other scenarios must not see them).
pub(crate) fn scoped(s: &Script<'_>, name: &str, cc: Value, operations: &[&str]) -> Value {
    let mut h = hook(name, "https://unused", operations);
    h["clientConfig"] = cc;
    h["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": s.ns.clone()}});
    h
}

/// Creates a configuration, waits until it is effective; returns its path.
pub(crate) async fn install(
    s: &mut Script<'_>,
    mutating: bool,
    hooks: Value,
) -> anyhow::Result<String> {
    let (kind, plural) = if mutating {
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        )
    } else {
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        )
    };
    let name = format!("{}-{}", s.ns, if mutating { "m" } else { "v" });
    s.req(
        &format!("install {kind}"),
        "POST",
        &configs(plural),
        Some(config(kind, &name, hooks)),
    )
    .await?;
    settle().await;
    Ok(format!("{}/{name}", configs(plural)))
}

pub(crate) fn paths(server: &super::hookserver::HookServer) -> String {
    let got: Vec<String> = server.take().into_iter().map(|(p, _)| p).collect();
    format!("webhook calls: {got:?}")
}

pub(crate) async fn webhook_validating_deny(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    s.req(
        "create before",
        "POST",
        &cms,
        Some(crate::script::config_map("pre", json!({}))),
    )
    .await?;
    let h = scoped(
        s,
        "deny.example.com",
        server.client_config("/deny"),
        &["CREATE"],
    );
    let cfg = install(s, false, json!([h])).await?;
    s.req(
        "create denied",
        "POST",
        &cms,
        Some(crate::script::config_map("a", json!({}))),
    )
    .await?;
    s.note(paths(&server));
    s.req("get denied", "GET", &format!("{cms}/a"), None)
        .await?;
    s.req(
        "update not matched",
        "PATCH",
        &format!("{cms}/pre"),
        Some(json!({"data": {"k": "v"}})),
    )
    .await?;
    s.req("delete not matched", "DELETE", &format!("{cms}/pre"), None)
        .await?;
    s.note(paths(&server));
    s.req(
        "secret not matched",
        "POST",
        &s.core("secrets"),
        Some(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})),
    )
    .await?;
    s.note(paths(&server));
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_mutating_patch(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    let h = scoped(
        s,
        "label.example.com",
        server.client_config("/label"),
        &["CREATE", "UPDATE"],
    );
    let cfg = install(s, true, json!([h])).await?;
    let r = s
        .req(
            "create",
            "POST",
            &cms,
            Some(crate::script::config_map("a", json!({"k": "v"}))),
        )
        .await?;
    s.field("labels", &r.body, "/metadata/labels");
    s.note(paths(&server));
    let r = s.req("get", "GET", &format!("{cms}/a"), None).await?;
    s.field("stored labels", &r.body, "/metadata/labels");
    let r = s
        .raw(
            "json patch removing the labels",
            "PATCH",
            &format!("{cms}/a"),
            "application/json-patch+json",
            r#"[{"op": "remove", "path": "/metadata/labels"}]"#,
        )
        .await?;
    s.field("labels after", &r.body, "/metadata/labels");
    s.field("data after", &r.body, "/data");
    let r = s
        .raw(
            "apply",
            "PATCH",
            &format!("{cms}/b?fieldManager=test"),
            "application/apply-patch+yaml",
            r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "labels": {"x": "y"}}}"#,
        )
        .await?;
    s.field("applied labels", &r.body, "/metadata/labels");
    let r = s
        .req(
            "dry-run create",
            "POST",
            &format!("{cms}?dryRun=All"),
            Some(crate::script::config_map("c", json!({}))),
        )
        .await?;
    s.field("dry-run labels", &r.body, "/metadata/labels");
    s.req(
        "dry-run object not stored",
        "GET",
        &format!("{cms}/c"),
        None,
    )
    .await?;
    s.note(paths(&server));
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_failure_policy(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let unreachable = json!({"url": "https://127.0.0.1:1/nothing-here"});
    let mut ignore = scoped(s, "ignore.example.com", unreachable.clone(), &["CREATE"]);
    ignore["failurePolicy"] = json!("Ignore");
    let mut fail = scoped(s, "fail.example.com", unreachable, &["UPDATE"]);
    fail["failurePolicy"] = json!("Fail");
    let cfg = install(s, false, json!([ignore, fail])).await?;
    s.req(
        "create with Ignore",
        "POST",
        &cms,
        Some(crate::script::config_map("a", json!({}))),
    )
    .await?;
    s.req(
        "update with Fail",
        "PATCH",
        &format!("{cms}/a"),
        Some(json!({"data": {"k": "v"}})),
    )
    .await?;
    let r = s.req("get", "GET", &format!("{cms}/a"), None).await?;
    s.field("data", &r.body, "/data");
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_selectors(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    let mut by_object = scoped(
        s,
        "object.example.com",
        server.client_config("/deny"),
        &["CREATE"],
    );
    by_object["objectSelector"] = json!({"matchLabels": {"check": "yes"}});
    let mut by_ns = hook("ns.example.com", "https://unused", &["CREATE"]);
    by_ns["clientConfig"] = server.client_config("/deny");
    by_ns["namespaceSelector"] = json!({"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [s.ns.clone()]},
        {"key": "no-such-label", "operator": "Exists"}]});
    let cfg = install(s, false, json!([by_object, by_ns])).await?;
    s.req(
        "create unlabelled",
        "POST",
        &cms,
        Some(crate::script::config_map("a", json!({}))),
    )
    .await?;
    let mut labelled = crate::script::config_map("b", json!({}));
    labelled["metadata"]["labels"] = json!({"check": "yes"});
    s.req("create labelled", "POST", &cms, Some(labelled))
        .await?;
    s.note(paths(&server));
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_dry_run(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    let mut h = scoped(
        s,
        "dry.example.com",
        server.client_config("/allow"),
        &["CREATE"],
    );
    h["sideEffects"] = json!("NoneOnDryRun");
    let cfg = install(s, false, json!([h])).await?;
    s.req(
        "dry-run create",
        "POST",
        &format!("{cms}?dryRun=All"),
        Some(crate::script::config_map("a", json!({}))),
    )
    .await?;
    for (_, req) in server.take() {
        s.field("dryRun", &req, "/dryRun");
        s.field("options", &req, "/options");
    }
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_review_fields(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    let h = scoped(
        s,
        "record.example.com",
        server.client_config("/allow"),
        &["*"],
    );
    let cfg = install(s, false, json!([h])).await?;
    s.req(
        "create",
        "POST",
        &format!("{cms}?fieldManager=me"),
        Some(crate::script::config_map("a", json!({"k": "v"}))),
    )
    .await?;
    s.req(
        "update",
        "PATCH",
        &format!("{cms}/a"),
        Some(json!({"data": {"k": "w"}})),
    )
    .await?;
    s.req("delete", "DELETE", &format!("{cms}/a"), None).await?;
    for (path, req) in server.take() {
        s.note(format!("call {path}"));
        for f in [
            "/operation",
            "/kind",
            "/resource",
            "/subResource",
            "/requestKind",
            "/requestResource",
            "/requestSubResource",
            "/name",
            "/namespace",
            "/userInfo/username",
            "/dryRun",
            "/options",
            "/object/metadata/name",
            "/object/data",
            "/oldObject/metadata/name",
            "/oldObject/data",
        ] {
            s.field(f, &req, f);
        }
        s.present("uid", &req, "/uid");
    }
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}
