//! Deletion: preconditions, finalizers (deletionTimestamp and waiting for them to clear; the
//! garbage collector's from the propagation policy, see `propagation.rs`), the two-step
//! deletion of pods, namespaces going Terminating and their contents.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{AppState, Target, has_finalizers, now_rfc3339, propagation};
use crate::object::{StoredObject, meta_str};
use crate::status::ApiError;
use crate::store::Mutation;

/// Deletes an object honouring preconditions and finalizers. Returns the last state and
/// whether it is gone (false when finalizers keep it, with deletionTimestamp set).
pub(crate) fn delete_object(
    state: &AppState,
    target: &Target,
    opts: &Value,
    dry_run: bool,
) -> Result<(Arc<StoredObject>, bool), ApiError> {
    let info = &target.info;
    let name = target.name.clone().unwrap_or_default();
    let id = info.id();
    let key = target.key();
    let want_uid = opts.pointer("/preconditions/uid").and_then(Value::as_str);
    let want_rv = opts
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str);
    let is_pod = info.group.is_empty() && info.plural == "pods";
    let is_ns = info.group.is_empty() && info.plural == "namespaces";
    let mut kept = false;
    let mut dry_obj = None;
    let mut mark_then_delete = false;
    let outcome = state.store.mutate(&id, &key, |cur, _| {
        let Some(cur) = cur else {
            return Err(ApiError::not_found(info, &name));
        };
        let cur_value = cur.value();
        let uid = meta_str(&cur_value, "uid");
        if let Some(w) = want_uid
            && w != uid
        {
            return Err(ApiError::uid_conflict(info, &name, w, uid));
        }
        if let Some(w) = want_rv
            && w != cur.rv().to_string()
        {
            return Err(ApiError::rv_precondition_conflict(
                info,
                &name,
                w,
                &cur.rv().to_string(),
            ));
        }
        if dry_run {
            dry_obj = Some(cur.clone());
            return Ok(Mutation::Keep);
        }
        if is_ns {
            // The namespace goes Terminating; its contents are deleted below and the namespace
            // itself by the maintenance tick ([`finalize_namespaces`]), as the namespace
            // controller does.
            if cur_value.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Mutation::Keep);
            }
            let mut v = cur_value.clone();
            v["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            v["status"] = json!({"phase": "Terminating"});
            return Ok(Mutation::Put(v));
        }
        let gc = propagation::deletion_finalizers(info, &cur_value, opts);
        let pending = gc
            .as_ref()
            .map_or_else(|| has_finalizers(&cur_value), |f| !f.is_empty());
        let deleting = cur_value.pointer("/metadata/deletionTimestamp").is_some();
        if deleting && pending {
            // Already deleting: only the garbage collector's finalizers may still change.
            kept = true;
            return Ok(gc.map_or(Mutation::Keep, |f| {
                let mut v = cur_value.clone();
                v["metadata"]["finalizers"] = Value::Array(f);
                Mutation::Put(v)
            }));
        }
        if pending || (is_pod && !deleting) {
            let mut v = cur_value.clone();
            if let Some(f) = gc {
                set_finalizers(&mut v, f);
            }
            v["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if info.tracks_generation {
                let g = v
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                v["metadata"]["generation"] = json!(g + 1);
            }
            kept = pending;
            mark_then_delete = !kept;
            return Ok(Mutation::Put(v));
        }
        Ok(Mutation::Delete)
    })?;
    if let Some(o) = dry_obj {
        return Ok((o, true));
    }
    state.gc.wake();
    let mut last = outcome
        .object
        .ok_or_else(|| ApiError::not_found(info, &name))?;
    if kept {
        return Ok((last, false));
    }
    if is_ns {
        let _ = delete_namespace_contents(state, &name);
        return Ok((last, false));
    }
    if mark_then_delete {
        let out = state.store.mutate::<ApiError>(&id, &key, |cur, _| {
            Ok(if cur.is_some() {
                Mutation::Delete
            } else {
                Mutation::Keep
            })
        })?;
        if let Some(o) = out.object {
            last = o;
        }
    }
    Ok((last, true))
}

/// Sets `metadata.finalizers` of `v`, removing the field when `f` is empty.
fn set_finalizers(v: &mut Value, f: Vec<Value>) {
    if f.is_empty() {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("finalizers");
        }
    } else {
        v["metadata"]["finalizers"] = Value::Array(f);
    }
}

/// How long a deleted namespace stays `Terminating` before it is removed (kube-apiserver's
/// namespace controller takes a few seconds too).
const NAMESPACE_TERMINATION: chrono::TimeDelta = chrono::TimeDelta::seconds(2);

/// Removes the namespaces that have been `Terminating` for [`NAMESPACE_TERMINATION`], hold no
/// `metadata.finalizers` and are empty once anything created in them since is deleted (an
/// object with finalizers keeps its namespace until they are removed); run by the server's
/// maintenance tick.
pub(crate) fn finalize_namespaces(state: &AppState) {
    let Some(info) = state.registry.get("", "v1", "namespaces") else {
        return;
    };
    let id = info.id();
    let now = chrono::Utc::now();
    for key in state.store.keys_with_prefix(&id, "") {
        let Some(ns) = state.store.get(&id, &key) else {
            continue;
        };
        let ns = ns.value();
        let since = ns
            .pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        let Some(since) = since else {
            continue;
        };
        if now.signed_duration_since(since) < NAMESPACE_TERMINATION || has_finalizers(&ns) {
            continue;
        }
        // Objects with finalizers keep the namespace Terminating until they are released.
        if delete_namespace_contents(state, &key) > 0 {
            continue;
        }
        let _ = state.store.mutate::<ApiError>(&id, &key, |cur, _| {
            Ok(if cur.is_some() {
                Mutation::Delete
            } else {
                Mutation::Keep
            })
        });
    }
}

/// Deletes every object in namespace `ns` as a DELETE would (objects with finalizers are only
/// marked with a deletionTimestamp, as the namespace controller leaves them); returns how many
/// objects remain in it.
fn delete_namespace_contents(state: &AppState, ns: &str) -> usize {
    let mut remaining = 0;
    for info in state.registry.all() {
        if !info.namespaced {
            continue;
        }
        let id = info.id();
        for key in state.store.keys_with_prefix(&id, &format!("{ns}/")) {
            let Some(name) = key.split_once('/').map(|(_, n)| n.to_owned()) else {
                continue;
            };
            let t = Target {
                info: info.clone(),
                namespace: Some(ns.to_owned()),
                name: Some(name),
                sub: None,
                watch_path: false,
            };
            // Background, as the namespace controller deletes: no kind's orphaning default
            // may leave a GC finalizer that keeps the namespace.
            let opts = json!({"propagationPolicy": "Background"});
            if !matches!(delete_object(state, &t, &opts, false), Ok((_, true))) {
                remaining += 1;
            }
        }
    }
    remaining
}
