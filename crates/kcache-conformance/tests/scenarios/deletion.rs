//! The apiserver side of deletion propagation, which kube-apiserver answers without a garbage
//! collector: the `orphan` / `foregroundDeletion` finalizers a DELETE adds from its options,
//! the finalizers already there and the kind's default, and the DeleteOptions checks. Every
//! object holds a finalizer of its own, so that only the DELETE answers are compared (kcache's
//! collector may remove its finalizers afterwards; upstream has none to).

use serde_json::{Value, json};

use crate::script::{Script, config_map};

/// DELETE `path` with DeleteOptions `opts`; writes the answer and its finalizers.
async fn delete_with(
    s: &mut Script<'_>,
    label: &str,
    path: &str,
    opts: Value,
) -> anyhow::Result<()> {
    let r = s.req(label, "DELETE", path, Some(opts)).await?;
    s.field(
        &format!("{label} finalizers"),
        &r.body,
        "/metadata/finalizers",
    );
    Ok(())
}

pub(crate) async fn deletion_propagation(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let mut held = config_map("held", json!({"k": "v"}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    s.req("create", "POST", &cms, Some(held)).await?;
    let path = format!("{cms}/held");
    delete_with(s, "orphan", &path, json!({"propagationPolicy": "Orphan"})).await?;
    delete_with(
        s,
        "foreground",
        &path,
        json!({"propagationPolicy": "Foreground"}),
    )
    .await?;
    delete_with(
        s,
        "background",
        &path,
        json!({"propagationPolicy": "Background"}),
    )
    .await?;
    delete_with(
        s,
        "orphanDependents",
        &path,
        json!({"orphanDependents": true}),
    )
    .await?;
    let r = s
        .req(
            "query policy",
            "DELETE",
            &format!("{path}?propagationPolicy=Foreground"),
            None,
        )
        .await?;
    s.field("query policy finalizers", &r.body, "/metadata/finalizers");
    let both = json!({"propagationPolicy": "Orphan", "orphanDependents": false});
    let r = s.req("both set", "DELETE", &path, Some(both)).await?;
    s.field("both set message", &r.body, "/message");
    let r = s
        .req(
            "unknown policy",
            "DELETE",
            &path,
            Some(json!({"propagationPolicy": "Sideways"})),
        )
        .await?;
    s.field("unknown policy message", &r.body, "/message");
    s.field("unknown policy cause", &r.body, "/details/causes/0/reason");
    let r = s
        .req(
            "missing object",
            "DELETE",
            &format!("{cms}/missing"),
            Some(json!({"propagationPolicy": "Sideways"})),
        )
        .await?;
    s.field("missing object reason", &r.body, "/reason");

    // The kinds' defaults: ReplicationControllers and batch/v1 Jobs orphan, apps/v1 workloads
    // do not.
    let rcs = s.core("replicationcontrollers");
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "rc", "finalizers": ["example.com/hold"]},
        "spec": {"replicas": 0, "selector": {"app": "x"},
                 "template": {"metadata": {"labels": {"app": "x"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    s.req("create rc", "POST", &rcs, Some(rc)).await?;
    let r = s
        .req("delete rc", "DELETE", &format!("{rcs}/rc"), None)
        .await?;
    s.field("delete rc finalizers", &r.body, "/metadata/finalizers");
    let deploys = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "finalizers": ["example.com/hold"]},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "y"}},
                 "template": {"metadata": {"labels": {"app": "y"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    s.req("create deployment", "POST", &deploys, Some(d))
        .await?;
    let r = s
        .req("delete deployment", "DELETE", &format!("{deploys}/d"), None)
        .await?;
    s.field(
        "delete deployment finalizers",
        &r.body,
        "/metadata/finalizers",
    );

    let jobs = format!("/apis/batch/v1/namespaces/{}/jobs", s.ns);
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "finalizers": ["example.com/hold"]},
        "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "i"}]}}}});
    s.req("create job", "POST", &jobs, Some(job)).await?;
    let r = s
        .req("delete job", "DELETE", &format!("{jobs}/j"), None)
        .await?;
    s.field("delete job finalizers", &r.body, "/metadata/finalizers");
    // Events are never garbage-collected: no GC finalizer, whatever the options.
    let events = format!("/apis/events.k8s.io/v1/namespaces/{}/events", s.ns);
    let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e", "finalizers": ["example.com/hold"]},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "x/y",
        "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": s.ns}});
    s.req("create event", "POST", &events, Some(ev)).await?;
    let opts = json!({"propagationPolicy": "Foreground"});
    let r = s
        .req("delete event", "DELETE", &format!("{events}/e"), Some(opts))
        .await?;
    s.field("delete event finalizers", &r.body, "/metadata/finalizers");

    // Clean up: release the holds so that the namespace can go.
    let release = json!({"metadata": {"finalizers": null}});
    for p in [
        path,
        format!("{rcs}/rc"),
        format!("{deploys}/d"),
        format!("{jobs}/j"),
        format!("{events}/e"),
    ] {
        s.t.send("PATCH", &p, Some(release.clone())).await?;
    }
    Ok(())
}
