//! Custom resources judged by their CRD's schema beyond single keywords: `/status` writes,
//! every patch type, defaults, ratcheting after the schema tightens, CEL rules and the scale
//! subresource (the scenarios of [`crate::crd_schema`], sharing its helpers).

use serde_json::{Value, json};

use crate::crd_schema::{creates, install, install_with, judged, widget};
use crate::script::Script;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

pub(crate) fn api_version(s: &Script<'_>) -> String {
    format!("{}.example.com/v1", s.ns)
}

pub(crate) async fn invalid_status(s: &mut Script<'_>) -> anyhow::Result<()> {
    let url = install(
        s,
        json!({"type": "object", "properties": {"size": {"type": "integer"}}}),
    )
    .await?;
    let mut w = widget("w", json!({"size": 1}));
    w["apiVersion"] = json!(api_version(s));
    judged(s, "create", "POST", &url, "application/json", w).await?;
    let st = format!("{url}/w/status");
    let merge = "application/merge-patch+json";
    for (label, status) in [
        ("status-wrong-type", json!({"status": {"ready": "yes"}})),
        ("status-not-in-enum", json!({"status": {"phase": "Lost"}})),
        ("status-below-minimum", json!({"status": {"count": -1}})),
        (
            "status-ok",
            json!({"status": {"ready": true, "phase": "Running"}}),
        ),
    ] {
        let r = judged(s, label, "PATCH", &st, merge, status).await?;
        s.field("  status", &r, "/status");
    }
    Ok(())
}

pub(crate) async fn invalid_patches(s: &mut Script<'_>) -> anyhow::Result<()> {
    let url = install(
        s,
        json!({"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "maximum": 5}, "name": {"type": "string"}}}),
    )
    .await?;
    let mut w = widget("w", json!({"size": 1}));
    w["apiVersion"] = json!(api_version(s));
    judged(s, "create", "POST", &url, "application/json", w).await?;
    let one = format!("{url}/w");
    let merge = "application/merge-patch+json";
    judged(
        s,
        "merge-type",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"size": "big"}}),
    )
    .await?;
    judged(
        s,
        "merge-maximum",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"size": 9}}),
    )
    .await?;
    judged(
        s,
        "merge-remove-required",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"size": null}}),
    )
    .await?;
    // `add`: kube-apiserver's JSON patch also replaces a missing key, kcache's refuses it.
    let ops = json!([{"op": "add", "path": "/spec/name", "value": 7}]);
    judged(
        s,
        "json-patch",
        "PATCH",
        &one,
        "application/json-patch+json",
        ops,
    )
    .await?;
    let apply = json!({"apiVersion": api_version(s), "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 6}});
    judged(
        s,
        "apply",
        "PATCH",
        &format!("{one}?fieldManager=m&force=true"),
        "application/apply-patch+yaml",
        apply,
    )
    .await?;
    let r = s.t.send("GET", &one, None).await?;
    s.field("stored spec", &r.body, "/spec");
    Ok(())
}

pub(crate) async fn defaults(s: &mut Script<'_>) -> anyhow::Result<()> {
    let url = install(
        s,
        json!({"type": "object", "properties": {
            "replicas": {"type": "integer", "default": 1},
            "mode": {"type": "string", "default": "fast"},
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "protocol": {"type": "string", "default": "TCP"}}}},
            "nested": {"type": "object", "default": {}, "properties": {
                "level": {"type": "integer", "default": 3}}}}}),
    )
    .await?;
    let mut w = widget(
        "w",
        json!({"mode": null, "ports": [{"name": "a"}, {"protocol": "UDP"}]}),
    );
    w["apiVersion"] = json!(api_version(s));
    judged(s, "create", "POST", &url, "application/json", w).await?;
    let one = format!("{url}/w");
    let merge = "application/merge-patch+json";
    judged(
        s,
        "merge-null-defaulted",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"replicas": null}}),
    )
    .await?;
    let r = s.t.send("GET", &one, None).await?;
    let mut w = r.body;
    w["spec"] = json!({});
    judged(s, "put-empty-spec", "PUT", &one, "application/json", w).await?;
    Ok(())
}

/// A `default` added to the schema after an object was stored shows on reads - GET, LIST
/// and WATCH - as apiextensions-apiserver defaults every object it reads from storage.
pub(crate) async fn defaults_on_read(s: &mut Script<'_>) -> anyhow::Result<()> {
    let plain = json!({"type": "object", "properties": {
        "replicas": {"type": "integer"}, "mode": {"type": "string"}}});
    let url = install(s, plain).await?;
    let mut w = widget("w", json!({"replicas": 2}));
    w["apiVersion"] = json!(api_version(s));
    judged(s, "create", "POST", &url, "application/json", w).await?;
    let crd = format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{}.example.com",
        s.ns
    );
    let mut def = s.t.send("GET", &crd, None).await?.body;
    let mode = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/mode";
    if let Some(m) = def.pointer_mut(mode) {
        *m = json!({"type": "string", "default": "fast"});
    }
    s.req("add a default", "PUT", &crd, Some(def)).await?;
    // The new schema takes effect shortly after the update (kube-apiserver rebuilds its
    // handler for the CRD): wait until a GET shows the default. The rebuilt handler's list may
    // come from a cache still filling (kube-apiserver 1.35 once answered an empty list right
    // after the GET showed the default): the same wait.
    let got = get_until(s, &format!("{url}/w"), "/spec/mode").await?;
    s.field("get", &got, "/spec");
    let list = get_until(s, &url, "/items/0/spec/mode").await?;
    s.field("list", &list, "/items/0/spec");
    let r =
        s.t.send(
            "GET",
            &format!("{url}?watch=true&resourceVersion=0&timeoutSeconds=1"),
            None,
        )
        .await?;
    let specs: Vec<String> = r
        .events
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| format!("{} {}", e["type"], e["object"]["spec"]))
        .collect();
    s.note(format!("watch {}", specs.join(" | ")));
    Ok(())
}

/// GETs `url` until its body has `pointer`, for at most 10 s; the last body.
async fn get_until(s: &Script<'_>, url: &str, pointer: &str) -> anyhow::Result<Value> {
    let mut body = Value::Null;
    for _ in 0..100 {
        body = s.t.send("GET", url, None).await?.body;
        if body.pointer(pointer).is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(body)
}

/// `oneOf`, `anyOf`, `allOf` and `not` of value validations (the only form a structural
/// schema allows them in): each failing composition is reported at the root, with the
/// failures of an alternative.
pub(crate) async fn composition(s: &mut Script<'_>) -> anyhow::Result<()> {
    let url = install(
        s,
        json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string"},
            "size": {"type": "integer"}, "tier": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
            "anyOf": [{"properties": {"size": {"minimum": 10}}},
                      {"properties": {"tier": {"enum": ["gold"]}}}],
            "allOf": [{"properties": {"size": {"maximum": 100}}}],
            "not": {"required": ["forbidden"]}}),
    )
    .await?;
    creates(
        s,
        &url,
        &[
            ("one-a", json!({"a": "x", "size": 10})),
            ("none-of-one", json!({"size": 10})),
            ("both-of-one", json!({"a": "x", "b": "y", "size": 10})),
            ("any-by-tier", json!({"a": "x", "size": 1, "tier": "gold"})),
            ("none-of-any", json!({"a": "x", "size": 1, "tier": "tin"})),
            ("not-all", json!({"a": "x", "size": 200})),
        ],
    )
    .await?;
    Ok(())
}

pub(crate) async fn ratcheting(s: &mut Script<'_>) -> anyhow::Result<()> {
    let loose = json!({"type": "object", "properties": {
        "color": {"type": "string"}, "size": {"type": "integer"}}});
    let url = install(s, loose).await?;
    let mut w = widget("w", json!({"color": "green", "size": 1}));
    w["apiVersion"] = json!(api_version(s));
    judged(
        s,
        "create under the loose schema",
        "POST",
        &url,
        "application/json",
        w,
    )
    .await?;
    let name = format!("widgets.{}.example.com", s.ns);
    let r = s.t.send("GET", &format!("{CRDS}/{name}"), None).await?;
    let mut crd = r.body;
    let color = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/color";
    if let Some(c) = crd.pointer_mut(color) {
        *c = json!({"type": "string", "enum": ["red", "blue"]});
    }
    s.req(
        "tighten the schema",
        "PUT",
        &format!("{CRDS}/{name}"),
        Some(crd),
    )
    .await?;
    // kube-apiserver swaps the schema in asynchronously: wait until a new invalid value fails.
    let mut w = widget("probe", json!({"color": "green"}));
    w["apiVersion"] = json!(api_version(s));
    let mut tightened = false;
    for _ in 0..100 {
        let r =
            s.t.send("POST", &format!("{url}?dryRun=All"), Some(w.clone()))
                .await?;
        if r.status == 422 {
            tightened = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    s.note(format!("schema tightened: {tightened}"));
    let one = format!("{url}/w");
    let merge = "application/merge-patch+json";
    judged(
        s,
        "other field changed",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"size": 2}}),
    )
    .await?;
    judged(
        s,
        "invalid value changed",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"color": "pink"}}),
    )
    .await?;
    judged(
        s,
        "fixed",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"color": "red"}}),
    )
    .await?;
    Ok(())
}

pub(crate) async fn cel_rules(s: &mut Script<'_>) -> anyhow::Result<()> {
    let url = install(
        s,
        json!({"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "min must not exceed max"},
            // kube-apiserver refuses rules whose estimated cost is unbounded (string(int)
            // in a message expression, unbounded lists): the CRD bounds them.
            {"rule": "self.max < 100",
             "messageExpression": "'max is ' + (self.max > 1000 ? 'far' : 'a bit') + ' too large'"},
            {"rule": "!has(self.name) || self.name.startsWith('w')",
             "fieldPath": ".name", "reason": "FieldValueForbidden"},
            {"rule": "self.tags.all(t, t.size() <= 3)"}
        ],
        "properties": {
            "min": {"type": "integer"}, "max": {"type": "integer"},
            "name": {"type": "string"},
            "tags": {"type": "array", "default": [], "maxItems": 5,
                     "items": {"type": "string", "maxLength": 10}},
            "mode": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "mode is immutable"}]},
            "level": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "self >= oldSelf", "message": "level may only grow"}]}
        }}),
    )
    .await?;
    creates(
        s,
        &url,
        &[
            (
                "ok",
                json!({"min": 1, "max": 2, "name": "wa", "mode": "a", "level": 1}),
            ),
            ("message", json!({"min": 3, "max": 2})),
            ("message-expression", json!({"min": 1, "max": 200})),
            (
                "field-path-and-reason",
                json!({"min": 1, "max": 2, "name": "x"}),
            ),
            (
                "default-message",
                json!({"min": 1, "max": 2, "tags": ["long"]}),
            ),
            ("schema-error-blocks-rules", json!({"min": "one", "max": 2})),
        ],
    )
    .await?;
    let one = format!("{url}/ok");
    let merge = "application/merge-patch+json";
    judged(
        s,
        "transition-immutable",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"mode": "b"}}),
    )
    .await?;
    judged(
        s,
        "transition-shrink",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"level": 0}}),
    )
    .await?;
    judged(
        s,
        "transition-grow",
        "PATCH",
        &one,
        merge,
        json!({"spec": {"level": 2}}),
    )
    .await?;
    Ok(())
}

pub(crate) async fn scale(s: &mut Script<'_>) -> anyhow::Result<()> {
    let url = install_with(
        s,
        json!({"type": "object", "properties": {"replicas": {"type": "integer"}}}),
        json!({"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}}),
    )
    .await?;
    let d = s
        .req(
            "discovery",
            "GET",
            &format!("/apis/{}.example.com/v1", s.ns),
            None,
        )
        .await?;
    let mut names: Vec<String> = d.body["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    s.note(format!("resources {}", names.join(",")));
    let mut w = widget("w", json!({"replicas": 2}));
    w["apiVersion"] = json!(api_version(s));
    judged(s, "create", "POST", &url, "application/json", w).await?;
    let st = json!({"status": {"replicas": 2, "selector": "app=w"}});
    judged(
        s,
        "status",
        "PATCH",
        &format!("{url}/w/status"),
        "application/merge-patch+json",
        st,
    )
    .await?;
    let sc = format!("{url}/w/scale");
    let r = s.req("get scale", "GET", &sc, None).await?;
    s.field("  scale spec", &r.body, "/spec");
    s.field("  scale status", &r.body, "/status");
    s.field("  scale apiVersion", &r.body, "/apiVersion");
    let mut scale = r.body;
    scale["spec"]["replicas"] = json!(5);
    let r = s.req("put scale", "PUT", &sc, Some(scale)).await?;
    s.field("  scale spec", &r.body, "/spec");
    let r = s
        .req(
            "patch scale",
            "PATCH",
            &sc,
            Some(json!({"spec": {"replicas": 7}})),
        )
        .await?;
    s.field("  scale spec", &r.body, "/spec");
    let r = s.t.send("GET", &format!("{url}/w"), None).await?;
    s.field("widget spec", &r.body, "/spec");
    Ok(())
}
