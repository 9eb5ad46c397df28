//! `x-kubernetes-list-type` of custom resources (apiextensions-apiserver's
//! `schema/listtype`): the items of a `set` are unique, the items of a `map` are objects with
//! unique `x-kubernetes-list-map-keys`; each repeated item is reported once (its second
//! occurrence) as a `Duplicate value`. Also how items correlate between an old and a new
//! list, for ratcheting.

use serde_json::{Map, Value};

use super::gofmt;
use crate::status::Cause;

fn list_type(schema: &Value) -> &str {
    schema
        .get("x-kubernetes-list-type")
        .and_then(Value::as_str)
        .unwrap_or("atomic")
}

fn map_keys(schema: &Value) -> Vec<&str> {
    schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The key of a `map` list's item: its key fields that are set.
fn key_of(item: &Value, keys: &[&str]) -> Value {
    let mut key = Map::new();
    if let Some(obj) = item.as_object() {
        for k in keys {
            if let Some(v) = obj.get(*k) {
                key.insert((*k).to_owned(), v.clone());
            }
        }
    }
    Value::Object(key)
}

/// The item of `old` (a list of `schema`) that `item` correlates with: the item with the same
/// key in a `map` list, the same item in a `set`; atomic lists do not correlate.
pub(crate) fn correlate<'o>(schema: &Value, item: &Value, old: &'o [Value]) -> Option<&'o Value> {
    match list_type(schema) {
        "map" => {
            let keys = map_keys(schema);
            let key = key_of(item, &keys);
            old.iter().find(|o| key_of(o, &keys) == key)
        }
        "set" => old.iter().find(|o| *o == item),
        _ => None,
    }
}

/// The `Duplicate value` errors of every `set` and `map` list in `obj`.
pub(crate) fn validate(schema: &Value, obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(schema, obj, "", &mut out);
    out
}

fn walk(schema: &Value, v: &Value, path: &str, out: &mut Vec<Cause>) {
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in map {
                if let Some(sub) = props.and_then(|p| p.get(k)) {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(sub, v, &p, out);
                } else if let Some(sub) = additional {
                    walk(sub, v, &format!("{path}[{k}]"), out);
                }
            }
        }
        Value::Array(items) => {
            match list_type(schema) {
                "set" => duplicates(items, path, |x| x.clone(), out),
                "map" => {
                    if let Some(i) = items.iter().position(|x| !x.is_object() && !x.is_null()) {
                        out.push(Cause::new(
                            "FieldValueInvalid",
                            format!(
                                "Invalid value: {}: must be an object for an array of list-type map",
                                gofmt::bad_value(&items[i])
                            ),
                            &format!("{path}[{i}]"),
                        ));
                    } else {
                        let keys = map_keys(schema);
                        duplicates(items, path, |x| key_of(x, &keys), out);
                    }
                }
                _ => {}
            }
            if let Some(sub) = schema.get("items").filter(|i| i.is_object()) {
                for (i, item) in items.iter().enumerate() {
                    walk(sub, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn duplicates(items: &[Value], path: &str, key: impl Fn(&Value) -> Value, out: &mut Vec<Cause>) {
    let keys: Vec<Value> = items.iter().map(key).collect();
    for (i, k) in keys.iter().enumerate() {
        // Reported at the second occurrence only.
        if keys[..i].iter().filter(|p| *p == k).count() == 1 {
            out.push(Cause::new(
                "FieldValueDuplicate",
                format!("Duplicate value: {}", gofmt::bad_value(k)),
                &format!("{path}[{i}]"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sets_and_maps_report_each_repeated_item_once() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object"}}}}}});
        let obj = json!({"spec": {"tags": ["a", "b", "a", "a"],
            "ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}]}});
        let causes = validate(&schema, &obj);
        let lines: Vec<String> = causes
            .iter()
            .map(|c| format!("{} {} {}", c.reason, c.field, c.message))
            .collect();
        assert_eq!(
            lines,
            [
                "FieldValueDuplicate spec.ports[1] Duplicate value: {\"name\":\"x\"}",
                "FieldValueDuplicate spec.tags[2] Duplicate value: \"a\"",
            ]
        );
    }

    #[test]
    fn map_items_correlate_by_key() {
        let schema = json!({"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"]});
        let old = [json!({"name": "a", "v": 1}), json!({"name": "b", "v": 2})];
        assert_eq!(
            correlate(&schema, &json!({"name": "b", "v": 3}), &old),
            Some(&old[1])
        );
        assert_eq!(correlate(&json!({"type": "array"}), &old[0], &old), None);
    }
}
