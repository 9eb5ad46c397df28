//! Admission webhook configurations (admissionregistration.k8s.io/v1): their defaults and
//! validation.

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
async fn settle() {
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
}

/// A webhook of `server` at `path` for `operations` on ConfigMaps of the scenario's
/// namespace only (configurations are cluster-wide; other scenarios must not see them).
fn scoped(s: &Script<'_>, name: &str, cc: Value, operations: &[&str]) -> Value {
    let mut h = hook(name, "https://unused", operations);
    h["clientConfig"] = cc;
    h["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": s.ns.clone()}});
    h
}

/// Creates a configuration, waits until it is effective; returns its path.
async fn install(s: &mut Script<'_>, mutating: bool, hooks: Value) -> anyhow::Result<String> {
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

fn paths(server: &super::hookserver::HookServer) -> String {
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

pub(crate) async fn webhook_timeout(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    let mut ignore = scoped(
        s,
        "slow-ignore.example.com",
        server.client_config("/slow"),
        &["CREATE"],
    );
    ignore["timeoutSeconds"] = json!(1);
    ignore["failurePolicy"] = json!("Ignore");
    let mut fail = scoped(
        s,
        "slow-fail.example.com",
        server.client_config("/slow"),
        &["UPDATE"],
    );
    fail["timeoutSeconds"] = json!(1);
    let cfg = install(s, false, json!([ignore, fail])).await?;
    s.req(
        "create past an ignored timeout",
        "POST",
        &cms,
        Some(crate::script::config_map("a", json!({}))),
    )
    .await?;
    s.req(
        "update past a failing timeout",
        "PATCH",
        &format!("{cms}/a"),
        Some(json!({"data": {"k": "v"}})),
    )
    .await?;
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_reinvocation(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    let mut first = scoped(
        s,
        "first.example.com",
        server.client_config("/allow"),
        &["CREATE"],
    );
    first["reinvocationPolicy"] = json!("IfNeeded");
    let second = scoped(
        s,
        "second.example.com",
        server.client_config("/label"),
        &["CREATE"],
    );
    let cfg = install(s, true, json!([first, second])).await?;
    let r = s
        .req(
            "create",
            "POST",
            &cms,
            Some(crate::script::config_map("a", json!({}))),
        )
        .await?;
    s.field("labels", &r.body, "/metadata/labels");
    let calls = server.take();
    for (path, req) in &calls {
        s.note(format!("call {path}"));
        s.field("  object labels", req, "/object/metadata/labels");
    }
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_subresources(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let deploys = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    s.req("create deployment", "POST", &deploys, Some(deploy))
        .await?;
    let mut deny = scoped(
        s,
        "status.example.com",
        server.client_config("/deny"),
        &["UPDATE"],
    );
    deny["rules"] = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"],
        "apiVersions": ["v1"], "resources": ["deployments/status"]}]);
    let mut record = scoped(
        s,
        "scale.example.com",
        server.client_config("/allow"),
        &["UPDATE"],
    );
    record["rules"] = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"],
        "apiVersions": ["*"], "resources": ["*/scale"]}]);
    let cfg = install(s, false, json!([deny, record])).await?;
    s.req(
        "patch status denied",
        "PATCH",
        &format!("{deploys}/d/status"),
        Some(json!({"status": {"observedGeneration": 1}})),
    )
    .await?;
    s.req(
        "patch spec not matched",
        "PATCH",
        &format!("{deploys}/d"),
        Some(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await?;
    let r = s
        .req(
            "patch scale",
            "PATCH",
            &format!("{deploys}/d/scale"),
            Some(json!({"spec": {"replicas": 2}})),
        )
        .await?;
    s.field("scale replicas", &r.body, "/spec/replicas");
    for (path, req) in server.take() {
        s.note(format!("call {path}"));
        for f in [
            "/kind",
            "/resource",
            "/subResource",
            "/requestKind",
            "/name",
            "/object/spec/replicas",
            "/oldObject/spec/replicas",
            "/object/status/observedGeneration",
            "/object/kind",
        ] {
            s.field(f, &req, f);
        }
    }
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_match_conditions(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    let mut named = scoped(
        s,
        "named.example.com",
        server.client_config("/deny"),
        &["CREATE"],
    );
    named["matchConditions"] = json!([
        {"name": "not-skipped", "expression": "object.metadata.name != 'skipped'"},
        {"name": "creates", "expression": "request.operation == 'CREATE' && oldObject == null"}]);
    let mut broken = scoped(
        s,
        "broken.example.com",
        server.client_config("/deny"),
        &["CREATE"],
    );
    broken["failurePolicy"] = json!("Ignore");
    broken["matchConditions"] =
        json!([{"name": "missing", "expression": "object.nosuchfield == 'x'"}]);
    let cfg = install(s, false, json!([named, broken])).await?;
    s.req(
        "create skipped",
        "POST",
        &cms,
        Some(crate::script::config_map("skipped", json!({}))),
    )
    .await?;
    s.req(
        "create other",
        "POST",
        &cms,
        Some(crate::script::config_map("other", json!({}))),
    )
    .await?;
    s.note(paths(&server));
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_answers(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    let mut hooks = Vec::new();
    for case in ["deny-invalid", "deny-bare", "bad-uid"] {
        let mut h = scoped(
            s,
            &format!("{case}.example.com"),
            server.client_config(&format!("/{case}")),
            &["CREATE"],
        );
        h["objectSelector"] = json!({"matchLabels": {"case": case}});
        hooks.push(h);
    }
    let cfg = install(s, false, Value::Array(hooks)).await?;
    for case in ["deny-invalid", "deny-bare", "bad-uid"] {
        let mut cm = crate::script::config_map(case, json!({}));
        cm["metadata"]["labels"] = json!({"case": case});
        let r = s.req(case, "POST", &cms, Some(cm)).await?;
        s.field("  code", &r.body, "/code");
        let details = r
            .body
            .get("details")
            .map_or_else(|| "-".to_owned(), Value::to_string);
        s.note(format!(
            "  details = {}",
            kcache_conformance::normalise(&details)
        ));
    }
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_delete_collection(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let cms = s.core("configmaps");
    for (name, keep) in [("a", "no"), ("b", "yes"), ("c", "no")] {
        let mut cm = crate::script::config_map(name, json!({}));
        cm["metadata"]["labels"] = json!({"group": "g", "keep": keep});
        s.req(&format!("create {name}"), "POST", &cms, Some(cm))
            .await?;
    }
    let mut deny = scoped(
        s,
        "keep.example.com",
        server.client_config("/deny"),
        &["DELETE"],
    );
    deny["objectSelector"] = json!({"matchLabels": {"keep": "yes"}});
    let cfg = install(s, false, json!([deny])).await?;
    s.req(
        "delete collection",
        "DELETE",
        &format!("{cms}?labelSelector=group%3Dg"),
        None,
    )
    .await?;
    let r = s.req("list", "GET", &cms, None).await?;
    let names: Vec<&str> = r.body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    s.note(format!("left: {names:?}"));
    let calls = server.take();
    s.note(format!("webhook calls: {}", calls.len()));
    for (_, req) in calls {
        s.field("  operation", &req, "/operation");
        s.field("  options", &req, "/options");
    }
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}

pub(crate) async fn webhook_eviction(s: &mut Script<'_>) -> anyhow::Result<()> {
    let server = super::hookserver::start().await?;
    let pods = s.core("pods");
    for name in ["p1", "p2"] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"guard": if name == "p1" { "yes" } else { "no" }}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        s.req(&format!("create {name}"), "POST", &pods, Some(pod))
            .await?;
    }
    let mut h = scoped(
        s,
        "evict.example.com",
        server.client_config("/deny"),
        &["CREATE"],
    );
    h["rules"] = json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
        "resources": ["pods/eviction"]}]);
    // The object is the Eviction, whose labels an objectSelector would see (none here).
    let cfg = install(s, false, json!([h])).await?;
    let ev = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    s.req(
        "evict guarded",
        "POST",
        &format!("{pods}/p1/eviction"),
        Some(ev("p1")),
    )
    .await?;
    s.req(
        "evict other",
        "POST",
        &format!("{pods}/p2/eviction"),
        Some(ev("p2")),
    )
    .await?;
    for (_, req) in server.take() {
        for f in [
            "/operation",
            "/kind",
            "/resource",
            "/subResource",
            "/name",
            "/object/kind",
            "/oldObject",
        ] {
            s.field(f, &req, f);
        }
    }
    s.req("get guarded", "GET", &format!("{pods}/p1"), None)
        .await?;
    s.req("uninstall", "DELETE", &cfg, None).await?;
    Ok(())
}
