//! More admission webhook scenarios: timeouts, reinvocation, subresources, `matchConditions`,
//! the forms of a webhook's answer, deletecollection and eviction.

use serde_json::{Value, json};

use crate::script::Script;
use crate::webhooks::{install, paths, scoped};

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
