//! `x-kubernetes-validations` of CRD schemas: CEL rules evaluated with
//! [cel-rust](https://github.com/cel-rust/cel-rust) (`cel` crate) on every value the rules
//! are declared on, as apiextensions-apiserver's `schema/cel` validator does: `self` is the
//! value (at the root: `apiVersion`, `kind` and `metadata.name`/`generateName` besides the
//! schema's fields), `oldSelf` the correlated old value — a rule using `oldSelf` (a
//! transition rule) runs only on an update where the value has an old counterpart, unless
//! `optionalOldSelf` — and a failing rule reports `message`, the string of
//! `messageExpression`, or `failed rule: {rule}`, at the value's path plus `fieldPath`, with
//! `reason` (FieldValueInvalid by default). A rule that does not use `oldSelf` and fails on a
//! value unchanged from the old object is ratcheted (not reported).
//!
//! Not done as kube-apiserver does: the cost estimate and runtime cost budget (a rule runs to
//! completion; rules are bounded only by the object's size), the Kubernetes CEL library beyond
//! what cel-rust's standard library has (`quantity`, `url`, `ip`, `cidr`, `format`, list
//! `isSorted`/`indexOf`, string `lowerAscii`/`split`/…), `optionalOldSelf`'s optional type
//! (`oldSelf` is simply absent, so `has`-style checks do not apply), and the type-check
//! errors kube-apiserver reports when a CRD is written (here a rule that does not compile
//! fails every value it is declared on, with kube-apiserver's `rule compile error` wording).

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map as CelMap};
use cel::{Context, Program, Value as Cel};
use serde_json::Value;

use super::{gofmt, listtype};
use crate::status::Cause;

/// The causes of the failing rules of `new` (a whole custom resource, or its `status` when
/// `prefix` is `"status"` and `schema` the status schema), `old` the value it replaces.
pub(crate) fn validate(
    schema: &Value,
    new: &Value,
    old: Option<&Value>,
    prefix: &str,
) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(schema, new, old, prefix, prefix.is_empty(), &mut out);
    out
}

/// Whether `schema` declares any rule (kube-apiserver builds a CEL validator only then).
pub(crate) fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("x-kubernetes-validations") || m.values().any(has_rules),
        Value::Array(a) => a.iter().any(has_rules),
        _ => false,
    }
}

/// A JSON value as a CEL value (integers as `int`, objects as maps with string keys).
pub(crate) fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<Key, Cel> = m
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            Cel::Map(CelMap { map: Arc::new(map) })
        }
    }
}

/// `self` at the root of a resource: the schema's fields with `apiVersion`, `kind` and only
/// `name` and `generateName` of `metadata`.
fn root_view(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| k == "name" || k == "generateName");
    }
    v
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    root: bool,
    out: &mut Vec<Cause>,
) {
    if v.is_null() {
        return;
    }
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        let (v_self, v_old) = if root {
            (root_view(v), old.map(root_view))
        } else {
            (v.clone(), old.cloned())
        };
        for rule in rules {
            rule_causes(schema, rule, &v_self, v_old.as_ref(), v, old, path, out);
        }
    }
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(k)).or(additional);
                if let Some(sub) = sub {
                    let old_child = old.and_then(|o| o.get(k));
                    walk(sub, child, old_child, &join(path, k), false, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items").filter(|i| i.is_object()) {
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|o| listtype::correlate(schema, item, o));
                    walk(sub, item, old_item, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

fn text<'v>(rule: &'v Value, key: &str) -> &'v str {
    rule.get(key).and_then(Value::as_str).unwrap_or("").trim()
}

/// Runs `source` with `self` (and `oldSelf`).
fn eval(source: &str, v_self: &Value, v_old: Option<&Value>) -> Result<Cel, String> {
    let program = Program::compile(source).map_err(|e| format!("rule compile error: {e}"))?;
    let mut ctx = Context::default();
    ctx.add_variable_from_value("self", to_cel(v_self));
    if let Some(o) = v_old {
        ctx.add_variable_from_value("oldSelf", to_cel(o));
    }
    program.execute(&ctx).map_err(|e| e.to_string())
}

#[allow(clippy::too_many_arguments)]
fn rule_causes(
    schema: &Value,
    rule: &Value,
    v_self: &Value,
    v_old: Option<&Value>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    out: &mut Vec<Cause>,
) {
    let source = text(rule, "rule");
    if source.is_empty() {
        return;
    }
    let uses_old = source.contains("oldSelf");
    let optional_old = rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
    if uses_old && old.is_none() && !optional_old {
        return;
    }
    let field = path.to_owned();
    let schema_type = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let bad = gofmt::quote(schema_type);
    let message = text(rule, "message");
    let shown = if message.is_empty() { source } else { message };
    let result = eval(source, v_self, v_old);
    let ratcheted = !uses_old && old == Some(value);
    let failure = match result {
        Ok(Cel::Bool(true)) => return,
        Ok(Cel::Bool(false)) => None,
        Ok(other) => Some(format!(
            "'no such overload' evaluating rule: {shown} (result {other:?} is not a bool)"
        )),
        Err(e) if e.starts_with("rule compile error") => Some(e),
        Err(e) => Some(format!("{e} evaluating rule: {shown}")),
    };
    if ratcheted {
        return;
    }
    if let Some(detail) = failure {
        out.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {bad}: {detail}"),
            &field,
        ));
        return;
    }
    let detail = match text(rule, "messageExpression") {
        "" => None,
        expr => match eval(expr, v_self, v_old) {
            Ok(Cel::String(s)) if !s.trim().is_empty() => Some(s.as_str().to_owned()),
            _ => None,
        },
    }
    .unwrap_or_else(|| {
        if message.is_empty() {
            format!("failed rule: {source}")
        } else {
            message.to_owned()
        }
    });
    let rule_path = text(rule, "fieldPath").trim_start_matches('.');
    let field = if rule_path.is_empty() {
        field
    } else {
        join(&field, rule_path)
    };
    let shown_value = match value {
        Value::Object(_) | Value::Array(_) => None,
        scalar => Some(gofmt::bad_value(scalar)),
    };
    let invalid = || match &shown_value {
        Some(b) => format!("Invalid value: {b}: {detail}"),
        None => format!("Invalid value: {detail}"),
    };
    let (reason, message) = match text(rule, "reason") {
        "FieldValueForbidden" => ("FieldValueForbidden", format!("Forbidden: {detail}")),
        "FieldValueRequired" => ("FieldValueRequired", format!("Required value: {detail}")),
        "FieldValueDuplicate" => (
            "FieldValueDuplicate",
            match &shown_value {
                Some(b) => format!("Duplicate value: {b}"),
                None => "Duplicate value".to_owned(),
            },
        ),
        _ => ("FieldValueInvalid", invalid()),
    };
    out.push(Cause::new(reason, message, &field));
}

#[cfg(test)]
#[path = "cel_tests.rs"]
mod tests;
