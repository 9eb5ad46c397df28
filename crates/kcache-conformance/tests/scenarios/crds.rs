//! CustomResourceDefinitions: a created CRD serves its resource (discovery, CRUD, the status
//! subresource, pruning of unknown fields, generation), validation of the CRD itself, and
//! deletion. Each scenario's group is named after its namespace, so runs do not collide
//! (CRDs are cluster-scoped).

use std::time::Duration;

use serde_json::{Value, json};

use crate::script::Script;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"}, "color": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}}
            }]
        }
    })
}

/// Polls the CRD until it is Established (kube-apiserver's controllers take a moment).
pub(crate) async fn wait_established(s: &mut Script<'_>, name: &str) -> anyhow::Result<Value> {
    for _ in 0..100 {
        let r = s.t.send("GET", &format!("{CRDS}/{name}"), None).await?;
        let established = r
            .body
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
        if established {
            // Discovery follows shortly after on kube-apiserver.
            for _ in 0..100 {
                let group = r
                    .body
                    .pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let d = s.t.send("GET", &format!("/apis/{group}/v1"), None).await?;
                if d.status == 200 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            return Ok(r.body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("CRD {name} not Established after 10 s")
}

pub(crate) async fn crd_serves_its_resource(s: &mut Script<'_>) -> anyhow::Result<()> {
    let group = format!("{}.example.com", s.ns);
    let name = format!("widgets.{group}");
    s.req("create crd", "POST", CRDS, Some(crd(&group))).await?;
    let got = wait_established(s, &name).await?;
    let mut conditions: Vec<String> = got
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={} {}",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or("")
            )
        })
        .collect();
    conditions.sort();
    s.note(format!("conditions {}", conditions.join(", ")));
    s.field("acceptedNames.kind", &got, "/status/acceptedNames/kind");
    s.field(
        "acceptedNames.listKind",
        &got,
        "/status/acceptedNames/listKind",
    );
    s.field("storedVersions", &got, "/status/storedVersions");
    s.field("conversion", &got, "/spec/conversion");
    let d = s
        .req("discovery", "GET", &format!("/apis/{group}/v1"), None)
        .await?;
    let resources: Vec<String> = d
        .body
        .get("resources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{} {} {}",
                r["name"].as_str().unwrap_or(""),
                r["kind"].as_str().unwrap_or(""),
                r["namespaced"]
            )
        })
        .collect();
    s.note(format!("resources {}", resources.join(", ")));
    let widgets = format!("/apis/{group}/v1/namespaces/{}/widgets", s.ns);
    let w = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 3, "color": "red", "bogus": true}, "extra": 1, "status": {"ready": true}});
    let r = s.req("create widget", "POST", &widgets, Some(w)).await?;
    s.field("spec", &r.body, "/spec");
    s.present("extra kept", &r.body, "/extra");
    s.present("status kept", &r.body, "/status");
    s.field("generation", &r.body, "/metadata/generation");
    let url = format!("{widgets}/w");
    let r = s
        .req(
            "spec change",
            "PATCH",
            &url,
            Some(json!({"spec": {"size": 4}})),
        )
        .await?;
    s.field("generation after spec", &r.body, "/metadata/generation");
    let r = s
        .req(
            "status via main",
            "PATCH",
            &url,
            Some(json!({"status": {"ready": true}})),
        )
        .await?;
    s.present("status after main write", &r.body, "/status");
    let r = s
        .req(
            "status via /status",
            "PATCH",
            &format!("{url}/status"),
            Some(json!({"status": {"ready": true, "other": 1}})),
        )
        .await?;
    s.field("status", &r.body, "/status");
    s.field("generation after /status", &r.body, "/metadata/generation");
    let w = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "strict"},
        "spec": {"bogus": 1}});
    s.req(
        "strict unknown field",
        "POST",
        &format!("{widgets}?fieldValidation=Strict"),
        Some(w),
    )
    .await?;
    let r = s.req("list", "GET", &widgets, None).await?;
    s.field("list kind", &r.body, "/kind");
    s.note(format!(
        "items {}",
        kcache_conformance::item_names(&r.body).join(",")
    ));
    let r = s
        .req("delete crd", "DELETE", &format!("{CRDS}/{name}"), None)
        .await?;
    s.field("delete answer kind", &r.body, "/kind");
    let mut gone = false;
    for _ in 0..100 {
        let r = s.t.send("GET", &widgets, None).await?;
        if r.status == 404 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.note(format!("widgets no longer served: {gone}"));
    Ok(())
}

pub(crate) async fn crd_validation(s: &mut Script<'_>) -> anyhow::Result<()> {
    let group = format!("{}.example.com", s.ns);
    let mut c = crd(&group);
    c["metadata"]["name"] = json!("wrong.example.com");
    s.req("name not plural.group", "POST", CRDS, Some(c))
        .await?;
    let mut c = crd(&group);
    c["spec"]["versions"][0]["storage"] = json!(false);
    // kube-apiserver's message prints its internal version structs (Go's %v): only the
    // status and reason are compared (DIFFERENCES.md).
    let r = s.t.send("POST", CRDS, Some(c)).await?;
    s.note(format!(
        "no storage version: {} {}",
        r.status,
        r.body["reason"].as_str().unwrap_or("")
    ));
    let mut c = crd(&group);
    c["spec"]["scope"] = json!("Galaxy");
    s.req("unknown scope", "POST", CRDS, Some(c)).await?;
    s.req(
        "custom resource of an unknown group",
        "GET",
        &format!("/apis/{group}/v1/namespaces/{}/widgets", s.ns),
        None,
    )
    .await?;
    Ok(())
}
