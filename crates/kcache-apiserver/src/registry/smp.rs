//! Strategic merge patch for the built-in kinds, driven by the recorded OpenAPI schema
//! ([`crate::schema`]): a list field whose `x-kubernetes-patch-strategy` merges is merged by
//! its `x-kubernetes-patch-merge-key` (`containers` by `name`, container `ports` by
//! `containerPort`, ...) or, for primitives (`finalizers`), as a set; other lists are
//! replaced. The directives kubectl emits are honoured: `$patch` (`replace`, `delete`,
//! `merge`), `$retainKeys`, `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`.

use serde_json::{Map, Value};

use crate::schema::model::{ListType, Model, Ty};

/// Which list rules a merge follows.
#[derive(Clone, Copy)]
struct Cx<'m> {
    model: &'m Model,
    /// Server-side apply's (`x-kubernetes-list-type` and `x-kubernetes-list-map-keys`, as
    /// structured-merge-diff merges an applied configuration), not strategic merge patch's.
    apply: bool,
}

/// Applies `patch` to `target` (both JSON objects), merging by `target`'s kind's schema.
pub(crate) fn apply(target: &mut Value, patch: &Value) {
    merge_root(target, patch, false);
}

/// Merges a server-side apply configuration into `target` (both JSON objects): lists of type
/// `map` by all their `x-kubernetes-list-map-keys` (a Service's ports by port and protocol,
/// where strategic merge patch goes by port alone), lists of type `set` as sets, other lists
/// replaced. `applied`'s items must carry their key fields (see
/// `registry::managed::default_item_keys`).
pub(crate) fn apply_configuration(target: &mut Value, applied: &Value) {
    merge_root(target, applied, true);
}

fn merge_root(target: &mut Value, patch: &Value, apply: bool) {
    let model = crate::schema::model();
    let av = target
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
    let kind = target.get("kind").and_then(Value::as_str).unwrap_or("");
    let root = model.kind(group, version, kind).map(Ty::Struct);
    merge_map(Cx { model, apply }, target, patch, root.as_ref());
}

/// How the list field `k` of a value of type `ty` merges: `Some(keys)` by those keys,
/// `Some([])` as a set, `None` replaced.
fn list_strategy<'m>(cx: Cx<'m>, ty: Option<&Ty>, k: &str) -> Option<Vec<&'m str>> {
    let Some(Ty::Struct(i)) = ty else {
        return None;
    };
    let def = &cx.model.defs[*i];
    if cx.apply {
        return match def.list_types.get(k)? {
            ListType::Map(keys) => Some(keys.iter().map(String::as_str).collect()),
            ListType::Set => Some(Vec::new()),
            ListType::Atomic => None,
        };
    }
    def.merged_lists
        .get(k)
        .map(|key| key.as_deref().into_iter().collect())
}

/// The type of the field `k` of a value of type `ty`.
fn child<'m>(cx: Cx<'m>, ty: Option<&'m Ty>, k: &str) -> Option<&'m Ty> {
    match ty? {
        Ty::Struct(i) => cx.model.defs[*i].fields.get(k),
        Ty::Map(inner) => Some(inner),
        _ => None,
    }
}

/// Whether field `k` of a value of type `ty` is an atomic map or a value of an atomic struct.
fn atomic(cx: Cx<'_>, ty: Option<&Ty>, k: &str) -> bool {
    let Some(Ty::Struct(i)) = ty else {
        return false;
    };
    let def = &cx.model.defs[*i];
    def.atomic_fields.iter().any(|f| f == k)
        || matches!(def.fields.get(k), Some(Ty::Struct(c)) if cx.model.defs[*c].atomic)
}

/// The type of a list's items.
fn items(ty: Option<&Ty>) -> Option<&Ty> {
    match ty? {
        Ty::Array(inner) => Some(inner),
        _ => None,
    }
}

fn merge_map(cx: Cx<'_>, target: &mut Value, patch: &Value, ty: Option<&Ty>) {
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
        let field_ty = child(cx, ty, k);
        match (t.get_mut(k), v) {
            (Some(Value::Array(cur)), Value::Array(patch_items)) => {
                match list_strategy(cx, ty, k) {
                    Some(keys) if !keys.is_empty() => {
                        merge_list(cx, cur, patch_items, &keys, items(field_ty));
                    }
                    Some(_) => {
                        // kube-apiserver's order: the patch's items, then the others kept.
                        let mut merged: Vec<Value> =
                            Vec::with_capacity(cur.len() + patch_items.len());
                        for x in patch_items.iter().chain(cur.iter()) {
                            if !merged.contains(x) {
                                merged.push(x.clone());
                            }
                        }
                        *cur = merged;
                    }
                    None => *cur = patch_items.clone(),
                }
            }
            // An applied atomic struct or map (`x-kubernetes-map-type: atomic`) replaces.
            (Some(cur @ Value::Object(_)), Value::Object(_)) if cx.apply && atomic(cx, ty, k) => {
                *cur = strip_directives(v);
            }
            (Some(cur @ Value::Object(_)), Value::Object(_)) => {
                merge_map(cx, cur, v, field_ty);
                if cur.is_null() {
                    t.remove(k);
                }
            }
            _ => {
                let mut fresh = Value::Null;
                merge_map(cx, &mut fresh, v, field_ty);
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

/// Merges list items by `keys` (an item without them is appended, as strategic merge patch
/// does for one without its merge key), then orders them as kube-apiserver does.
fn merge_list(cx: Cx<'_>, cur: &mut Vec<Value>, items: &[Value], keys: &[&str], ty: Option<&Ty>) {
    let original = cur.clone();
    merge_items(cx, cur, items, keys, ty);
    if cx.apply {
        return;
    }
    let same = |a: &Value, b: &Value| keys.iter().all(|k| a.get(*k) == b.get(*k));
    let patch_at = |v: &Value| items.iter().position(|p| same(p, v));
    let server_at = |v: &Value| original.iter().position(|o| same(o, v));
    let (mut patched, server_only): (Vec<Value>, Vec<Value>) =
        cur.drain(..).partition(|v| patch_at(v).is_some());
    patched.sort_by_key(|v| patch_at(v));
    // A server-only item goes first only when it stood before the patch's item on the server.
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        patched.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                matches!((server_at(l), server_at(r)), (Some(a), Some(b)) if a < b)
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        cur.extend(next);
    }
}

fn merge_items(cx: Cx<'_>, cur: &mut Vec<Value>, items: &[Value], keys: &[&str], ty: Option<&Ty>) {
    for item in items {
        let same = |c: &Value| keys.iter().all(|k| c.get(*k) == item.get(*k));
        let has_key = keys.iter().any(|k| item.get(*k).is_some());
        let pos = has_key.then(|| cur.iter().position(same)).flatten();
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                cur.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => merge_map(cx, &mut cur[i], item, ty),
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
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
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
                {"name": "a", "image": "x:2", "ports": [{"containerPort": 443}, {"containerPort": 80, "name": "http"}]}
            ])
        );
        assert_eq!(pod["metadata"]["finalizers"], json!(["f2", "f1"]));
        assert!(pod["spec"].get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn a_patched_item_comes_before_the_server_items_it_did_not_follow() {
        // kube-apiserver's order: an item the server lacks goes before the server's own
        // items; an item both have keeps its place among them.
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [
            {"port": 80, "name": "http"}, {"port": 81, "name": "b"}]}});
        apply(
            &mut svc,
            &json!({"spec": {"ports": [{"port": 81, "name": "c"}, {"port": 9, "name": "d"}]}}),
        );
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"port": 80, "name": "http"}, {"port": 81, "name": "c"}, {"port": 9, "name": "d"}])
        );
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [
            {"port": 80, "name": "http"}]}});
        apply(
            &mut svc,
            &json!({"spec": {"ports": [{"port": -1, "name": "http"}]}}),
        );
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"port": -1, "name": "http"}, {"port": 80, "name": "http"}])
        );
    }

    #[test]
    fn merge_keys_come_from_the_schema() {
        // A Node's addresses merge by `type` (no hand-written table knew it); a pod's
        // tolerations are atomic (replaced).
        let mut node = json!({"apiVersion": "v1", "kind": "Node", "status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n"}]}});
        apply(
            &mut node,
            &json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}),
        );
        assert_eq!(
            node["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n"}])
        );
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"tolerations": [
            {"key": "a", "operator": "Exists"}]}});
        apply(
            &mut pod,
            &json!({"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}),
        );
        assert_eq!(
            pod["spec"]["tolerations"],
            json!([{"key": "b", "operator": "Exists"}])
        );
    }

    #[test]
    fn an_applied_configuration_replaces_atomic_maps_and_keys_lists_by_all_map_keys() {
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "spec": {
            "selector": {"app": "a", "tier": "x"},
            "ports": [{"port": 53, "protocol": "TCP"}]}});
        apply_configuration(
            &mut svc,
            &json!({"spec": {"selector": {"app": "b"}, "ports": [{"port": 53, "protocol": "UDP"}]}}),
        );
        assert_eq!(svc["spec"]["selector"], json!({"app": "b"}));
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}])
        );
    }

    #[test]
    fn strategic_merge_patch_null_deletes_and_replace_directive_replaces() {
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "data": {"a": "1", "b": "2"}, "spec": {"x": 1, "y": 2}});
        apply(
            &mut o,
            &json!({"data": {"a": null}, "spec": {"$patch": "replace", "z": 3}}),
        );
        assert_eq!(
            o,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "data": {"b": "2"}, "spec": {"z": 3}})
        );
    }
}
