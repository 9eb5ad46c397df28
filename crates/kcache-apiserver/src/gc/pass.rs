//! One pass of the garbage collector over the objects that have owner references or are being
//! deleted; see the module documentation of `gc` for the rules.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::object::object_key;
use crate::registry::managed::{FieldsChange, Manager};
use crate::registry::propagation::{FOREGROUND, ORPHAN};
use crate::registry::{AppState, Target, delete_object, update_object};
use crate::resource::ResourceInfo;

/// The field manager of the collector's writes, as kube-controller-manager's are recorded.
const MANAGER: &str = "kube-controller-manager";

/// An object the collector looks at.
struct Node {
    info: Arc<ResourceInfo>,
    value: Value,
    uid: String,
    namespace: String,
    name: String,
}

impl Node {
    fn target(&self) -> Target {
        Target {
            info: self.info.clone(),
            namespace: (!self.namespace.is_empty()).then(|| self.namespace.clone()),
            name: Some(self.name.clone()),
            sub: None,
            watch_path: false,
        }
    }

    /// The object as stored now (earlier steps of the pass may have changed it); `None` when
    /// it is gone or was recreated.
    fn latest(&self, state: &AppState) -> Option<Self> {
        let key = object_key(
            Some(self.namespace.as_str()).filter(|_| self.info.namespaced),
            &self.name,
        );
        let value = state.store.get(&self.info.id(), &key)?.value();
        (crate::object::meta_str(&value, "uid") == self.uid).then(|| Self {
            info: self.info.clone(),
            value,
            uid: self.uid.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        })
    }

    fn owner_refs(&self) -> &[Value] {
        self.value
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    fn deleting(&self) -> bool {
        self.value.pointer("/metadata/deletionTimestamp").is_some()
    }

    fn has_finalizer(&self, f: &str) -> bool {
        has_finalizer(&self.value, f)
    }
}

fn has_finalizer(v: &Value, f: &str) -> bool {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x == f))
}

fn ref_uid(r: &Value) -> &str {
    r.get("uid").and_then(Value::as_str).unwrap_or("")
}

/// What an owner reference points at.
enum OwnerState {
    /// The owner exists and is not waiting for its dependents.
    Solid,
    /// Not found, or found with another uid.
    Dangling,
    /// The owner is being deleted in the foreground.
    Waiting,
    /// The kind is not served, or a cluster-scoped dependent names a namespaced kind.
    Unresolvable,
}

/// Runs one pass; returns whether it changed anything (another pass may then have work).
pub(super) fn run(state: &AppState) -> bool {
    let nodes = candidates(state);
    if nodes.is_empty() {
        return false;
    }
    let mut dependents: HashMap<&str, Vec<&Node>> = HashMap::new();
    for n in &nodes {
        for r in n.owner_refs() {
            dependents.entry(ref_uid(r)).or_default().push(n);
        }
    }
    let mut changed = false;
    for n in nodes.iter().filter(|n| n.deleting()) {
        let deps = dependents
            .get(n.uid.as_str())
            .map_or(&[][..], Vec::as_slice);
        changed |= finish_owner(state, n, deps);
    }
    for n in nodes
        .iter()
        .filter(|n| !n.deleting() && !n.owner_refs().is_empty())
    {
        changed |= settle_dependent(state, n, dependents.contains_key(n.uid.as_str()));
    }
    changed
}

/// Every object with owner references or a deletionTimestamp.
fn candidates(state: &AppState) -> Vec<Node> {
    let mut out = Vec::new();
    for info in state.registry.all() {
        for obj in state.store.objects(&info.id()) {
            if !crate::registry::concerns_gc(&obj) {
                continue;
            }
            let value = obj.value();
            let uid = crate::object::meta_str(&value, "uid").to_owned();
            out.push(Node {
                info: info.clone(),
                uid,
                namespace: obj.namespace().to_owned(),
                name: obj.name().to_owned(),
                value,
            });
        }
    }
    out
}

/// An owner being deleted: orphans or waits for its dependents, then drops its GC finalizer.
fn finish_owner(state: &AppState, owner: &Node, deps: &[&Node]) -> bool {
    if owner.has_finalizer(ORPHAN) {
        let mut all = true;
        for d in deps {
            all &= edit(state, d, |v| strip_refs(v, &[owner.uid.as_str()]));
        }
        if all {
            edit(state, owner, |v| remove_finalizer(v, ORPHAN));
        }
        return true;
    }
    if owner.has_finalizer(FOREGROUND) {
        let blocking = deps.iter().any(|d| {
            d.owner_refs().iter().any(|r| {
                ref_uid(r) == owner.uid && r.get("blockOwnerDeletion") == Some(&json!(true))
            })
        });
        if !blocking {
            edit(state, owner, |v| remove_finalizer(v, FOREGROUND));
            return true;
        }
    }
    false
}

/// A dependent not being deleted: deleted when no owner is left, or stripped of the references
/// to gone owners when one is.
fn settle_dependent(state: &AppState, node: &Node, has_dependents: bool) -> bool {
    let Some(node) = node.latest(state) else {
        return false;
    };
    if node.deleting() || node.owner_refs().is_empty() {
        return false;
    }
    let node = &node;
    let mut solid = false;
    let mut gone: Vec<&str> = Vec::new();
    let mut waiting = false;
    for r in node.owner_refs() {
        match classify(state, node, r) {
            OwnerState::Unresolvable => return false,
            OwnerState::Solid => solid = true,
            OwnerState::Dangling => gone.push(ref_uid(r)),
            OwnerState::Waiting => {
                waiting = true;
                gone.push(ref_uid(r));
            }
        }
    }
    if solid {
        return !gone.is_empty() && edit(state, node, |v| strip_refs(v, &gone));
    }
    let policy = if waiting && has_dependents {
        "Foreground"
    } else if node.has_finalizer(ORPHAN) {
        "Orphan"
    } else if node.has_finalizer(FOREGROUND) {
        "Foreground"
    } else {
        "Background"
    };
    let opts = json!({"propagationPolicy": policy, "preconditions": {"uid": node.uid}});
    delete_object(state, &node.target(), &opts, false).is_ok()
}

/// Where an owner reference of `node` points.
fn classify(state: &AppState, node: &Node, r: &Value) -> OwnerState {
    let api_version = r.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let mut infos: Vec<Arc<ResourceInfo>> = state
        .registry
        .all()
        .into_iter()
        .filter(|i| i.group == group && i.kind == kind)
        .collect();
    if infos.is_empty() || kind.is_empty() {
        return OwnerState::Unresolvable;
    }
    infos.sort_by_key(|i| i.version != version);
    if infos[0].namespaced && !node.info.namespaced {
        return OwnerState::Unresolvable;
    }
    for info in infos {
        let ns = info.namespaced.then_some(node.namespace.as_str());
        let Some(owner) = state.store.get(&info.id(), &object_key(ns, name)) else {
            continue;
        };
        let v = owner.value();
        if crate::object::meta_str(&v, "uid") != ref_uid(r) {
            continue;
        }
        let waiting =
            v.pointer("/metadata/deletionTimestamp").is_some() && has_finalizer(&v, FOREGROUND);
        return if waiting {
            OwnerState::Waiting
        } else {
            OwnerState::Solid
        };
    }
    OwnerState::Dangling
}

/// Writes `node` changed by `f` (when `f` changes it), conditional on the version read;
/// returns whether the write succeeded (a conflict is retried by the next pass).
fn edit(state: &AppState, node: &Node, f: impl FnOnce(&mut Value) -> bool) -> bool {
    let mut v = node.value.clone();
    if !f(&mut v) {
        return true;
    }
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        // Not sent: the server keeps the recorded managers and adds this one.
        m.remove("managedFields");
    }
    let change = FieldsChange::Update(Manager {
        name: MANAGER.to_owned(),
        operation: "Update",
    });
    update_object(state, &node.target(), v, false, &change).is_ok()
}

/// Removes the owner references with these uids; whether any was removed.
fn strip_refs(v: &mut Value, uids: &[&str]) -> bool {
    let Some(refs) = v
        .pointer_mut("/metadata/ownerReferences")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = refs.len();
    refs.retain(|r| !uids.contains(&ref_uid(r)));
    let removed = refs.len() != before;
    if refs.is_empty()
        && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("ownerReferences");
    }
    removed
}

/// Removes finalizer `f`; whether it was there.
fn remove_finalizer(v: &mut Value, f: &str) -> bool {
    let Some(list) = v
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = list.len();
    list.retain(|x| x != f);
    let removed = list.len() != before;
    if list.is_empty()
        && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("finalizers");
    }
    removed
}
