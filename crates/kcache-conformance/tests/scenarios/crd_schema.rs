//! Custom resources judged by their CRD's schema: one scenario per validation keyword (and
//! defaults, ratcheting, `/status`, patches), each with its own CRD whose `spec` schema is the
//! keyword under test. A refused write is written as its answer line plus one line per cause
//! (sorted: kube-apiserver walks properties in Go map order, so several causes come in any
//! order; the one-cause answers compare the whole message).

use kcache_conformance::normalise;
use serde_json::{Value, json};

use crate::crd_writes::{self, api_version};
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
    "crd_schema_defaults_on_read",
    "crd_schema_composition",
    "crd_schema_ratcheting",
    "crd_cel_rules",
    "crd_scale_subresource",
];

/// Creates a Widget CRD (status subresource) whose `spec` has `spec_schema`; returns the
/// widgets URL of the scenario's namespace.
pub(crate) async fn install(s: &mut Script<'_>, spec_schema: Value) -> anyhow::Result<String> {
    install_with(s, spec_schema, json!({"status": {}})).await
}

/// [`install`] with the version's `subresources`.
pub(crate) async fn install_with(
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

pub(crate) fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "x/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})
}

/// Sends a request; writes `label: status reason` and each cause (`field reason: message`),
/// sorted, and the spec of a successful answer.
pub(crate) async fn judged(
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
pub(crate) async fn creates(
    s: &mut Script<'_>,
    url: &str,
    cases: &[(&str, Value)],
) -> anyhow::Result<()> {
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
        "crd_schema_invalid_status" => crd_writes::invalid_status(s).await,
        "crd_schema_invalid_patches" => crd_writes::invalid_patches(s).await,
        "crd_schema_defaults" => crd_writes::defaults(s).await,
        "crd_schema_defaults_on_read" => crd_writes::defaults_on_read(s).await,
        "crd_schema_composition" => crd_writes::composition(s).await,
        "crd_schema_ratcheting" => crd_writes::ratcheting(s).await,
        "crd_cel_rules" => crd_writes::cel_rules(s).await,
        "crd_scale_subresource" => crd_writes::scale(s).await,
        other => anyhow::bail!("no scenario {other:?}"),
    }
}
