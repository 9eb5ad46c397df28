//! `metadata.managedFields`, approximated: each write records which fields its manager set
//! (FieldsV1), one entry per (manager, operation).
//!
//! The field set follows kube-apiserver's encoding: `f:<field>` for fields, `k:{...}` for
//! items of lists of type `map`, `v:<value>` for members of lists of type `set`, and `.`
//! marking maps with free-form keys (labels, data, ...) and list items. List types and map
//! keys come from the recorded OpenAPI schema of built-in kinds ([`crate::schema`]:
//! `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, and the v3 `default` of a key
//! field an item leaves out), as structured-merge-diff takes them; other lists are atomic,
//! and so are all lists of custom resources for now (their CRD schema's list types are not
//! read). Which maps are free-form is still decided by field name. The field sets themselves
//! are `fieldset.rs`'s; this file keeps the entries per manager and finds apply conflicts.

use http::HeaderMap;
use serde_json::{Map, Value, json};

pub(crate) use super::fieldset::field_set;
use super::fieldset::{changed, intersect, project, strip_map_markers, subtract, union};
pub(crate) use super::list_keys::default_item_keys;
use super::list_keys::root_ty;

/// Who writes, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manager {
    /// The field manager name.
    pub(crate) name: String,
    /// `Update` or `Apply`.
    pub(crate) operation: &'static str,
}

impl Manager {
    /// `?fieldManager=` or the User-Agent up to its first `/`, as kube-apiserver derives it.
    pub(crate) fn from_request(
        field_manager: Option<&str>,
        headers: &HeaderMap,
        operation: &'static str,
    ) -> Self {
        let name = field_manager
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                headers
                    .get(http::header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .map(|ua| ua.split('/').next().unwrap_or(ua).to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Self { name, operation }
    }

    /// The manager of writes made through the Rust handle.
    pub(crate) fn handle() -> Self {
        Self {
            name: "kcache".to_owned(),
            operation: "Update",
        }
    }
}

/// How a write changes the managed fields.
#[derive(Debug, Clone)]
pub(crate) enum FieldsChange {
    /// The manager owns exactly these fields (create, apply).
    Set(Manager, Value),
    /// An update by this manager: it keeps what it owned and still exists, and takes
    /// over every field the write changed (PUT and patches).
    Update(Manager),
}

/// The objects before and after an update, for [`FieldsChange::Update`].
pub(crate) struct Transition<'a> {
    /// The stored object before the write.
    pub(crate) old: &'a Value,
    /// The object about to be stored.
    pub(crate) new: &'a Value,
    /// Whether this is a `status` subresource write.
    pub(crate) status_only: bool,
}

/// The managedFields after a write. `sent` is what the request carried: a value that
/// differs from the current one is taken as is, as kube-apiserver does.
pub(crate) fn updated(
    current: Option<&Value>,
    sent: Option<&Value>,
    change: &FieldsChange,
    transition: Option<&Transition<'_>>,
    api_version: &str,
    now: &str,
) -> Option<Value> {
    if let Some(s) = sent
        && s.as_array().is_some_and(|a| !a.is_empty())
        && Some(s) != current
    {
        return Some(s.clone());
    }
    let mut entries: Vec<Value> = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (manager, fields) = match (change, transition) {
        (FieldsChange::Update(_), None) => return current.cloned(),
        (FieldsChange::Set(m, f), _) => {
            let mut f = f.clone();
            if m.operation == "Apply" {
                // Applied configurations own fields, not whole maps.
                strip_map_markers(&mut f);
                for e in &mut entries {
                    if !(e["manager"] == m.name.as_str() && e["operation"] == m.operation) {
                        subtract(&mut e["fieldsV1"], &f);
                    }
                }
                entries.retain(|e| e["fieldsV1"].as_object().is_some_and(|x| !x.is_empty()));
            }
            (m, f)
        }
        (FieldsChange::Update(m), Some(t)) => {
            let now_fields = field_set(t.new, t.status_only);
            let delta = Value::Object(changed(
                &project(t.old, t.status_only),
                &project(t.new, t.status_only),
                root_ty(t.new).as_ref(),
            ));
            // Everyone keeps only fields that still exist; the writer takes the changes.
            for e in &mut entries {
                let kept = intersect(&e["fieldsV1"], &now_fields).unwrap_or_else(|| json!({}));
                e["fieldsV1"] = kept;
                if !(e["manager"] == m.name.as_str() && e["operation"] == m.operation) {
                    subtract(&mut e["fieldsV1"], &delta);
                }
            }
            let mut mine = entries
                .iter()
                .find(|e| e["manager"] == m.name.as_str() && e["operation"] == m.operation)
                .map_or_else(|| json!({}), |e| e["fieldsV1"].clone());
            union(&mut mine, &delta);
            entries.retain(|e| e["fieldsV1"].as_object().is_some_and(|f| !f.is_empty()));
            (m, mine)
        }
    };
    let same =
        |e: &Value| e["manager"] == manager.name.as_str() && e["operation"] == manager.operation;
    entries.retain(|e| !same(e));
    if fields.as_object().is_some_and(|m| !m.is_empty()) {
        entries.push(json!({
            "manager": manager.name, "operation": manager.operation, "apiVersion": api_version,
            "time": now, "fieldsType": "FieldsV1", "fieldsV1": fields,
        }));
    }
    // Apply entries come first, as kube-apiserver orders them.
    entries.sort_by_key(|e| e["operation"] != "Apply");
    (!entries.is_empty()).then_some(Value::Array(entries))
}

/// Server-side apply's release of fields: what `manager` applied before (`managedFields`
/// of `obj`, its `Apply` entry for this subresource) and no longer applies (`now`, the new
/// applied configuration's field set) is removed from `obj`, unless another manager owns it.
pub(crate) fn release_unapplied(obj: &mut Value, manager: &str, status_only: bool, now: &Value) {
    let entries = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_status = |e: &Value| e.get("subresource").and_then(Value::as_str) == Some("status");
    let mut prev = Map::new();
    let mut others = json!({});
    for e in &entries {
        let fields = e
            .get("fieldsV1")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mine = e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && is_status(e) == status_only;
        if mine {
            prev = fields;
        } else {
            union(&mut others, &Value::Object(fields));
        }
    }
    let now = now.as_object().cloned().unwrap_or_default();
    let others = others.as_object().cloned().unwrap_or_default();
    release(obj, &prev, &now, &others);
}

fn release(
    obj: &mut Value,
    prev: &Map<String, Value>,
    now: &Map<String, Value>,
    others: &Map<String, Value>,
) {
    let empty = Map::new();
    let sub = |m: &Map<String, Value>, k: &str| -> Option<Map<String, Value>> {
        m.get(k).map(|v| v.as_object().cloned().unwrap_or_default())
    };
    for (key, prev_sub) in prev {
        if key == "." {
            continue;
        }
        let prev_sub = prev_sub.as_object().unwrap_or(&empty);
        match (sub(now, key), sub(others, key)) {
            (Some(n), o) => {
                if let Some(child) = locate(obj, key) {
                    release(child, prev_sub, &n, &o.unwrap_or_default());
                }
            }
            (None, Some(o)) => {
                if let Some(child) = locate(obj, key) {
                    release(child, prev_sub, &empty, &o);
                }
            }
            (None, None) => remove(obj, key),
        }
    }
}

/// One server-side apply conflict: the other manager, as kube-apiserver prints it, and the
/// field path (`.data.x`, `.spec.containers[name="a"].image`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Conflict {
    /// `"name"`, `"name" with subresource "status"`, `"name" using v1` (an Update).
    pub(crate) manager: String,
    /// The field's path.
    pub(crate) path: String,
}

/// The fields `now` (the applied configuration's field set) sets to a value other than the
/// current one in `cur` while another manager owns them: server-side apply's conflicts.
pub(crate) fn apply_conflicts(
    cur: &Value,
    applied: &Value,
    manager: &str,
    status_only: bool,
    now: &Value,
) -> Vec<Conflict> {
    let entries = cur
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let api_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let empty = Map::new();
    let now = now.as_object().unwrap_or(&empty);
    let mut out = Vec::new();
    for e in &entries {
        let name = e.get("manager").and_then(Value::as_str).unwrap_or("");
        let operation = e.get("operation").and_then(Value::as_str).unwrap_or("");
        let sub = e.get("subresource").and_then(Value::as_str).unwrap_or("");
        if name == manager && operation == "Apply" && (sub == "status") == status_only {
            continue;
        }
        let mut printed = format!("{name:?}");
        if !sub.is_empty() {
            printed.push_str(&format!(" with subresource {sub:?}"));
        }
        if operation == "Update" {
            let v = e
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or(api_version);
            printed.push_str(&format!(" using {v}"));
        }
        let owned = e
            .get("fieldsV1")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut paths = Vec::new();
        conflicts_in(now, owned, Some(cur), Some(applied), "", &mut paths);
        out.extend(paths.into_iter().map(|path| Conflict {
            manager: printed.clone(),
            path,
        }));
    }
    out.sort();
    out
}

fn is_leaf(m: &Map<String, Value>) -> bool {
    m.keys().all(|k| k == ".")
}

/// A FieldsV1 key as a path element: `f:x` → `.x`, `k:{"name":"a"}` → `[name="a"]`,
/// `v:"x"` → `[="x"]`.
fn path_element(key: &str) -> String {
    if let Some(f) = key.strip_prefix("f:") {
        return format!(".{f}");
    }
    if let Some(k) = key.strip_prefix("k:") {
        let m: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
        let mut parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.sort();
        return format!("[{}]", parts.join(","));
    }
    if let Some(v) = key.strip_prefix("v:") {
        return format!("[={v}]");
    }
    key.to_owned()
}

fn conflicts_in(
    now: &Map<String, Value>,
    owned: &Map<String, Value>,
    cur: Option<&Value>,
    applied: Option<&Value>,
    path: &str,
    out: &mut Vec<String>,
) {
    let empty = Map::new();
    for (key, n) in now {
        if key == "." {
            continue;
        }
        let Some(o) = owned.get(key) else {
            continue;
        };
        let (n, o) = (
            n.as_object().unwrap_or(&empty),
            o.as_object().unwrap_or(&empty),
        );
        let (c, a) = (
            cur.and_then(|c| locate_ref(c, key)),
            applied.and_then(|a| locate_ref(a, key)),
        );
        let at = format!("{path}{}", path_element(key));
        if is_leaf(n) || is_leaf(o) {
            // A map is never a conflict itself, only its fields: owning an empty `.spec` (a
            // create with `spec: {}`) does not conflict with an apply of fields inside it, as
            // structured-merge-diff compares maps member by member.
            let maps = c.is_some_and(Value::is_object) && a.is_some_and(Value::is_object);
            if !maps && !key.starts_with("v:") && c != a {
                out.push(at);
            }
        } else {
            conflicts_in(n, o, c, a, &at, out);
        }
    }
}

fn locate_ref<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    if let Some(name) = key.strip_prefix("f:") {
        return obj.get(name);
    }
    let items = obj.as_array()?;
    if let Some(k) = key.strip_prefix("k:") {
        let k: Map<String, Value> = serde_json::from_str(k).ok()?;
        return items.iter().find(|i| keyed(i, &k));
    }
    if let Some(v) = key.strip_prefix("v:") {
        let v: Value = serde_json::from_str(v).ok()?;
        return items.iter().find(|i| **i == v);
    }
    None
}

/// Whether list item `item` is the one a `k:{...}` key names.
fn keyed(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| item.get(k) == Some(v))
}

fn locate<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    if let Some(name) = key.strip_prefix("f:") {
        return obj.get_mut(name);
    }
    let items = obj.as_array_mut()?;
    if let Some(k) = key.strip_prefix("k:") {
        let k: Map<String, Value> = serde_json::from_str(k).ok()?;
        return items.iter_mut().find(|i| keyed(i, &k));
    }
    if let Some(v) = key.strip_prefix("v:") {
        let v: Value = serde_json::from_str(v).ok()?;
        return items.iter_mut().find(|i| **i == v);
    }
    None
}

fn remove(obj: &mut Value, key: &str) {
    if let Some(name) = key.strip_prefix("f:") {
        if let Some(m) = obj.as_object_mut() {
            m.remove(name);
        }
        return;
    }
    let Some(items) = obj.as_array_mut() else {
        return;
    };
    if let Some(k) = key.strip_prefix("k:")
        && let Ok(k) = serde_json::from_str::<Map<String, Value>>(k)
    {
        items.retain(|i| !keyed(i, &k));
    } else if let Some(v) = key.strip_prefix("v:")
        && let Ok(v) = serde_json::from_str::<Value>(v)
    {
        items.retain(|i| *i != v);
    }
}

#[cfg(test)]
#[path = "managed_tests.rs"]
mod tests;
