//! Strategic merge patch for the built-in kinds, without schemas: lists of objects are
//! merged by the merge key kube-apiserver uses for fields of that name (`containers` by
//! `name`, container `ports` by `containerPort`, ...), `finalizers` are a set, other lists
//! are replaced. The directives kubectl emits are honoured: `$patch` (`replace`,
//! `delete`, `merge`), `$retainKeys`, `$setElementOrder/<field>` and
//! `$deleteFromPrimitiveList/<field>`.

use serde_json::{Map, Value};

/// The merge key of a list field (by field name and, for `ports`, its parent).
fn merge_key(field: &str, parent: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" if parent == "container" => "containerPort",
        "ports" => "port",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Lists of primitives merged as sets.
fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// Applies `patch` to `target` (both JSON objects).
pub(crate) fn apply(target: &mut Value, patch: &Value) {
    merge_map(target, patch, "");
}

fn merge_map(target: &mut Value, patch: &Value, context: &str) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut m = p.clone();
            m.remove("$patch");
            *target = Value::Object(m);
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else {
        return;
    };
    for (k, v) in p {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (t.get_mut(field), v) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let child_context = if matches!(
            k.as_str(),
            "containers" | "initContainers" | "ephemeralContainers"
        ) {
            "container"
        } else {
            ""
        };
        match (t.get_mut(k), v) {
            (Some(Value::Array(cur)), Value::Array(items)) => {
                if let Some(key) = merge_key(k, context) {
                    merge_list(cur, items, key, child_context);
                } else if is_set_list(k) {
                    // kube-apiserver's order: the patch's items, then the others kept.
                    let mut merged: Vec<Value> = Vec::with_capacity(cur.len() + items.len());
                    for x in items.iter().chain(cur.iter()) {
                        if !merged.contains(x) {
                            merged.push(x.clone());
                        }
                    }
                    *cur = merged;
                } else {
                    *cur = items.clone();
                }
            }
            (Some(cur @ Value::Object(_)), Value::Object(_)) => {
                merge_map(cur, v, child_context);
                if cur.is_null() {
                    t.remove(k);
                }
            }
            _ => {
                let mut fresh = Value::Null;
                merge_map(&mut fresh, v, child_context);
                if v.is_object() {
                    t.insert(k.clone(), fresh);
                } else {
                    t.insert(k.clone(), strip_directives(v));
                }
            }
        }
    }
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        t.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|x| x.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, x)| (k.clone(), strip_directives(x)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_list(cur: &mut Vec<Value>, items: &[Value], key: &str, context: &str) {
    for item in items {
        let id = item.get(key);
        let pos = id.and_then(|id| cur.iter().position(|c| c.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                cur.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => merge_map(&mut cur[i], item, context),
            (None, false) => cur.push(strip_directives(item)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_patch_merges_containers_by_name_and_keeps_other_fields() {
        let mut pod = json!({"spec": {"containers": [
            {"name": "a", "image": "x:1", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "b", "image": "y:1"}
        ]}, "metadata": {"finalizers": ["f1"]}});
        let patch = json!({"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "image": "x:2", "ports": [{"containerPort": 443}]},
                           {"name": "b", "$patch": "delete"}]},
            "metadata": {"finalizers": ["f2"]}});
        apply(&mut pod, &patch);
        assert_eq!(
            pod["spec"]["containers"],
            json!([
                {"name": "a", "image": "x:2", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}
            ])
        );
        assert_eq!(pod["metadata"]["finalizers"], json!(["f2", "f1"]));
        assert!(pod["spec"].get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn strategic_merge_patch_null_deletes_and_replace_directive_replaces() {
        let mut o = json!({"data": {"a": "1", "b": "2"}, "spec": {"x": 1, "y": 2}});
        apply(
            &mut o,
            &json!({"data": {"a": null}, "spec": {"$patch": "replace", "z": 3}}),
        );
        assert_eq!(o, json!({"data": {"b": "2"}, "spec": {"z": 3}}));
    }
}
