//! One schema source, kube-apiserver v1.36.5's recorded OpenAPI documents: served at
//! `/openapi/v2` and `/openapi/v3/<gv>` (custom resources' structural schemas published as
//! kube-apiserver publishes them, so the real `kubectl explain` works on both), and driving the
//! decoding of built-in kinds: type errors, malformed quantities and unknown fields at every
//! depth, answered with kube-apiserver's status, reason and wording (recorded from v1.36.5).
//! The kubectl test fails (never skips) when kubectl is missing; set `KUBECTL` to use another.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{get, patch, post};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn deployment(container: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [container]}}}})
}

fn pod(container: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [container]}})
}

/// (code, reason, message) of an error answer.
fn status(r: &common::Resp) -> (u16, String, String) {
    let b = r.json();
    (
        r.status,
        b["reason"].as_str().unwrap_or("").to_owned(),
        b["message"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn unknown_fields_are_found_at_every_depth_in_each_validation_mode() {
    let s = server().await;
    let d = deployment(json!({"name": "c", "image": "i", "imagePullPolicyy": "Always"}));
    let r = post(s.addr(), &format!("{DEPLOYS}?fieldValidation=Strict"), &d).await;
    assert_eq!(
        status(&r),
        (
            400,
            "BadRequest".into(),
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding \
             error: unknown field \"spec.template.spec.containers[0].imagePullPolicyy\""
                .into()
        )
    );
    // Warn (and no fieldValidation, an API client's default): stored without the field.
    let r = post(s.addr(), &format!("{DEPLOYS}?fieldValidation=Warn"), &d).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(
        r.header("warning").as_deref(),
        Some("299 - \"unknown field \\\"spec.template.spec.containers[0].imagePullPolicyy\\\"\"")
    );
    let stored = r.json();
    assert!(
        stored["spec"]["template"]["spec"]["containers"][0]
            .get("imagePullPolicyy")
            .is_none(),
        "{stored}"
    );
    let mut d2 = d.clone();
    d2["metadata"]["name"] = json!("d2");
    let r = post(s.addr(), DEPLOYS, &d2).await;
    assert_eq!(r.status, 201);
    assert!(r.header("warning").is_some());
    let r = post(
        s.addr(),
        "/api/v1/nodes?fieldValidation=Strict",
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                "spec": {"invalidField": 1}}),
    )
    .await;
    assert_eq!(
        status(&r),
        (
            400,
            "BadRequest".into(),
            "Node in version \"v1\" cannot be handled as a Node: strict decoding error: unknown \
             field \"spec.invalidField\""
                .into()
        )
    );
}

#[tokio::test]
async fn type_errors_and_bad_quantities_are_refused_as_go_decodes_them() {
    let s = server().await;
    let quantity = "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the \
                    regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    for resources in [
        json!({"requests": {"cpu": "lots"}}),
        json!({"limits": {"memory": "abc"}}),
    ] {
        let p = pod(json!({"name": "c", "image": "i", "resources": resources}));
        let r = post(s.addr(), PODS, &p).await;
        assert_eq!(status(&r), (400, "BadRequest".into(), quantity.into()));
    }
    let mut d = deployment(json!({"name": "c", "image": "i"}));
    d["spec"]["replicas"] = json!(3_000_000_000_i64);
    let r = post(s.addr(), DEPLOYS, &d).await;
    assert_eq!(
        status(&r),
        (
            400,
            "BadRequest".into(),
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot \
             unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of \
             type int32"
                .into()
        )
    );
    d["spec"]["replicas"] = json!("three");
    let r = post(s.addr(), DEPLOYS, &d).await;
    assert!(status(&r).2.ends_with(
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of \
         type int32"
    ));
    // In range for int32 but not a port: kube-apiserver's Pod validation (422).
    let p = pod(json!({"name": "c", "image": "i", "ports": [{"containerPort": 99999}]}));
    let r = post(s.addr(), PODS, &p).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        r.json()["details"]["causes"],
        json!([{"reason": "FieldValueInvalid",
                "message": "Invalid value: 99999: must be between 1 and 65535, inclusive",
                "field": "spec.containers[0].ports[0].containerPort"}])
    );
}

#[tokio::test]
async fn openapi_v2_and_v3_serve_the_recorded_schemas_and_custom_resources() {
    let s = server().await;
    let v2 = get(s.addr(), "/openapi/v2").await;
    assert_eq!(v2.status, 200);
    let v2 = v2.json();
    assert!(v2["definitions"]["io.k8s.api.core.v1.Pod"].is_object());
    let index = get(s.addr(), "/openapi/v3").await.json();
    let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("apps/v1 listed")
        .to_owned();
    let apps = get(s.addr(), &url).await.json();
    let spec = &apps["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"];
    assert_eq!(spec["properties"]["replicas"]["format"], "int32");
    let r = post(
        s.addr(),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json());
    let index = get(s.addr(), "/openapi/v3").await.json();
    let url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .expect("example.com/v1 listed")
        .to_owned();
    let doc = get(s.addr(), &url).await.json();
    let widget = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(
        widget["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
    );
    assert_eq!(
        widget["properties"]["spec"]["properties"]["color"]["description"],
        "The colour of the widget."
    );
    assert!(
        doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object()
    );
    let v2 = get(s.addr(), "/openapi/v2").await.json();
    assert!(v2["definitions"]["com.example.v1.Widget"].is_object());
    let r = get(s.addr(), "/openapi/v3/apis/nothing.example/v1").await;
    assert_eq!(r.status, 404);
}

fn crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "description": "A widget.",
                    "properties": {"spec": {"type": "object",
                        "description": "What the widget should be.",
                        "properties": {
                            "color": {"type": "string", "description": "The colour of the widget."},
                            "replicas": {"type": "integer", "format": "int32"}}}}}}}]}})
}

fn kubectl(kubeconfig: &std::path::Path, cache: &std::path::Path, args: &[&str]) -> String {
    let bin = PathBuf::from(std::env::var("KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into()));
    assert!(
        bin.exists(),
        "kubectl not found at {} (set KUBECTL): this test must not be skipped",
        bin.display()
    );
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_works_on_a_built_in_kind_and_a_custom_resource() {
    let s = server().await;
    let r = post(
        s.addr(),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json());
    let dir = std::env::temp_dir().join(format!("kcache-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    s.write_kubeconfig(&kubeconfig).unwrap();
    let cache = dir.join("cache");
    let (k, c) = (kubeconfig.clone(), cache.clone());
    let containers =
        tokio::task::spawn_blocking(move || kubectl(&k, &c, &["explain", "pods.spec.containers"]))
            .await
            .unwrap();
    assert!(containers.contains("KIND:       Pod"), "{containers}");
    assert!(
        containers.contains("FIELD: containers <[]Container>"),
        "{containers}"
    );
    assert!(
        containers.contains("imagePullPolicy\t<string>"),
        "{containers}"
    );
    let widget = tokio::task::spawn_blocking(move || {
        kubectl(&kubeconfig, &cache, &["explain", "widgets.spec"])
    })
    .await
    .unwrap();
    assert!(widget.contains("GROUP:      example.com"), "{widget}");
    assert!(widget.contains("What the widget should be."), "{widget}");
    assert!(widget.contains("color\t<string>"), "{widget}");
    assert!(widget.contains("The colour of the widget."), "{widget}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A patch's unknown fields are found in the patched object: a `Warning` each by default, a
/// 422 on the field `patch` with `fieldValidation=Strict` (recorded from kube-apiserver v1.36.5).
#[tokio::test]
async fn patches_of_built_in_kinds_report_unknown_fields() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_eq!(
        post(s.addr(), cms, &json!({"metadata": {"name": "pc"}}))
            .await
            .status,
        201
    );
    let change = json!({"metadata": {"labelz": {"a": "b"}}, "dataa": {"x": "y"}});
    for ct in [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ] {
        let r = patch(s.addr(), &format!("{cms}/pc"), ct, &change).await;
        assert_eq!(r.status, 200, "{}", r.json());
        let warnings: Vec<String> = r
            .headers
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            warnings,
            [
                "299 - \"unknown field \\\"dataa\\\"\"",
                "299 - \"unknown field \\\"metadata.labelz\\\"\""
            ]
        );
        assert!(r.json().get("dataa").is_none());
        let r = patch(
            s.addr(),
            &format!("{cms}/pc?fieldValidation=Strict"),
            ct,
            &change,
        )
        .await;
        assert_eq!(r.status, 422, "{}", r.json());
        let cause = &r.json()["details"]["causes"][0];
        assert_eq!(cause["field"], "patch");
        assert!(
            cause["message"].as_str().unwrap().ends_with(
                "strict decoding error: unknown field \"dataa\", unknown field \"metadata.labelz\""
            ),
            "{cause}"
        );
    }
}

/// Server-side apply of a built-in kind refuses unknown fields in every validation mode, as
/// kube-apiserver's structured-merge type conversion does: a 500 without reason naming the
/// body's namespace, name and kind and the first unknown field, also on the status subresource
/// (recorded from kube-apiserver v1.36.5).
#[tokio::test]
async fn server_side_apply_of_built_in_kinds_refuses_unknown_fields() {
    let s = server().await;
    let apply = "application/apply-patch+yaml";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ac"},
        "data": {"a": "b"}, "dataa": {"x": "y"}});
    for validation in ["Strict", "Warn", "Ignore"] {
        let path = format!(
            "/api/v1/namespaces/default/configmaps/ac?fieldManager=m&fieldValidation={validation}"
        );
        let r = patch(s.addr(), &path, apply, &cm).await;
        assert_eq!(
            status(&r),
            (
                500,
                String::new(),
                "failed to create typed patch object (/ac; /v1, Kind=ConfigMap): \
                 .dataa: field not declared in schema"
                    .to_owned()
            ),
            "{validation}"
        );
        assert!(r.json().get("reason").is_none(), "{}", r.json());
    }
    // The body's namespace is named; of several unknown fields, the first.
    let several = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ac", "namespace": "default"},
        "dataa": {"x": "y"}, "datab": 1, "metadata2": {}});
    let r = patch(
        s.addr(),
        "/api/v1/namespaces/default/configmaps/ac?fieldManager=m",
        apply,
        &several,
    )
    .await;
    assert_eq!(
        r.json()["message"],
        "failed to create typed patch object (default/ac; /v1, Kind=ConfigMap): \
         .dataa: field not declared in schema"
    );
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"x": 1}});
    let r = patch(
        s.addr(),
        &format!("{DEPLOYS}/d?fieldManager=m"),
        apply,
        &deploy,
    )
    .await;
    assert_eq!(
        r.json()["message"],
        "failed to create typed patch object (/d; apps/v1, Kind=Deployment): \
         .spec.x: field not declared in schema"
    );
    assert_eq!(
        get(s.addr(), "/api/v1/namespaces/default/configmaps/ac")
            .await
            .status,
        404
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "an"}});
    assert_eq!(post(s.addr(), "/api/v1/nodes", &node).await.status, 201);
    let mut status_apply = node.clone();
    status_apply["status"] = json!({"invalidStatusField": "value"});
    let r = patch(
        s.addr(),
        "/api/v1/nodes/an/status?fieldManager=m",
        apply,
        &status_apply,
    )
    .await;
    assert_eq!(
        status(&r),
        (
            500,
            String::new(),
            "failed to create typed patch object (/an; /v1, Kind=Node): \
             .status.invalidStatusField: field not declared in schema"
                .to_owned()
        )
    );
    // Known fields still apply.
    status_apply["status"] = json!({"phase": "Running"});
    let r = patch(
        s.addr(),
        "/api/v1/nodes/an/status?fieldManager=m",
        apply,
        &status_apply,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
}
