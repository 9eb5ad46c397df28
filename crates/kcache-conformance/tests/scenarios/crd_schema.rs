//! Custom resources judged by their CRD's schema: one scenario per validation keyword (and
//! defaults, ratcheting, `/status`, patches), each with its own CRD whose `spec` schema is the
//! keyword under test. A refused write is written as its answer line plus one line per cause
//! (sorted: kube-apiserver walks properties in Go map order, so several causes come in any
//! order; the one-cause answers compare the whole message).

use kcache_conformance::normalise;
use serde_json::{Value, json};

use crate::crds::wait_established;
use crate::script::Script;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Every scenario of this module, by name.
pub(crate) const NAMES: &[&str] = &[
    "crd_schema_integer_vs_string",
    "crd_schema_minimum_maximum",
    "crd_schema_enum",
    "crd_schema_required",
    "crd_schema_pattern",
    "crd_schema_lengths",
    "crd_schema_items_count_and_uniqueness",
    "crd_schema_item_types",
    "crd_schema_number",
    "crd_schema_int_or_string",
    "crd_schema_nullable",
    "crd_schema_formats",
    "crd_schema_properties_count",
    "crd_schema_list_types",
    "crd_schema_several_errors",
    "crd_schema_invalid_status",
    "crd_schema_invalid_patches",
    "crd_schema_defaults",
    "crd_schema_ratcheting",
    "crd_cel_rules",
    "crd_scale_subresource",
];

/// Creates a Widget CRD (status subresource) whose `spec` has `spec_schema`; returns the
/// widgets URL of the scenario's namespace.
async fn install(s: &mut Script<'_>, spec_schema: Value) -> anyhow::Result<String> {
    install_with(s, spec_schema, json!({"status": {}})).await
}

/// [`install`] with the version's `subresources`.
async fn install_with(
    s: &mut Script<'_>,
    spec_schema: Value,
    subresources: Value,
) -> anyhow::Result<String> {
    let group = format!("{}.example.com", s.ns);
    let name = format!("widgets.{group}");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": subresources,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": spec_schema,
                    "status": {"type": "object", "properties": {
                        "ready": {"type": "boolean"},
                        "phase": {"type": "string", "enum": ["Pending", "Running"]},
                        "count": {"type": "integer", "minimum": 0},
                        "replicas": {"type": "integer"},
                        "selector": {"type": "string"}}}
                }}}}]}
    });
    s.req("create crd", "POST", CRDS, Some(crd)).await?;
    wait_established(s, &name).await?;
    Ok(format!("/apis/{group}/v1/namespaces/{}/widgets", s.ns))
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "x/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})
}

/// Sends a request; writes `label: status reason` and each cause (`field reason: message`),
/// sorted, and the spec of a successful answer.
async fn judged(
    s: &mut Script<'_>,
    label: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let r =
        s.t.send_raw(
            method,
            path,
            Some(content_type),
            Some(serde_json::to_vec(&body)?),
        )
        .await?;
    let reason = r.body["reason"].as_str().unwrap_or("-");
    s.note(format!("{label}: {} {reason}", r.status));
    let mut causes: Vec<String> = r.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            normalise(&format!(
                "  {} {}: {}",
                c["field"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            ))
        })
        .collect();
    causes.sort();
    let one = causes.len() == 1;
    s.lines.extend(causes);
    if one {
        // With one cause the message is deterministic: compare it whole.
        s.note(format!(
            "  message: {}",
            normalise(r.body["message"].as_str().unwrap_or(""))
        ));
    }
    if r.status < 300 {
        s.field("  spec", &r.body, "/spec");
    }
    Ok(r.body)
}

/// POSTs one widget per `(name, spec)` and writes each judgement.
async fn creates(s: &mut Script<'_>, url: &str, cases: &[(&str, Value)]) -> anyhow::Result<()> {
    for (name, spec) in cases {
        let mut body = widget(name, spec.clone());
        // The URL is /apis/{group}/v1/...
        let group = url.split('/').nth(2).unwrap_or_default();
        body["apiVersion"] = json!(format!("{group}/v1"));
        judged(s, name, "POST", url, "application/json", body).await?;
    }
    Ok(())
}

async fn keyword(s: &mut Script<'_>, props: Value, cases: &[(&str, Value)]) -> anyhow::Result<()> {
    let url = install(s, json!({"type": "object", "properties": props})).await?;
    creates(s, &url, cases).await
}

pub(crate) async fn run(name: &str, s: &mut Script<'_>) -> anyhow::Result<()> {
    match name {
        "crd_schema_integer_vs_string" => {
            keyword(
                s,
                json!({"replicas": {"type": "integer"}, "name": {"type": "string"},
                       "on": {"type": "boolean"}, "obj": {"type": "object"}}),
                &[
                    (
                        "ok",
                        json!({"replicas": 3, "name": "a", "on": true, "obj": {}}),
                    ),
                    ("string-for-integer", json!({"replicas": "three"})),
                    ("integer-for-string", json!({"name": 5})),
                    ("string-for-boolean", json!({"on": "yes"})),
                    ("array-for-object", json!({"obj": [1]})),
                    ("float-for-integer", json!({"replicas": 1.5})),
                ],
            )
            .await
        }
        "crd_schema_minimum_maximum" => {
            keyword(
                s,
                json!({"replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                       "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true,
                                 "maximum": 1, "exclusiveMaximum": true}}),
                &[
                    ("ok", json!({"replicas": 1, "ratio": 0.5})),
                    ("below-minimum", json!({"replicas": 0})),
                    ("above-maximum", json!({"replicas": 11})),
                    ("exclusive-minimum", json!({"ratio": 0})),
                    ("exclusive-maximum", json!({"ratio": 1})),
                ],
            )
            .await
        }
        "crd_schema_enum" => {
            keyword(
                s,
                json!({"color": {"type": "string", "enum": ["red", "blue"]},
                       "size": {"type": "integer", "enum": [1, 2]}}),
                &[
                    ("ok", json!({"color": "red", "size": 2})),
                    ("string-not-in-enum", json!({"color": "green"})),
                    ("integer-not-in-enum", json!({"size": 3})),
                ],
            )
            .await
        }
        "crd_schema_required" => {
            let url = install(
                s,
                json!({"type": "object", "required": ["color"], "properties": {
                    "color": {"type": "string"},
                    "inner": {"type": "object", "required": ["x"],
                              "properties": {"x": {"type": "string"}}}}}),
            )
            .await?;
            creates(
                s,
                &url,
                &[
                    ("ok", json!({"color": "red"})),
                    ("missing", json!({})),
                    ("missing-nested", json!({"color": "red", "inner": {}})),
                ],
            )
            .await?;
            let w = json!({"apiVersion": api_version(s), "kind": "Widget",
                "metadata": {"name": "nospec"}});
            judged(s, "no-spec", "POST", &url, "application/json", w).await?;
            Ok(())
        }
        "crd_schema_pattern" => {
            keyword(
                s,
                json!({"name": {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$"}}),
                &[
                    ("ok", json!({"name": "a-b"})),
                    ("no-match", json!({"name": "A_B"})),
                ],
            )
            .await
        }
        "crd_schema_lengths" => {
            keyword(
                s,
                json!({"name": {"type": "string", "maxLength": 5, "minLength": 2},
                       "one": {"type": "string", "maxLength": 1}}),
                &[
                    ("ok", json!({"name": "abc", "one": "é"})),
                    ("too-long", json!({"name": "abcdef"})),
                    ("too-short", json!({"name": "a"})),
                    ("one-too-long", json!({"one": "ab"})),
                ],
            )
            .await
        }
        "crd_schema_items_count_and_uniqueness" => {
            keyword(
                s,
                json!({"tags": {"type": "array", "maxItems": 2, "minItems": 1,
                                "items": {"type": "string"}},
                       "one": {"type": "array", "maxItems": 1, "items": {"type": "integer"}}}),
                &[
                    ("ok", json!({"tags": ["a", "b"]})),
                    ("too-many", json!({"tags": ["a", "b", "c"]})),
                    ("too-few", json!({"tags": []})),
                    ("one-too-many", json!({"one": [1, 2]})),
                ],
            )
            .await
        }
        "crd_schema_item_types" => {
            keyword(
                s,
                json!({"ports": {"type": "array", "items": {"type": "object", "properties": {
                           "port": {"type": "integer"}, "name": {"type": "string"}}}},
                       "names": {"type": "array", "items": {"type": "string"}}}),
                &[
                    (
                        "ok",
                        json!({"ports": [{"port": 80, "name": "http"}], "names": ["a"]}),
                    ),
                    (
                        "wrong-item-field",
                        json!({"ports": [{"port": 80}, {"port": "eighty"}]}),
                    ),
                    ("wrong-item", json!({"names": ["a", 2]})),
                    ("not-an-array", json!({"names": "a"})),
                ],
            )
            .await
        }
        "crd_schema_number" => {
            keyword(
                s,
                json!({"ratio": {"type": "number"},
                       "step": {"type": "number", "multipleOf": 0.5},
                       "even": {"type": "integer", "multipleOf": 2}}),
                &[
                    ("ok", json!({"ratio": 3, "step": 1.5, "even": 4})),
                    ("string-for-number", json!({"ratio": "1.5"})),
                    ("not-multiple-float", json!({"step": 0.7})),
                    ("not-multiple-integer", json!({"even": 3})),
                ],
            )
            .await
        }
        "crd_schema_int_or_string" => {
            keyword(
                s,
                json!({"port": {"x-kubernetes-int-or-string": true},
                       "pct": {"x-kubernetes-int-or-string": true, "pattern": "^[0-9]+%$"}}),
                &[
                    ("ok", json!({"port": 80, "pct": "10%"})),
                    ("ok-string", json!({"port": "http", "pct": 5})),
                    ("boolean", json!({"port": true})),
                    ("float", json!({"port": 1.5})),
                    ("string-pattern", json!({"pct": "ten"})),
                ],
            )
            .await
        }
        "crd_schema_nullable" => {
            keyword(
                s,
                json!({"maybe": {"type": "string", "nullable": true},
                       "never": {"type": "string"}}),
                &[
                    ("nullable-null-kept", json!({"maybe": null})),
                    ("non-nullable-null-dropped", json!({"never": null})),
                ],
            )
            .await
        }
        "crd_schema_formats" => {
            keyword(
                s,
                json!({"ip": {"type": "string", "format": "ipv4"},
                       "id": {"type": "string", "format": "uuid"},
                       "day": {"type": "string", "format": "date"},
                       "stamp": {"type": "string", "format": "date-time"},
                       "pw": {"type": "string", "format": "password"}}),
                &[
                    (
                        "ok",
                        json!({"ip": "10.0.0.1", "id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
                                  "day": "2024-01-31"}),
                    ),
                    ("bad-ip", json!({"ip": "10.0.0.300"})),
                    ("bad-uuid", json!({"id": "nope"})),
                    ("bad-date", json!({"day": "31/01/2024"})),
                    ("bad-date-time", json!({"stamp": "whenever"})),
                    (
                        "ok-date-time",
                        json!({"stamp": "2014-12-15T19:30:20Z", "pw": "x"}),
                    ),
                ],
            )
            .await
        }
        "crd_schema_properties_count" => {
            keyword(
                s,
                json!({"labels": {"type": "object", "maxProperties": 2, "minProperties": 1,
                                  "additionalProperties": {"type": "string"}}}),
                &[
                    ("ok", json!({"labels": {"a": "b"}})),
                    (
                        "too-many",
                        json!({"labels": {"a": "1", "b": "2", "c": "3"}}),
                    ),
                    ("too-few", json!({"labels": {}})),
                    ("wrong-value", json!({"labels": {"a": 1}})),
                ],
            )
            .await
        }
        "crd_schema_list_types" => {
            keyword(
                s,
                json!({"tags": {"type": "array", "x-kubernetes-list-type": "set",
                                "items": {"type": "string"}},
                       "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                 "x-kubernetes-list-map-keys": ["name"],
                                 "items": {"type": "object", "required": ["name"], "properties": {
                                     "name": {"type": "string"}, "port": {"type": "integer"}}}}}),
                &[
                    (
                        "ok",
                        json!({"tags": ["a", "b"], "ports": [{"name": "a"}, {"name": "b"}]}),
                    ),
                    ("set-duplicate", json!({"tags": ["a", "b", "a"]})),
                    (
                        "map-duplicate-key",
                        json!({"ports": [{"name": "a", "port": 1},
                                                           {"name": "a", "port": 2}]}),
                    ),
                ],
            )
            .await
        }
        "crd_schema_several_errors" => {
            keyword(
                s,
                json!({"replicas": {"type": "integer", "minimum": 1},
                       "color": {"type": "string", "enum": ["red"]},
                       "name": {"type": "string", "maxLength": 3},
                       "tags": {"type": "array", "items": {"type": "string"}}}),
                &[(
                    "four-errors",
                    json!({"replicas": 0, "color": "blue", "name": "long", "tags": [1]}),
                )],
            )
            .await
        }
        "crd_schema_invalid_status" => invalid_status(s).await,
        "crd_schema_invalid_patches" => invalid_patches(s).await,
        "crd_schema_defaults" => defaults(s).await,
        "crd_schema_ratcheting" => ratcheting(s).await,
        "crd_cel_rules" => cel_rules(s).await,
        "crd_scale_subresource" => scale(s).await,
        other => anyhow::bail!("no scenario {other:?}"),
    }
}

fn api_version(s: &Script<'_>) -> String {
    format!("{}.example.com/v1", s.ns)
}

async fn invalid_status(s: &mut Script<'_>) -> anyhow::Result<()> {
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

async fn invalid_patches(s: &mut Script<'_>) -> anyhow::Result<()> {
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

async fn defaults(s: &mut Script<'_>) -> anyhow::Result<()> {
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

async fn ratcheting(s: &mut Script<'_>) -> anyhow::Result<()> {
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

async fn cel_rules(s: &mut Script<'_>) -> anyhow::Result<()> {
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

async fn scale(s: &mut Script<'_>) -> anyhow::Result<()> {
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
