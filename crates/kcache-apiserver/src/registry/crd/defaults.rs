//! Defaulting of custom resources by their structural schema, as apiextensions-apiserver does
//! it after pruning (`schema/defaulting`): a `null` that is neither nullable nor defaulted is
//! dropped; a missing property with a `default` — or a non-nullable `null` one — gets a copy
//! of the default, and defaulting continues into properties, additional properties and items.

use serde_json::Value;

fn nullable(schema: &Value) -> bool {
    schema.get("nullable").and_then(Value::as_bool) == Some(true)
}

fn sub_schema<'s>(schema: &'s Value, key: &str) -> Option<&'s Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// Drops the `null`s the schema neither allows nor defaults
/// (`PruneNonNullableNullsWithoutDefaults`).
pub(crate) fn prune_nulls(v: &mut Value, schema: Option<&Value>) {
    match v {
        Value::Object(map) => {
            map.retain(|k, child| {
                let sub = schema.and_then(|s| sub_schema(s, k));
                !(child.is_null()
                    && sub.is_some_and(|s| !nullable(s) && s.get("default").is_none()))
            });
            for (k, child) in map.iter_mut() {
                prune_nulls(child, schema.and_then(|s| sub_schema(s, k)));
            }
        }
        Value::Array(items) => {
            let sub = schema
                .and_then(|s| s.get("items"))
                .filter(|i| i.is_object());
            for item in items {
                prune_nulls(item, sub);
            }
        }
        _ => {}
    }
}

fn non_nullable_null(v: Option<&Value>, schema: &Value) -> bool {
    v.is_some_and(Value::is_null) && !nullable(schema)
}

/// Applies the schema's defaults to `v` (`structuraldefaulting.Default`).
pub(crate) fn apply(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, prop) in props {
                    let Some(default) = prop.get("default").filter(|d| !d.is_null()) else {
                        continue;
                    };
                    if !map.contains_key(k) || non_nullable_null(map.get(k), prop) {
                        map.insert(k.clone(), default.clone());
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map.iter_mut() {
                if let Some(prop) = props.and_then(|p| p.get(k)) {
                    apply(child, prop);
                } else if let Some(add) = additional {
                    if non_nullable_null(Some(child), add)
                        && let Some(d) = add.get("default")
                    {
                        *child = d.clone();
                    }
                    apply(child, add);
                }
            }
        }
        Value::Array(items) => {
            let Some(sub) = schema.get("items").filter(|i| i.is_object()) else {
                return;
            };
            for item in items.iter_mut() {
                if non_nullable_null(Some(item), sub)
                    && let Some(d) = sub.get("default")
                {
                    *item = d.clone();
                }
                apply(item, sub);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "default": 1},
            "mode": {"type": "string", "default": "fast"},
            "note": {"type": "string"},
            "maybe": {"type": "string", "nullable": true},
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "protocol": {"type": "string", "default": "TCP"}}}},
            "nested": {"type": "object", "default": {}, "properties": {
                "level": {"type": "integer", "default": 3}}}
        }}}})
    }

    #[test]
    fn missing_and_null_fields_get_defaults_recursively() {
        let mut v = json!({"spec": {"mode": null, "note": null, "maybe": null,
            "ports": [{"name": "a"}, {"protocol": "UDP"}]}});
        prune_nulls(&mut v, Some(&schema()));
        apply(&mut v, &schema());
        assert_eq!(
            v,
            json!({"spec": {"replicas": 1, "mode": "fast", "maybe": null,
                "ports": [{"name": "a", "protocol": "TCP"}, {"protocol": "UDP"}],
                "nested": {"level": 3}}})
        );
    }
}
