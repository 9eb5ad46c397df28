//! Validation of a custom resource by its structural schema, as kube-apiserver does it
//! (kube-openapi's `validate.SchemaValidator` driven by apiextensions-apiserver, whose
//! `kubeOpenAPIResultToFieldErrors` turns each failure into a `field.Error`): per value, the
//! type (with `nullable`, `x-kubernetes-int-or-string` and numeric formats), the string
//! checks (`maxLength`, else `minLength`, else `pattern`), the format, the number checks
//! (`multipleOf`, `minimum`, `maximum`), the array checks (`items`, `minItems`, `maxItems`,
//! `uniqueItems`), `enum`, then the object checks (`minProperties`, `maxProperties`,
//! `additionalProperties`, `properties`, `required`) — the order and wording of kube-openapi.
//!
//! Ratcheting (`CRDValidationRatcheting`, GA and locked on in 1.33+): on an update, a value
//! equal to the value it correlates with in the old object (same property, or same key of a
//! `map` list) keeps its failures to itself.

use std::cell::RefCell;
use std::collections::HashMap;

use regex::Regex;
use serde_json::{Number, Value};

use super::{formats, gofmt, listtype};
use crate::status::Cause;

/// Validates `value` (a whole custom resource, or its `status` when `prefix` is `"status"`)
/// by `schema`; `old` is the value it replaces (ratcheting), `None` on create.
pub(crate) fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    prefix: &str,
) -> Vec<Cause> {
    let mut v = Validator {
        prefix,
        out: Vec::new(),
    };
    v.node(schema, value, old, "");
    v.out
}

struct Validator<'p> {
    prefix: &'p str,
    out: Vec<Cause>,
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn int(schema: &Value, key: &str) -> Option<i64> {
    schema.get(key).and_then(Value::as_i64)
}

fn child(name: &str, key: &str) -> String {
    if name.is_empty() {
        key.to_owned()
    } else {
        format!("{name}.{key}")
    }
}

/// The schema's types, as kube-openapi holds them (`integer,string` for int-or-string).
fn types(schema: &Value) -> Vec<&str> {
    if flag(schema, "x-kubernetes-int-or-string") {
        return vec!["integer", "string"];
    }
    schema
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .into_iter()
        .collect()
}

/// The JSON type and Go format a decoded value has (`integer`/`int64`, `number`/`float64`).
fn type_of(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::Number(n) if n.is_i64() => ("integer", "int64"),
        Value::Number(_) => ("number", "float64"),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

fn as_f64(n: &Number) -> f64 {
    n.as_f64().unwrap_or(0.0)
}

/// Go's `IsFloat64AJSONInteger`.
fn is_json_integer(f: f64) -> bool {
    const EPSILON: f64 = 1e-9;
    if !f.is_finite() || !(-9_007_199_254_740_991.0..=9_007_199_254_740_991.0).contains(&f) {
        return false;
    }
    let g = f.trunc();
    if f == g {
        return true;
    }
    let diff = (f - g).abs();
    if g == 0.0 || diff < f64::MIN_POSITIVE {
        return diff < EPSILON * f64::MIN_POSITIVE;
    }
    diff / (f.abs() + g.abs()) < EPSILON
}

thread_local! {
    static PATTERNS: RefCell<HashMap<String, Option<Regex>>> = RefCell::new(HashMap::new());
}

/// Whether `s` matches `pattern` (unanchored, as Go's `regexp.MatchString`); a pattern that
/// does not compile matches everything (kube-apiserver refuses such a CRD).
fn matches(pattern: &str, s: &str) -> bool {
    PATTERNS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() > 256 {
            cache.clear();
        }
        cache
            .entry(pattern.to_owned())
            .or_insert_with(|| Regex::new(pattern).ok())
            .as_ref()
            .is_none_or(|re| re.is_match(s))
    })
}

impl Validator<'_> {
    fn field(&self, name: &str) -> String {
        let name = name.trim_start_matches('.');
        match (self.prefix.is_empty(), name.is_empty()) {
            (true, _) => name.to_owned(),
            (false, true) => self.prefix.to_owned(),
            (false, false) if name.starts_with('[') => format!("{}{name}", self.prefix),
            (false, false) => format!("{}.{name}", self.prefix),
        }
    }

    /// A `field.Invalid` (or `TypeInvalid`) with kube-openapi's message as detail.
    fn invalid(&mut self, reason: &str, name: &str, bad: &str, detail: String) {
        let field = self.field(name);
        self.out.push(Cause::new(
            reason,
            format!("Invalid value: {bad}: {detail}"),
            &field,
        ));
    }

    fn node(&mut self, schema: &Value, value: &Value, old: Option<&Value>, name: &str) {
        if old == Some(value) {
            return;
        }
        let types = types(schema);
        if value.is_null() {
            if !types.is_empty() && !flag(schema, "nullable") {
                let detail = format!(
                    "{name} in body must be of type {}: \"null\"",
                    types.join(",")
                );
                self.invalid("FieldValueTypeInvalid", name, "\"null\"", detail);
            }
            self.enumeration(schema, value, name);
            return;
        }
        self.type_check(schema, &types, value, name);
        self.composite(schema, value, name);
        if let Value::String(s) = value {
            self.string(schema, s, name);
        }
        if let Value::Number(n) = value {
            self.number(schema, n, name);
        }
        if let Value::Array(items) = value {
            self.array(schema, items, old.and_then(Value::as_array), name);
        }
        self.enumeration(schema, value, name);
        if let Value::Object(map) = value {
            self.object(schema, map, old.and_then(Value::as_object), name);
        }
    }

    /// The failures of `value` against a sub-schema of `allOf`/`anyOf`/`oneOf`/`not`.
    fn sub(&self, schema: &Value, value: &Value, name: &str) -> Vec<Cause> {
        let mut v = Validator {
            prefix: self.prefix,
            out: Vec::new(),
        };
        v.node(schema, value, None, name);
        v.out
    }

    /// kube-openapi's composite checks, in its order (anyOf, oneOf, allOf, not): a failed one
    /// is reported at the root (`field.Invalid` at a nil path, as apiextensions turns errors
    /// that are not a validation of one value), with the failures of the first
    /// alternative that failed (kube-openapi keeps the one with the most passing checks).
    fn composite(&mut self, schema: &Value, value: &Value, name: &str) {
        let list = |k: &str| {
            schema
                .get(k)
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty())
        };
        // The root is Go's nil field path, printed `<nil>`.
        let root = |this: &mut Self, message: String| {
            this.out.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: \"\": {message}"),
                "<nil>",
            ));
        };
        let quoted = gofmt::quote(name);
        if let Some(alts) = list("anyOf") {
            let results: Vec<Vec<Cause>> = alts.iter().map(|a| self.sub(a, value, name)).collect();
            if !results.iter().any(Vec::is_empty) {
                root(
                    self,
                    format!("{quoted} must validate at least one schema (anyOf)"),
                );
                self.out
                    .extend(results.into_iter().next().unwrap_or_default());
            }
        }
        if let Some(alts) = list("oneOf") {
            let results: Vec<Vec<Cause>> = alts.iter().map(|a| self.sub(a, value, name)).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != 1 {
                let more = if valid == 0 {
                    "Found none valid".to_owned()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                root(
                    self,
                    format!("{quoted} must validate one and only one schema (oneOf). {more}"),
                );
                if valid == 0 {
                    self.out
                        .extend(results.into_iter().next().unwrap_or_default());
                }
            }
        }
        if let Some(alts) = list("allOf") {
            let results: Vec<Vec<Cause>> = alts.iter().map(|a| self.sub(a, value, name)).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != results.len() {
                self.out.extend(results.into_iter().flatten());
                let none = if valid == 0 { ". None validated" } else { "" };
                root(
                    self,
                    format!("{quoted} must validate all the schemas (allOf){none}"),
                );
            }
        }
        if let Some(not) = schema.get("not").filter(|n| n.is_object())
            && self.sub(not, value, name).is_empty()
        {
            root(self, format!("{quoted} must not validate the schema (not)"));
        }
    }

    fn type_check(&mut self, schema: &Value, types: &[&str], value: &Value, name: &str) {
        let format = schema
            .get("format")
            .and_then(Value::as_str)
            .filter(|f| formats::check(f, "").is_some())
            .unwrap_or("");
        if types.is_empty() && format.is_empty() {
            return;
        }
        let (kind, go_format) = type_of(value);
        let contains = |t: &str| types.contains(&t);
        let float_int = kind == "number"
            && contains("integer")
            && matches!(value, Value::Number(n) if is_json_integer(as_f64(n)));
        let int_float = kind == "integer" && contains("number");
        let stringy = matches!(value, Value::String(_) | Value::Array(_));
        let format_fits = contains(kind) || go_format == format || float_int || int_float;
        if !(stringy || format.is_empty() || format_fits) {
            let detail = format!("{name} in body must be of type {format}: \"{go_format}\"");
            self.invalid(
                "FieldValueTypeInvalid",
                name,
                &gofmt::quote(go_format),
                detail,
            );
            return;
        }
        let numeric = contains("number") || contains("integer");
        if stringy && !numeric && !format.is_empty() {
            return;
        }
        if !(contains(kind) || float_int || int_float) {
            let detail = format!(
                "{name} in body must be of type {}: \"{kind}\"",
                types.join(",")
            );
            self.invalid("FieldValueTypeInvalid", name, &gofmt::quote(kind), detail);
        }
    }

    fn string(&mut self, schema: &Value, s: &str, name: &str) {
        let len = s.chars().count() as i64;
        let bad = gofmt::quote(s);
        if let Some(max) = int(schema, "maxLength")
            && len > max
        {
            let unit = if max == 1 { "byte" } else { "bytes" };
            let field = self.field(name);
            self.out.push(Cause::new(
                "FieldValueTooLong",
                format!("Too long: may not be more than {max} {unit}"),
                &field,
            ));
        } else if let Some(min) = int(schema, "minLength")
            && len < min
        {
            let detail = format!("{name} in body should be at least {min} chars long");
            self.invalid("FieldValueInvalid", name, &bad, detail);
        } else if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && !matches(p, s)
        {
            let detail = format!("{name} in body should match '{p}'");
            self.invalid("FieldValueInvalid", name, &bad, detail);
        }
        if let Some(format) = schema.get("format").and_then(Value::as_str)
            && formats::check(format, s) == Some(false)
        {
            let detail = format!("{name} in body must be of type {format}: {bad}");
            self.invalid("FieldValueTypeInvalid", name, &bad, detail);
        }
    }

    fn number(&mut self, schema: &Value, n: &Number, name: &str) {
        let bad = gofmt::number(n);
        let data = as_f64(n);
        let types = types(schema);
        if types == ["integer"] && !is_json_integer(data) {
            // kube-openapi's range check of the value is not a validation error: apiextensions
            // reports it at the path it validates (none for the whole object: `<nil>`).
            let field = if self.prefix.is_empty() {
                "<nil>"
            } else {
                self.prefix
            };
            self.out.push(Cause::new(
                "FieldValueInvalid",
                format!(
                    "Invalid value: \"\": Checked value must be of type integer (default format) in {name}"
                ),
                field,
            ));
        }
        if let Some(m) = schema.get("multipleOf").and_then(Value::as_f64)
            && m > 0.0
        {
            let multiple = match (n.as_i64(), m.fract() == 0.0) {
                (Some(i), true) => i % (m as i64).max(1) == 0,
                _ => {
                    let mult = if m < 1.0 { 1.0 / m * data } else { data / m };
                    is_json_integer(mult)
                }
            };
            if !multiple {
                let detail = format!("{name} in body should be a multiple of {}", gofmt::float(m));
                self.invalid("FieldValueInvalid", name, &bad, detail);
            }
        }
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let exclusive = flag(schema, "exclusiveMinimum");
            if (exclusive && data <= min) || data < min {
                let word = if exclusive { "" } else { " or equal to" };
                let detail = format!(
                    "{name} in body should be greater than{word} {}",
                    gofmt::float(min)
                );
                self.invalid("FieldValueInvalid", name, &bad, detail);
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let exclusive = flag(schema, "exclusiveMaximum");
            if (exclusive && data >= max) || data > max {
                let word = if exclusive { "" } else { " or equal to" };
                let detail = format!(
                    "{name} in body should be less than{word} {}",
                    gofmt::float(max)
                );
                self.invalid("FieldValueInvalid", name, &bad, detail);
            }
        }
    }

    fn array(&mut self, schema: &Value, items: &[Value], old: Option<&Vec<Value>>, name: &str) {
        if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
            for (i, item) in items.iter().enumerate() {
                let old_item = old.and_then(|o| listtype::correlate(schema, item, o));
                self.node(item_schema, item, old_item, &format!("{name}[{i}]"));
            }
        }
        let size = items.len() as i64;
        if let Some(min) = int(schema, "minItems")
            && size < min
        {
            let detail = format!("{name} in body should have at least {min} items");
            self.invalid("FieldValueInvalid", name, &size.to_string(), detail);
        }
        if let Some(max) = int(schema, "maxItems")
            && size > max
        {
            let unit = if max == 1 { "item" } else { "items" };
            let field = self.field(name);
            self.out.push(Cause::new(
                "FieldValueTooMany",
                format!("Too many: {size}: must have at most {max} {unit}"),
                &field,
            ));
        }
        if flag(schema, "uniqueItems")
            && items
                .iter()
                .enumerate()
                .any(|(i, a)| items[..i].contains(a))
        {
            let detail = format!("{name} in body shouldn't contain duplicates");
            self.invalid("FieldValueInvalid", name, "\"\"", detail);
        }
    }

    fn enumeration(&mut self, schema: &Value, value: &Value, name: &str) {
        let Some(allowed) = schema
            .get("enum")
            .and_then(Value::as_array)
            .filter(|e| !e.is_empty())
        else {
            return;
        };
        let same = |e: &Value| match (e, value) {
            (Value::Number(a), Value::Number(b)) => as_f64(a) == as_f64(b),
            (a, b) => a == b,
        };
        if allowed.iter().any(same) {
            return;
        }
        let values: Vec<String> = allowed
            .iter()
            .map(|e| match e {
                Value::String(s) => gofmt::quote(s),
                other => gofmt::quote(&gofmt::json(other)),
            })
            .collect();
        let field = self.field(name);
        self.out.push(Cause::new(
            "FieldValueNotSupported",
            format!(
                "Unsupported value: {}: supported values: {}",
                gofmt::bad_value(value),
                values.join(", ")
            ),
            &field,
        ));
    }

    fn object(
        &mut self,
        schema: &Value,
        map: &serde_json::Map<String, Value>,
        old: Option<&serde_json::Map<String, Value>>,
        name: &str,
    ) {
        let size = map.len() as i64;
        if let Some(min) = int(schema, "minProperties")
            && size < min
        {
            let detail = format!("{name} in body should have at least {min} properties");
            self.invalid("FieldValueInvalid", name, &size.to_string(), detail);
        }
        if let Some(max) = int(schema, "maxProperties")
            && size > max
        {
            let unit = if max == 1 { "item" } else { "items" };
            let field = self.field(name);
            self.out.push(Cause::new(
                "FieldValueTooMany",
                format!("Too many: {size}: must have at most {max} {unit}"),
                &field,
            ));
        }
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            for (k, v) in map {
                if props.is_some_and(|p| p.contains_key(k)) {
                    continue;
                }
                let old_v = old.and_then(|o| o.get(k));
                self.node(additional, v, old_v, &child(name, k));
            }
        }
        if let Some(props) = props {
            for (k, sub) in props {
                if let Some(v) = map.get(k) {
                    let old_v = old.and_then(|o| o.get(k));
                    self.node(sub, v, old_v, &child(name, k));
                }
            }
        }
        let required = schema.get("required").and_then(Value::as_array);
        for k in required.into_iter().flatten().filter_map(Value::as_str) {
            if !map.contains_key(k) {
                let field = self.field(&format!("{name}.{k}"));
                self.out
                    .push(Cause::new("FieldValueRequired", "Required value", &field));
            }
        }
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
