use serde_json::{Value, json};

use super::validate;

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["color"], "properties": {
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "multipleOf": 0.5},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "name": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^[a-z]+$"},
            "tags": {"type": "array", "maxItems": 2, "minItems": 1, "uniqueItems": true,
                     "items": {"type": "string"}},
            "port": {"x-kubernetes-int-or-string": true},
            "maybe": {"type": "string", "nullable": true},
            "never": {"type": "string"},
            "ip": {"type": "string", "format": "ipv4"},
            "when": {"type": "string", "format": "date-time"},
            "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
            "free": {"x-kubernetes-preserve-unknown-fields": true}
        }}
    }})
}

fn lines(obj: Value, old: Option<Value>) -> Vec<String> {
    validate(&schema(), &obj, old.as_ref(), "")
        .iter()
        .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
        .collect()
}

fn spec(spec: Value) -> Value {
    json!({"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"}, "spec": spec})
}

#[test]
fn a_valid_object_has_no_failures() {
    let ok = spec(
        json!({"color": "red", "replicas": 3, "ratio": 1.5, "name": "abc",
        "tags": ["a"], "port": "http", "maybe": null, "ip": "10.0.0.1", "when": "2014-12-15T19:30:20Z",
        "labels": {"a": "b"}, "free": {"x": [1, {"y": null}]}}),
    );
    assert_eq!(lines(ok, None), Vec::<String>::new());
    assert_eq!(
        lines(spec(json!({"color": "blue", "port": 8080})), None),
        Vec::<String>::new()
    );
}

#[test]
fn each_keyword_fails_with_kube_apiserver_wording() {
    let cases: &[(Value, &str)] = &[
        (
            json!({"color": "red", "replicas": "three"}),
            r#"FieldValueTypeInvalid spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
        ),
        (
            json!({"color": "red", "replicas": 0}),
            "FieldValueInvalid spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
        ),
        (
            json!({"color": "red", "replicas": 11}),
            "FieldValueInvalid spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
        ),
        (
            json!({"color": "red", "ratio": 0}),
            "FieldValueInvalid spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
        ),
        (
            json!({"color": "red", "ratio": 0.7}),
            "FieldValueInvalid spec.ratio: Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5",
        ),
        (
            json!({"color": "green"}),
            r#"FieldValueNotSupported spec.color: Unsupported value: "green": supported values: "red", "blue""#,
        ),
        (
            json!({"replicas": 2}),
            "FieldValueRequired spec.color: Required value",
        ),
        (
            json!({"color": "red", "name": "abcdefg"}),
            "FieldValueTooLong spec.name: Too long: may not be more than 5 bytes",
        ),
        (
            json!({"color": "red", "name": "a"}),
            r#"FieldValueInvalid spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long"#,
        ),
        (
            json!({"color": "red", "name": "ABC"}),
            r#"FieldValueInvalid spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'"#,
        ),
        (
            json!({"color": "red", "tags": ["a", "b", "c"]}),
            "FieldValueTooMany spec.tags: Too many: 3: must have at most 2 items",
        ),
        (
            json!({"color": "red", "tags": []}),
            "FieldValueInvalid spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
        ),
        (
            json!({"color": "red", "tags": ["a", "a"]}),
            r#"FieldValueInvalid spec.tags: Invalid value: "": spec.tags in body shouldn't contain duplicates"#,
        ),
        (
            json!({"color": "red", "tags": ["a", 1]}),
            r#"FieldValueTypeInvalid spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer""#,
        ),
        (
            json!({"color": "red", "port": true}),
            r#"FieldValueTypeInvalid spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
        ),
        (
            json!({"color": "red", "never": null}),
            r#"FieldValueTypeInvalid spec.never: Invalid value: "null": spec.never in body must be of type string: "null""#,
        ),
        (
            json!({"color": "red", "ip": "300.1.1.1"}),
            r#"FieldValueTypeInvalid spec.ip: Invalid value: "300.1.1.1": spec.ip in body must be of type ipv4: "300.1.1.1""#,
        ),
        (
            json!({"color": "red", "labels": {"a": "b", "c": "d"}}),
            "FieldValueTooMany spec.labels: Too many: 2: must have at most 1 item",
        ),
        (
            json!({"color": "red", "labels": {"a": 1}}),
            r#"FieldValueTypeInvalid spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
        ),
    ];
    for (s, want) in cases {
        assert_eq!(lines(spec(s.clone()), None), [*want], "for {s}");
    }
}

#[test]
fn a_fraction_for_an_integer_also_fails_the_range_check_at_no_path() {
    assert_eq!(
        lines(spec(json!({"color": "red", "replicas": 1.5})), None),
        [
            r#"FieldValueTypeInvalid spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
            r#"FieldValueInvalid <nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.replicas"#,
        ]
    );
}

#[test]
fn several_failures_are_all_reported() {
    let got = lines(spec(json!({"replicas": "x", "name": "TOOLONGNAME"})), None);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got.iter()
            .any(|l| l.starts_with("FieldValueRequired spec.color"))
    );
}

#[test]
fn unchanged_invalid_values_ratchet_on_update() {
    let old = spec(json!({"color": "green", "replicas": 20}));
    // Only the changed value is judged.
    let new = spec(json!({"color": "green", "replicas": 30}));
    assert_eq!(
        lines(new, Some(old.clone())),
        [
            "FieldValueInvalid spec.replicas: Invalid value: 30: spec.replicas in body should be less than or equal to 10"
        ]
    );
    let new = spec(json!({"color": "green", "replicas": 20, "name": "ok"}));
    assert_eq!(lines(new.clone(), Some(old)), Vec::<String>::new());
    // Without the old object (a create) the same object fails.
    assert_eq!(lines(new, None).len(), 2);
}

#[test]
fn status_is_validated_with_paths_under_status() {
    let schema = json!({"type": "object", "properties": {"ready": {"type": "boolean"}}});
    let got: Vec<String> = validate(&schema, &json!({"ready": "yes"}), None, "status")
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    assert_eq!(
        got,
        [
            r#"status.ready: Invalid value: "string": ready in body must be of type boolean: "string""#
        ]
    );
}
