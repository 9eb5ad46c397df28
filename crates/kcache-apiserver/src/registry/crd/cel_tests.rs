use serde_json::{Value, json};

use super::{eval, validate};

/// Rules from Kubernetes' CRD validation-rules documentation and apiextensions-apiserver's
/// `schema/cel` tests: (rule, self, expected result).
const TABLE: &[(&str, &str, bool)] = &[
    (
        "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas",
        r#"{"minReplicas": 1, "replicas": 3, "maxReplicas": 5}"#,
        true,
    ),
    (
        "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas",
        r#"{"minReplicas": 1, "replicas": 7, "maxReplicas": 5}"#,
        false,
    ),
    (
        "has(self.expired) == false || self.expired == false",
        r#"{}"#,
        true,
    ),
    ("!has(self.x) || self.x > 0", r#"{"x": 0}"#, false),
    ("self.startsWith('kube')", r#""kube-system""#, true),
    ("self.endsWith('-system')", r#""kube-public""#, false),
    ("self.contains('sys')", r#""kube-system""#, true),
    ("self.matches('^[a-z]+$')", r#""abc""#, true),
    ("self.matches('^[a-z]+$')", r#""Abc""#, false),
    ("size(self.items) < 3", r#"{"items": [1, 2, 3]}"#, false),
    ("self.items.size() == 3", r#"{"items": [1, 2, 3]}"#, true),
    ("self.all(x, x > 0)", "[1, 2, 3]", true),
    ("self.all(x, x > 1)", "[1, 2, 3]", false),
    ("self.exists(x, x == 'b')", r#"["a", "b"]"#, true),
    ("self.exists_one(x, x == 'a')", r#"["a", "a"]"#, false),
    ("self.map(x, x * 2).all(y, y < 10)", "[1, 2, 4]", true),
    ("self.filter(x, x > 2).size() == 1", "[1, 2, 3]", true),
    (
        "self.all(k, k.startsWith('app'))",
        r#"{"app": 1, "apple": 2}"#,
        true,
    ),
    ("int(self.s) > 3", r#"{"s": "5"}"#, true),
    ("string(self.i) == '5'", r#"{"i": 5}"#, true),
    ("double(self.i) > 1.5", r#"{"i": 2}"#, true),
    (
        "self.name == self.name.lowerAscii() || true",
        r#"{"name": "A"}"#,
        true,
    ),
    ("'x' in self.tags", r#"{"tags": ["x"]}"#, true),
    (
        "self.spec.replicas <= 10",
        r#"{"spec": {"replicas": 11}}"#,
        false,
    ),
    ("type(self) == map", "{}", true),
];

#[test]
fn the_documented_rule_shapes_evaluate_as_kubernetes_evaluates_them() {
    let mut failures = Vec::new();
    for (rule, value, want) in TABLE {
        let v: Value = serde_json::from_str(value).expect("table JSON");
        match eval(rule, &v, None) {
            Ok(cel::Value::Bool(got)) if got == *want => {}
            other => failures.push(format!("{rule} on {value}: {other:?}, want {want}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.min <= self.max", "message": "min must not exceed max"},
        {"rule": "self.max < 100", "messageExpression": "'max is ' + string(self.max)"},
        {"rule": "!has(self.name) || self.name.size() > 1", "fieldPath": ".name",
         "reason": "FieldValueForbidden"}
    ],
    "properties": {
        "min": {"type": "integer"}, "max": {"type": "integer"}, "name": {"type": "string"},
        "mode": {"type": "string",
                 "x-kubernetes-validations": [
                     {"rule": "self == oldSelf", "message": "mode is immutable"}]}
    }}}})
}

fn lines(new: Value, old: Option<Value>) -> Vec<String> {
    validate(&schema(), &new, old.as_ref(), "")
        .iter()
        .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
        .collect()
}

#[test]
fn failing_rules_report_message_message_expression_field_path_and_reason() {
    let got = lines(json!({"spec": {"min": 300, "max": 200, "name": "a"}}), None);
    assert_eq!(
        got,
        [
            "FieldValueInvalid spec: Invalid value: min must not exceed max",
            "FieldValueInvalid spec: Invalid value: max is 200",
            "FieldValueForbidden spec.name: Forbidden: failed rule: !has(self.name) || self.name.size() > 1",
        ]
    );
    assert_eq!(
        lines(json!({"spec": {"min": 1, "max": 2}}), None),
        Vec::<String>::new()
    );
}

#[test]
fn transition_rules_run_on_updates_and_unchanged_values_ratchet() {
    let old = json!({"spec": {"min": 5, "max": 1, "mode": "a"}});
    // A create never runs `oldSelf` rules.
    assert_eq!(
        lines(json!({"spec": {"min": 1, "max": 2, "mode": "b"}}), None).len(),
        0
    );
    let got = lines(
        json!({"spec": {"min": 5, "max": 1, "mode": "b"}}),
        Some(old.clone()),
    );
    // The spec changed (mode), so its own failing rule is reported too.
    assert_eq!(
        got,
        [
            "FieldValueInvalid spec: Invalid value: min must not exceed max",
            r#"FieldValueInvalid spec.mode: Invalid value: "b": mode is immutable"#,
        ]
    );
    // Unchanged: the old failure of the spec rule is ratcheted.
    assert_eq!(lines(old.clone(), Some(old)).len(), 0);
}
