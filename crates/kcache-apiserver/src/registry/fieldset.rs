//! Field sets (FieldsV1) for managedFields: the set of an object's fields (`f:<field>`,
//! `k:{...}` for items of lists of type `map`, `v:<value>` for members of `set` lists, `.` for
//! free-form maps and list items), the fields a write changed, and the set algebra (union,
//! intersection, difference) `managed.rs` keeps each manager's entry with.

use serde_json::{Map, Value, json};

use super::list_keys::{atomic, atomic_item, child, item_key, items_ty, list_type, root_ty};
use crate::schema::model::{ListType, Ty};

pub(super) fn free_form_map(field: &str) -> bool {
    matches!(
        field,
        "labels"
            | "annotations"
            | "data"
            | "binaryData"
            | "stringData"
            | "nodeSelector"
            | "selector"
            | "matchLabels"
            | "limits"
            | "requests"
            | "capacity"
            | "allocatable"
    )
}

pub(super) fn fields_of(map: &Map<String, Value>, ty: Option<&Ty>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in map {
        if k.starts_with('$') || v.is_null() {
            continue;
        }
        let fty = child(ty, k);
        let entry = match v {
            Value::Object(_) if atomic(ty, k) => json!({}),
            Value::Object(m) if !m.is_empty() => {
                let mut inner = fields_of(m, fty);
                if free_form_map(k) {
                    inner.insert(".".into(), json!({}));
                }
                Value::Object(inner)
            }
            Value::Array(items) if !items.is_empty() => {
                let item_ty = items_ty(fty);
                match list_type(ty, k) {
                    ListType::Map(keys) if items.iter().all(Value::is_object) => {
                        let mut inner = Map::new();
                        for item in items {
                            let Some(id) = item_key(item, keys, item_ty) else {
                                continue;
                            };
                            let mut f = Map::new();
                            if !atomic_item(item_ty) {
                                f = fields_of(item.as_object().unwrap_or(&Map::new()), item_ty);
                                f.insert(".".into(), json!({}));
                            }
                            inner.insert(format!("k:{}", Value::Object(id)), Value::Object(f));
                        }
                        Value::Object(inner)
                    }
                    ListType::Set => {
                        let mut inner: Map<String, Value> = items
                            .iter()
                            .map(|x| (format!("v:{x}"), json!({})))
                            .collect();
                        inner.insert(".".into(), json!({}));
                        Value::Object(inner)
                    }
                    _ => json!({}),
                }
            }
            _ => json!({}),
        };
        out.insert(format!("f:{k}"), entry);
    }
    out
}

/// The FieldsV1 set a written object (or patch) claims. Main-resource writes never own
/// `status`; status writes own only `status`.
pub(crate) fn field_set(obj: &Value, status_only: bool) -> Value {
    let Some(m) = obj.as_object() else {
        return json!({});
    };
    let root = root_ty(obj);
    let mut top = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "status" if !status_only => {}
            "metadata" => {
                if status_only {
                    continue;
                }
                let Some(meta) = v.as_object() else { continue };
                let owned = owned_meta(meta);
                let f = fields_of(&owned, child(root.as_ref(), "metadata"));
                if !f.is_empty() {
                    top.insert("f:metadata".into(), Value::Object(f));
                }
            }
            _ if status_only && k != "status" => {}
            _ => {
                let single: Map<String, Value> = std::iter::once((k.clone(), v.clone())).collect();
                top.extend(fields_of(&single, root.as_ref()));
            }
        }
    }
    Value::Object(top)
}

pub(super) fn owned_meta(meta: &Map<String, Value>) -> Map<String, Value> {
    meta.iter()
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences" | "generateName"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The part of an object a manager can own: `status` only for status writes, else
/// everything but `status`, `kind`, `apiVersion` and server-owned metadata.
pub(super) fn project(obj: &Value, status_only: bool) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(m) = obj.as_object() else {
        return out;
    };
    for (k, v) in m {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "status" if status_only => {
                out.insert(k.clone(), v.clone());
            }
            _ if status_only => {}
            "status" => {}
            "metadata" => {
                if let Some(meta) = v.as_object() {
                    out.insert(k.clone(), Value::Object(owned_meta(meta)));
                }
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// The fields (FieldsV1 form) whose values differ between `old` and `new`.
pub(super) fn changed(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    ty: Option<&Ty>,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, nv) in new {
        let ov = old.get(k);
        if ov == Some(nv) || nv.is_null() {
            continue;
        }
        match (ov, nv) {
            (Some(Value::Object(om)), Value::Object(nm)) if !nm.is_empty() && !atomic(ty, k) => {
                let mut sub = changed(om, nm, child(ty, k));
                if sub.is_empty() {
                    continue;
                }
                if free_form_map(k) {
                    sub.insert(".".into(), json!({}));
                }
                out.insert(format!("f:{k}"), Value::Object(sub));
            }
            _ => {
                let single: Map<String, Value> = std::iter::once((k.clone(), nv.clone())).collect();
                out.extend(fields_of(&single, ty));
            }
        }
    }
    out
}

/// `a ∩ b` on field trees.
pub(super) fn intersect(a: &Value, b: &Value) -> Option<Value> {
    let (Value::Object(am), Value::Object(bm)) = (a, b) else {
        return None;
    };
    if am.is_empty() {
        return Some(json!({}));
    }
    let mut out = Map::new();
    for (k, av) in am {
        if let Some(bv) = bm.get(k)
            && let Some(x) = intersect(av, bv)
        {
            out.insert(k.clone(), x);
        }
    }
    let meaningful = out.keys().any(|k| k != ".");
    meaningful.then_some(Value::Object(out))
}

/// `a − b`: drops from `a` the leaves of `b`.
pub(super) fn subtract(a: &mut Value, b: &Value) {
    let (Value::Object(am), Value::Object(bm)) = (a, b) else {
        return;
    };
    for (k, bv) in bm {
        if k == "." {
            continue;
        }
        let remove = match am.get_mut(k) {
            None => false,
            Some(av) => {
                if bv.as_object().is_some_and(Map::is_empty) {
                    true
                } else {
                    subtract(av, bv);
                    av.as_object().is_some_and(|m| m.keys().all(|x| x == "."))
                }
            }
        };
        if remove {
            am.remove(k);
        }
    }
}

/// Removes the `.` markers of maps (not of list items).
pub(super) fn strip_map_markers(v: &mut Value) {
    if let Value::Object(m) = v {
        for (k, child) in m.iter_mut() {
            if let Value::Object(cm) = child
                && k.starts_with("f:")
            {
                cm.remove(".");
            }
            strip_map_markers(child);
        }
    }
}

pub(super) fn union(a: &mut Value, b: &Value) {
    if let (Value::Object(am), Value::Object(bm)) = (a, b) {
        for (k, bv) in bm {
            match am.get_mut(k) {
                Some(av) => union(av, bv),
                None => {
                    am.insert(k.clone(), bv.clone());
                }
            }
        }
    }
}
