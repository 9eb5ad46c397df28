//! Custom resources are defaulted and validated by their CRD's structural schema on every
//! write — create, update, each patch type, server-side apply and `/status` — with
//! kube-apiserver's 422 answers (`details.causes`, field paths, wording), and an update that
//! leaves an invalid value unchanged is accepted (ratcheting).

mod common;

use common::{patch, post, put};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

async fn server() -> RunningServer {
    let s = ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["color"], "properties": {
                        "replicas": {"type": "integer", "minimum": 1, "default": 1},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "mode": {"type": "string", "default": "fast"}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}}}]}
    });
    let r = post(s.addr(), CRDS, &crd).await;
    assert_eq!(r.status, 201, "{}", r.json());
    s
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})
}

/// `message` and `field reason` of each cause of a 422 answer.
fn invalid(r: &common::Resp) -> (String, Vec<String>) {
    assert_eq!(r.status, 422, "{}", r.json());
    let body = r.json();
    assert_eq!(body["reason"], "Invalid");
    let causes = common::cause_lines(&body);
    (body["message"].as_str().unwrap_or("").to_owned(), causes)
}

#[tokio::test]
async fn invalid_custom_resources_are_refused_on_every_write_path() {
    let s = server().await;
    let r = post(
        s.addr(),
        WIDGETS,
        &widget("w1", json!({"color": "red", "replicas": "many"})),
    )
    .await;
    let (message, causes) = invalid(&r);
    assert_eq!(
        message,
        r#"Widget.example.com "w1" is invalid: spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
    );
    assert_eq!(causes, ["spec.replicas FieldValueTypeInvalid"]);
    let r = post(s.addr(), WIDGETS, &widget("w1", json!({"replicas": 0}))).await;
    let (_, causes) = invalid(&r);
    assert_eq!(
        causes,
        [
            "spec.replicas FieldValueInvalid",
            "spec.color FieldValueRequired"
        ]
    );

    let r = post(s.addr(), WIDGETS, &widget("w1", json!({"color": "red"}))).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let created = r.json();
    let url = format!("{WIDGETS}/w1");
    let mut bad = created.clone();
    bad["spec"]["color"] = json!("green");
    let (message, causes) = invalid(&put(s.addr(), &url, &bad).await);
    assert!(
        message.ends_with(
            r#"spec.color: Unsupported value: "green": supported values: "red", "blue""#
        ),
        "{message}"
    );
    assert_eq!(causes, ["spec.color FieldValueNotSupported"]);
    let merge = json!({"spec": {"replicas": -1}});
    let (_, causes) = invalid(&patch(s.addr(), &url, "application/merge-patch+json", &merge).await);
    assert_eq!(causes, ["spec.replicas FieldValueInvalid"]);
    let ops = json!([{"op": "replace", "path": "/spec/replicas", "value": "x"}]);
    let (_, causes) = invalid(&patch(s.addr(), &url, "application/json-patch+json", &ops).await);
    assert_eq!(causes, ["spec.replicas FieldValueTypeInvalid"]);
    let smp = json!({"spec": {"color": null}});
    let (_, causes) = invalid(&patch(s.addr(), &url, "application/merge-patch+json", &smp).await);
    assert_eq!(causes, ["spec.color FieldValueRequired"]);
    let apply = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"color": "red", "replicas": 0}});
    let r = patch(
        s.addr(),
        &format!("{url}?fieldManager=m"),
        "application/apply-patch+yaml",
        &apply,
    )
    .await;
    let (_, causes) = invalid(&r);
    assert_eq!(causes, ["spec.replicas FieldValueInvalid"]);
    let status = json!({"status": {"ready": "yes"}});
    let r = patch(
        s.addr(),
        &format!("{url}/status"),
        "application/merge-patch+json",
        &status,
    )
    .await;
    let (message, causes) = invalid(&r);
    assert_eq!(
        message,
        r#"Widget.example.com "w1" is invalid: status.ready: Invalid value: "string": ready in body must be of type boolean: "string""#
    );
    assert_eq!(causes, ["status.ready FieldValueTypeInvalid"]);
    // Nothing invalid was stored.
    let r = common::get(s.addr(), &url).await;
    assert_eq!(
        r.json()["spec"],
        json!({"color": "red", "replicas": 1, "mode": "fast"})
    );
}

#[tokio::test]
async fn schema_defaults_are_applied_on_create_and_update() {
    let s = server().await;
    let r = post(
        s.addr(),
        WIDGETS,
        &widget("d", json!({"color": "blue", "mode": null})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(
        r.json()["spec"],
        json!({"color": "blue", "replicas": 1, "mode": "fast"})
    );
    let mut w = r.json();
    w["spec"] = json!({"color": "red"});
    let r = put(s.addr(), &format!("{WIDGETS}/d"), &w).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(
        r.json()["spec"],
        json!({"color": "red", "replicas": 1, "mode": "fast"})
    );
}

#[tokio::test]
async fn an_update_keeping_an_invalid_value_unchanged_is_accepted() {
    let s = server().await;
    // Stored under a looser schema: no enum on color.
    let crd_url = format!("{CRDS}/widgets.example.com");
    let mut crd = common::get(s.addr(), &crd_url).await.json();
    let color = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/color";
    let strict = crd.pointer(color).cloned().expect("color schema");
    *crd.pointer_mut(color).expect("color schema") = json!({"type": "string"});
    assert_eq!(put(s.addr(), &crd_url, &crd).await.status, 200);
    let r = post(s.addr(), WIDGETS, &widget("old", json!({"color": "green"}))).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let mut crd = common::get(s.addr(), &crd_url).await.json();
    *crd.pointer_mut(color).expect("color schema") = strict;
    assert_eq!(put(s.addr(), &crd_url, &crd).await.status, 200);

    let url = format!("{WIDGETS}/old");
    let change = json!({"spec": {"replicas": 2}});
    let r = patch(s.addr(), &url, "application/merge-patch+json", &change).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["spec"]["color"], "green");
    let change = json!({"spec": {"color": "purple"}});
    let (_, causes) =
        invalid(&patch(s.addr(), &url, "application/merge-patch+json", &change).await);
    assert_eq!(causes, ["spec.color FieldValueNotSupported"]);
}

#[tokio::test]
async fn cel_rules_are_enforced_with_their_messages() {
    let s = ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "self.min <= self.max", "message": "min must not exceed max"}],
                        "properties": {
                            "min": {"type": "integer"}, "max": {"type": "integer"},
                            "mode": {"type": "string", "x-kubernetes-validations": [
                                {"rule": "self == oldSelf", "message": "mode is immutable"}]}}}
                }}}}]}
    });
    assert_eq!(post(s.addr(), CRDS, &crd).await.status, 201);
    let gadgets = "/apis/example.com/v1/namespaces/default/gadgets";
    let g = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
        "spec": {"min": 5, "max": 1}});
    let (message, causes) = invalid(&post(s.addr(), gadgets, &g).await);
    assert_eq!(
        message,
        r#"Gadget.example.com "g" is invalid: spec: Invalid value: min must not exceed max"#
    );
    assert_eq!(causes, ["spec FieldValueInvalid"]);
    let g = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
        "spec": {"min": 1, "max": 5, "mode": "a"}});
    assert_eq!(post(s.addr(), gadgets, &g).await.status, 201);
    let change = json!({"spec": {"mode": "b"}});
    let r = patch(
        s.addr(),
        &format!("{gadgets}/g"),
        "application/merge-patch+json",
        &change,
    )
    .await;
    let (_, causes) = invalid(&r);
    assert_eq!(causes, ["spec.mode FieldValueInvalid"]);
}
