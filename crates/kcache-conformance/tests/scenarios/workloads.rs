//! `apps/v1` workloads: defaults, generation, the status and scale subresources, validation.

use serde_json::{Value, json};

use crate::script::Script;

fn apps(s: &Script<'_>, resource: &str) -> String {
    format!("/apis/apps/v1/namespaces/{}/{resource}", s.ns)
}

fn workload(kind: &str, name: &str, selector: Value, labels: Value) -> Value {
    let mut spec = json!({
        "selector": {"matchLabels": selector},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}
        }
    });
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(name);
    }
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec})
}

pub(crate) async fn deployment_defaults_and_generation(s: &mut Script<'_>) -> anyhow::Result<()> {
    let deploys = apps(s, "deployments");
    let d = workload(
        "Deployment",
        "web",
        json!({"app": "web"}),
        json!({"app": "web"}),
    );
    let r = s.req("create", "POST", &deploys, Some(d)).await?;
    for ptr in [
        "/metadata/generation",
        "/spec/replicas",
        "/spec/strategy",
        "/spec/revisionHistoryLimit",
        "/spec/progressDeadlineSeconds",
        "/spec/template/spec/restartPolicy",
        "/spec/template/spec/dnsPolicy",
        "/spec/template/spec/terminationGracePeriodSeconds",
        "/spec/template/spec/schedulerName",
        "/spec/template/spec/securityContext",
        "/spec/template/spec/containers/0/imagePullPolicy",
        "/spec/template/spec/containers/0/terminationMessagePath",
        "/spec/template/spec/containers/0/terminationMessagePolicy",
        "/spec/template/spec/containers/0/ports/0/protocol",
        "/status",
    ] {
        s.field(ptr, &r.body, ptr);
    }
    let url = format!("{deploys}/web");
    let r = s
        .req(
            "label",
            "PATCH",
            &url,
            Some(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await?;
    s.field("generation after label", &r.body, "/metadata/generation");
    let r = s
        .req(
            "replicas",
            "PATCH",
            &url,
            Some(json!({"spec": {"replicas": 2}})),
        )
        .await?;
    s.field("generation after replicas", &r.body, "/metadata/generation");
    let r = s
        .req(
            "status via main",
            "PATCH",
            &url,
            Some(json!({"status": {"replicas": 5}})),
        )
        .await?;
    s.field("status after main write", &r.body, "/status");
    let r = s
        .req(
            "status via /status",
            "PATCH",
            &format!("{url}/status"),
            Some(json!({"status": {"replicas": 5}, "spec": {"replicas": 9}})),
        )
        .await?;
    s.field("status.replicas", &r.body, "/status/replicas");
    s.field("spec.replicas after /status", &r.body, "/spec/replicas");
    s.field("generation after /status", &r.body, "/metadata/generation");
    let r = s.req("put unchanged", "GET", &url, None).await?;
    let r = s.req("no-op put", "PUT", &url, Some(r.body)).await?;
    s.field(
        "generation after no-op put",
        &r.body,
        "/metadata/generation",
    );
    Ok(())
}

pub(crate) async fn deployment_validation(s: &mut Script<'_>) -> anyhow::Result<()> {
    let deploys = apps(s, "deployments");
    let d = workload(
        "Deployment",
        "mismatch",
        json!({"app": "a"}),
        json!({"app": "b"}),
    );
    s.req("selector does not match", "POST", &deploys, Some(d))
        .await?;
    let mut d = workload(
        "Deployment",
        "nocontainers",
        json!({"app": "a"}),
        json!({"app": "a"}),
    );
    d["spec"]["template"]["spec"]["containers"] = json!([]);
    s.req("no containers", "POST", &deploys, Some(d)).await?;
    let d = workload(
        "Deployment",
        "ok",
        json!({"app": "a"}),
        json!({"app": "a", "tier": "x"}),
    );
    s.req("template labels a superset", "POST", &deploys, Some(d))
        .await?;
    Ok(())
}

pub(crate) async fn scale_subresource(s: &mut Script<'_>) -> anyhow::Result<()> {
    let deploys = apps(s, "deployments");
    let d = workload(
        "Deployment",
        "web",
        json!({"app": "web", "tier": "fe"}),
        json!({"app": "web", "tier": "fe"}),
    );
    s.req("create", "POST", &deploys, Some(d)).await?;
    let r = s
        .req("get scale", "GET", &format!("{deploys}/web/scale"), None)
        .await?;
    s.field("apiVersion", &r.body, "/apiVersion");
    s.field("spec", &r.body, "/spec");
    s.field("status", &r.body, "/status");
    let r = s
        .req(
            "patch scale",
            "PATCH",
            &format!("{deploys}/web/scale"),
            Some(json!({"spec": {"replicas": 3}})),
        )
        .await?;
    s.field("scaled", &r.body, "/spec/replicas");
    let r = s
        .req("get deployment", "GET", &format!("{deploys}/web"), None)
        .await?;
    s.field("deployment replicas", &r.body, "/spec/replicas");
    s.field("generation", &r.body, "/metadata/generation");
    let stale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web", "resourceVersion": "1"}, "spec": {"replicas": 1}});
    s.req(
        "put scale with a stale rv",
        "PUT",
        &format!("{deploys}/web/scale"),
        Some(stale),
    )
    .await?;
    let ds = workload(
        "DaemonSet",
        "agent",
        json!({"app": "agent"}),
        json!({"app": "agent"}),
    );
    s.req("create daemonset", "POST", &apps(s, "daemonsets"), Some(ds))
        .await?;
    s.req(
        "daemonset has no scale",
        "GET",
        &format!("{}/agent/scale", apps(s, "daemonsets")),
        None,
    )
    .await?;
    Ok(())
}

pub(crate) async fn other_workload_defaults(s: &mut Script<'_>) -> anyhow::Result<()> {
    let rs = workload(
        "ReplicaSet",
        "rs",
        json!({"app": "rs"}),
        json!({"app": "rs"}),
    );
    let r = s
        .req(
            "create replicaset",
            "POST",
            &apps(s, "replicasets"),
            Some(rs),
        )
        .await?;
    s.field("rs replicas", &r.body, "/spec/replicas");
    let sts = workload(
        "StatefulSet",
        "db",
        json!({"app": "db"}),
        json!({"app": "db"}),
    );
    let r = s
        .req(
            "create statefulset",
            "POST",
            &apps(s, "statefulsets"),
            Some(sts),
        )
        .await?;
    for ptr in [
        "/spec/replicas",
        "/spec/podManagementPolicy",
        "/spec/updateStrategy",
        "/spec/revisionHistoryLimit",
        "/spec/persistentVolumeClaimRetentionPolicy",
    ] {
        s.field(ptr, &r.body, ptr);
    }
    let ds = workload(
        "DaemonSet",
        "agent",
        json!({"app": "agent"}),
        json!({"app": "agent"}),
    );
    let r = s
        .req("create daemonset", "POST", &apps(s, "daemonsets"), Some(ds))
        .await?;
    s.field("ds updateStrategy", &r.body, "/spec/updateStrategy");
    s.field(
        "ds revisionHistoryLimit",
        &r.body,
        "/spec/revisionHistoryLimit",
    );
    let r = s
        .req(
            "list deployments across namespaces",
            "GET",
            "/apis/apps/v1/deployments?limit=1",
            None,
        )
        .await?;
    s.field("list kind", &r.body, "/kind");
    Ok(())
}
