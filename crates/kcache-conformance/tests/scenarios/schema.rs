//! Decoding from the one schema source (type errors, quantities, unknown fields at every
//! depth in each `fieldValidation` mode), and what controller-runtime v0.25.3's suites found
//! different: RBAC names as path segments, the answer of a PUT removing the last finalizer of
//! a deleting object, CRD versions in discovery in Kubernetes version priority.

use std::time::Duration;

use serde_json::{Value, json};

use crate::crds::wait_established;
use crate::script::Script;

fn deployment(name: &str, container: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [container]}}}})
}

fn pod(name: &str, container: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [container]}})
}

pub(crate) async fn schema_decoding(s: &mut Script<'_>) -> anyhow::Result<()> {
    let deploys = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let pods = s.core("pods");
    let typo = json!({"name": "c", "image": "i", "imagePullPolicyy": "Always"});
    for (label, mode, name) in [
        ("nested unknown, Strict", "?fieldValidation=Strict", "d1"),
        ("nested unknown, Warn", "?fieldValidation=Warn", "d2"),
        ("nested unknown, default", "", "d3"),
        ("nested unknown, Ignore", "?fieldValidation=Ignore", "d4"),
    ] {
        let r = s
            .req(
                label,
                "POST",
                &format!("{deploys}{mode}"),
                Some(deployment(name, typo.clone())),
            )
            .await?;
        s.present(
            "  typo stored",
            &r.body,
            "/spec/template/spec/containers/0/imagePullPolicyy",
        );
    }
    let two = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d5"},
        "spec": {"zzz": 1}});
    s.req(
        "top and nested unknowns, Strict",
        "POST",
        &format!("{deploys}?fieldValidation=Strict"),
        Some(two),
    )
    .await?;
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("{}-node", s.ns)}, "spec": {"invalidField": 1}});
    s.req(
        "node spec.invalidField, Strict",
        "POST",
        "/api/v1/nodes?fieldValidation=Strict&dryRun=All",
        Some(node),
    )
    .await?;
    for (label, resources) in [
        ("cpu lots", json!({"requests": {"cpu": "lots"}})),
        ("memory abc", json!({"limits": {"memory": "abc"}})),
        ("cpu as a number", json!({"requests": {"cpu": 2}})),
        ("bad suffix", json!({"requests": {"cpu": "1kk"}})),
    ] {
        let p = pod(
            "p",
            json!({"name": "c", "image": "i", "resources": resources}),
        );
        s.req(label, "POST", &format!("{pods}?dryRun=All"), Some(p))
            .await?;
    }
    let p = pod(
        "p",
        json!({"name": "c", "image": "i", "ports": [{"containerPort": 99999}]}),
    );
    s.req("containerPort 99999", "POST", &pods, Some(p)).await?;
    let p = pod(
        "p",
        json!({"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}),
    );
    s.req("containerPort as a string", "POST", &pods, Some(p))
        .await?;
    for (label, spec) in [
        ("replicas as a string", json!({"replicas": "three"})),
        (
            "replicas over int32",
            json!({"replicas": 3_000_000_000_i64}),
        ),
        ("replicas 1.5", json!({"replicas": 1.5})),
        ("paused as a string", json!({"paused": "yes"})),
        ("selector as an array", json!({"selector": []})),
    ] {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "typed"}, "spec": spec});
        s.req(label, "POST", &deploys, Some(d)).await?;
    }
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "typed", "labels": {"n": 1}}});
    s.req("label as a number", "POST", &deploys, Some(d))
        .await?;
    // Patches: warnings by default; Strict quotes the patched object in the cause (compared
    // by status, reason and field only: the quoted JSON's key order is Go's).
    let cms = s.core("configmaps");
    s.req(
        "configmap",
        "POST",
        &cms,
        Some(json!({"metadata": {"name": "pc"}})),
    )
    .await?;
    let change = json!({"metadata": {"labelz": {"a": "b"}}, "dataa": {"x": "y"}});
    s.req(
        "merge patch with unknowns",
        "PATCH",
        &format!("{cms}/pc"),
        Some(change.clone()),
    )
    .await?;
    let r =
        s.t.send(
            "PATCH",
            &format!("{cms}/pc?fieldValidation=Strict"),
            Some(change),
        )
        .await?;
    s.note(format!(
        "strict merge patch with unknowns: {} {} {}",
        r.status, r.body["reason"], r.body["details"]["causes"][0]["field"]
    ));
    Ok(())
}

pub(crate) async fn controller_runtime_parity(s: &mut Script<'_>) -> anyhow::Result<()> {
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let name = format!("clusterRole-{}", s.ns);
    s.req(
        "mixed-case ClusterRole",
        "POST",
        roles,
        Some(json!({"metadata": {"name": name}})),
    )
    .await?;
    s.req("delete it", "DELETE", &format!("{roles}/{name}"), None)
        .await?;
    for bad in ["a/b%c", "..", "."] {
        s.req(
            &format!("ClusterRole {bad:?}"),
            "POST",
            roles,
            Some(json!({"metadata": {"name": bad}})),
        )
        .await?;
    }
    let roles = format!(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/roles",
        s.ns
    );
    s.req(
        "Role Some_Role:1",
        "POST",
        &roles,
        Some(json!({"metadata": {"name": "Some_Role:1"}})),
    )
    .await?;

    let cms = s.core("configmaps");
    let cm = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    s.req("create held", "POST", &cms, Some(cm)).await?;
    s.req("delete held", "DELETE", &format!("{cms}/held"), None)
        .await?;
    let mut held = s.t.send("GET", &format!("{cms}/held"), None).await?.body;
    let rv = held["metadata"]["resourceVersion"].clone();
    held["metadata"]["finalizers"] = json!([]);
    let r = s
        .req(
            "remove the last finalizer",
            "PUT",
            &format!("{cms}/held"),
            Some(held),
        )
        .await?;
    s.note(format!(
        "  answer carries the sent resourceVersion: {}",
        r.body["metadata"]["resourceVersion"] == rv
    ));
    s.present(
        "  deletionTimestamp",
        &r.body,
        "/metadata/deletionTimestamp",
    );
    s.present("  finalizers", &r.body, "/metadata/finalizers");
    s.req("then", "GET", &format!("{cms}/held"), None).await?;

    let group = format!("{}.example.com", s.ns);
    let schema = json!({"openAPIV3Schema": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}});
    let versions: Vec<Value> = [
        "v1alpha1", "zeta", "v1beta1", "v2", "v1", "v1beta2", "alpha",
    ]
    .iter()
    .map(|v| json!({"name": v, "served": true, "storage": *v == "v1", "schema": schema}))
    .collect();
    let crd_name = format!("gadgets.{group}");
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"}, "versions": versions}});
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    s.req("CRD with seven versions", "POST", crds, Some(crd))
        .await?;
    wait_established(s, &crd_name).await?;
    let mut order = Value::Null;
    for _ in 0..100 {
        let g = s.t.send("GET", &format!("/apis/{group}"), None).await?;
        if g.status == 200 && g.body["versions"].as_array().is_some_and(|v| v.len() == 7) {
            order = g.body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let versions: Vec<&str> = order["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["version"].as_str())
        .collect();
    s.note(format!("  discovered versions: {versions:?}"));
    s.field("  preferred", &order, "/preferredVersion/version");
    s.req(
        "delete the CRD",
        "DELETE",
        &format!("{crds}/{crd_name}"),
        None,
    )
    .await?;
    Ok(())
}
