//! Pruning of unknown fields by a structural schema, as kube-apiserver prunes custom
//! resources (`apiextensions-apiserver/pkg/apiserver/schema/pruning`): an object schema
//! with `properties` keeps only those (unless `x-kubernetes-preserve-unknown-fields`),
//! `additionalProperties` and `items` schemas apply to every value and element, and an
//! embedded resource (or the root) keeps `apiVersion`, `kind` and `metadata`.

use serde_json::Value;

/// Prunes `obj` (a whole custom resource) by `schema` (its `openAPIV3Schema`); returns the
/// paths of the fields removed (`spec.bogus`, `spec.items[0].x`), in document order.
pub(crate) fn prune(obj: &mut Value, schema: &Value) -> Vec<String> {
    let mut pruned = Vec::new();
    walk(obj, schema, "", true, &mut pruned);
    pruned
}

fn walk(v: &mut Value, schema: &Value, path: &str, resource: bool, pruned: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let preserve = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true);
            let embedded = resource
                || schema
                    .get("x-kubernetes-embedded-resource")
                    .and_then(Value::as_bool)
                    == Some(true);
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let child = join(path, &k);
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(&k)).or(additional);
                match sub {
                    Some(sub) => {
                        if let Some(value) = map.get_mut(&k) {
                            walk(value, sub, &child, false, pruned);
                        }
                    }
                    None if preserve => {}
                    None => {
                        map.remove(&k);
                        pruned.push(child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item, item_schema, &format!("{path}[{i}]"), false, pruned);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_fields_are_pruned_by_properties_items_and_additional_properties() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        }});
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "bogus": 1,
            "spec": {"size": 1, "extra": true, "ports": [{"port": 1, "name": "p"}],
                     "labels": {"a": "b"}, "free": {"anything": 1}}});
        let pruned = prune(&mut obj, &schema);
        assert_eq!(pruned, ["bogus", "spec.extra", "spec.ports[0].name"]);
        assert_eq!(
            obj,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
                "spec": {"size": 1, "ports": [{"port": 1}], "labels": {"a": "b"}, "free": {"anything": 1}}})
        );
    }
}
