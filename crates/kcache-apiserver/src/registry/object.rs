//! The stored-object side of create and update: server-set metadata, namespace and name
//! checks, optimistic concurrency, generation and managed fields. Shared by POST, PUT, PATCH,
//! apply and the Rust handle.

use std::sync::Arc;

use rand::Rng;
use serde_json::{Value, json};

use super::crd;
use super::managed::{FieldsChange, Manager, Transition, updated as updated_fields};
use super::rules;
use super::validate::{check_kind, check_name, check_type, check_url_name, name_causes};
use super::{AppState, Target};
use super::{has_finalizers, meta_mut, now_rfc3339};
use crate::object::{StoredObject, object_key};
use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};
use crate::store::Mutation;

/// kube-apiserver's longest generated name: 63 characters, of them 5 random.
const MAX_GENERATED_PREFIX: usize = 63 - 5;

/// A name from `prefix` (cut to 58 bytes) and five random characters.
fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut cut = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let prefix = &prefix[..cut];
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Everything of an object except `metadata` and `status` (what bumps generation).
fn spec_part(v: &Value) -> Value {
    let mut m = v.as_object().cloned().unwrap_or_default();
    m.remove("metadata");
    m.remove("status");
    Value::Object(m)
}

/// Equal apart from resourceVersion and managedFields: an update that changes nothing.
fn same_content(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        v
    };
    strip(a) == strip(b)
}

fn namespaces_id(state: &AppState) -> Option<crate::resource::ResourceId> {
    state.registry.get("", "v1", "namespaces").map(|i| i.id())
}

fn ensure_namespace(
    state: &AppState,
    ns: &str,
    info: &crate::resource::ResourceInfo,
    name: &str,
) -> Result<(), ApiError> {
    let Some(ns_id) = namespaces_id(state) else {
        return Ok(());
    };
    if let Some(found) = state.store.get(&ns_id, ns) {
        if found
            .value()
            .pointer("/status/phase")
            .and_then(Value::as_str)
            == Some("Terminating")
        {
            return Err(ApiError::namespace_terminating(info, name, ns));
        }
        return Ok(());
    }
    if state.config.auto_create_namespaces {
        let info = state
            .registry
            .get("", "v1", "namespaces")
            .ok_or_else(ApiError::unknown_resource)?;
        let t = Target {
            info,
            namespace: None,
            name: None,
            sub: None,
            watch_path: false,
        };
        let change = FieldsChange::Set(Manager::handle(), json!({}));
        match create_object(state, &t, json!({"metadata": {"name": ns}}), false, &change) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::namespace_not_found(ns))
}

/// The metadata a status write takes from the written object, as each kind's status strategy
/// in kube-apiserver has it: built-in kinds take labels, annotations, finalizers and owner
/// references (Deployments keep their labels, pods their owner references, APIServices all
/// four, FlowSchemas and PriorityLevelConfigurations their whole metadata); custom resources
/// take none (their status strategy copies the old object and sets only the status).
fn status_metadata(info: &ResourceInfo, sent: Option<&Value>, next: &mut Value) {
    let builtin =
        info.schema.is_none() && crate::resource::table().group_rank(&info.group).is_some();
    if !builtin {
        return;
    }
    let kept: &[&str] = match (info.group.as_str(), info.plural.as_str()) {
        ("apps", "deployments") => &["labels"],
        ("", "pods") => &["ownerReferences"],
        ("apiregistration.k8s.io", "apiservices") => {
            &["labels", "annotations", "finalizers", "ownerReferences"]
        }
        ("flowcontrol.apiserver.k8s.io", _) => return,
        _ => &[],
    };
    let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
        if kept.contains(&k) {
            continue;
        }
        match sent.and_then(|m| m.get(k)).filter(|v| !v.is_null()) {
            Some(v) => {
                meta.insert(k.into(), v.clone());
            }
            None => {
                meta.remove(k);
            }
        }
    }
}

/// What a pod's `ephemeralcontainers` or `resize` subresource writes: the stored pod with only
/// `spec.ephemeralContainers`, or only the containers' `resources` and `resizePolicy`, taken
/// from the written one (metadata and status changes are dropped, as kube-apiserver's
/// `dropNonEphemeralContainerUpdates` / `dropNonResizeUpdates` do). A resize that adds or
/// removes containers keeps the written containers, for the update rules to refuse.
fn pod_spec_update(cur: &Value, sent: &serde_json::Map<String, Value>, view: &str) -> Value {
    let mut v = cur.clone();
    let sent_spec = sent.get("spec").cloned().unwrap_or_else(|| json!({}));
    if !v["spec"].is_object() {
        v["spec"] = json!({});
    }
    if view == "ephemeralcontainers" {
        match sent_spec.get("ephemeralContainers") {
            Some(e) if !e.is_null() => v["spec"]["ephemeralContainers"] = e.clone(),
            _ => {
                if let Some(m) = v["spec"].as_object_mut() {
                    m.remove("ephemeralContainers");
                }
            }
        }
        return v;
    }
    for list in ["containers", "initContainers"] {
        let new = sent_spec.get(list).and_then(Value::as_array);
        let Some(old) = v["spec"].get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        match new {
            Some(new) if new.len() == old.len() => {
                for (o, n) in old.iter_mut().zip(new) {
                    for field in ["resources", "resizePolicy"] {
                        match n.get(field) {
                            Some(x) => o[field] = x.clone(),
                            None => {
                                if let Some(m) = o.as_object_mut() {
                                    m.remove(field);
                                }
                            }
                        }
                    }
                }
            }
            Some(new) => *old = new.clone(),
            None => {}
        }
    }
    v
}

/// The `default` ServiceAccount of a new namespace (kube-controller-manager's service account
/// controller creates it in a cluster).
fn default_service_account(state: &AppState, ns: &str) {
    let Some(info) = state.registry.get("", "v1", "serviceaccounts") else {
        return;
    };
    let t = Target {
        info,
        namespace: Some(ns.to_owned()),
        name: None,
        sub: None,
        watch_path: false,
    };
    let manager = Manager {
        name: "kube-controller-manager".to_owned(),
        operation: "Update",
    };
    let change = FieldsChange::Set(manager, json!({}));
    let sa = json!({"metadata": {"name": "default"}});
    if let Err(e) = create_object(state, &t, sa, false, &change)
        && e.code != 409
    {
        tracing::warn!(namespace = ns, error = %e, "creating the default service account");
    }
}

/// Creates an object (already decoded); shared by POST, apply and the Rust handle.
pub(crate) fn create_object(
    state: &AppState,
    target: &Target,
    value: Value,
    dry_run: bool,
    change: &FieldsChange,
) -> Result<Arc<StoredObject>, ApiError> {
    let info = &target.info;
    let Value::Object(mut obj) = value else {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    };
    check_type(info, &mut obj)?;
    let api_version = info.api_version();
    let meta = meta_mut(&mut obj);
    let sent_fields = meta.remove("managedFields");
    let now = now_rfc3339();
    if let Some(mf) = updated_fields(None, sent_fields.as_ref(), change, None, &api_version, &now) {
        meta.insert("managedFields".into(), mf);
    }
    if info.namespaced {
        let url_ns = target.namespace.clone().unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != url_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(url_ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    let mut name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if name.is_empty() {
        let prefix = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let prefix = prefix.as_str();
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                info,
                "",
                vec![Cause::new(
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                    "metadata.name",
                )],
            ));
        }
        name = generate_name(prefix);
        meta.insert("name".into(), json!(name));
        // The prefix is validated as a name with one trailing '-' allowed; the generated name
        // is validated too, and both are reported together.
        let masked = prefix.strip_suffix('-').unwrap_or(prefix);
        let mut causes: Vec<Cause> = name_causes(info, masked)
            .into_iter()
            .map(|mut c| {
                c.field = "metadata.generateName".into();
                c.message =
                    c.message
                        .replacen(&format!("\"{masked}\""), &format!("\"{prefix}\""), 1);
                c
            })
            .collect();
        causes.extend(name_causes(info, &name));
        if !causes.is_empty() {
            return Err(ApiError::invalid(info, &name, causes));
        }
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(k);
    }
    if info.tracks_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    check_name(info, &obj, &name)?;
    check_kind(info, &mut obj)?;
    rules::on_create(info, &mut obj)?;
    if info.group.is_empty() && info.plural == "pods" {
        let status = obj.entry("status").or_insert_with(|| json!({}));
        if status.get("phase").is_none()
            && let Some(s) = status.as_object_mut()
        {
            s.insert("phase".into(), json!("Pending"));
        }
    }
    if info.group.is_empty() && info.plural == "namespaces" {
        obj.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
        obj.insert("status".into(), json!({"phase": "Active"}));
    }
    let ns = target.namespace.as_deref().filter(|_| info.namespaced);
    if let Some(ns) = ns {
        ensure_namespace(state, ns, info, &name)?;
    }
    let value = Value::Object(obj);
    if dry_run {
        return Ok(Arc::new(StoredObject::without_rv(value)));
    }
    let key = object_key(ns, &name);
    let outcome = state.store.mutate(&info.id(), &key, |cur, _| {
        if cur.is_some() {
            return Err(ApiError::already_exists(info, &name));
        }
        Ok(Mutation::Put(value))
    })?;
    let created = outcome
        .object
        .ok_or_else(|| ApiError::internal("create produced no object"))?;
    if crd::is_crd(info) {
        crd::install(state, &created.value());
    }
    if info.group.is_empty() && info.plural == "namespaces" && state.config.default_service_accounts
    {
        default_service_account(state, &name);
    }
    state.gc.wake_for(&created);
    Ok(created)
}

/// Replaces an object with `value`, keeping server-owned metadata; shared by PUT,
/// PATCH and the Rust handle. A `status` subresource target only replaces `.status`.
pub(crate) fn update_object(
    state: &AppState,
    target: &Target,
    value: Value,
    dry_run: bool,
    change: &FieldsChange,
) -> Result<Arc<StoredObject>, ApiError> {
    let info = &target.info;
    let name = target.name.clone().unwrap_or_default();
    let Value::Object(mut obj) = value else {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    };
    check_type(info, &mut obj)?;
    check_kind(info, &mut obj)?;
    if info.namespaced
        && let Some(ns) = obj
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
        && !ns.is_empty()
        && Some(ns) != target.namespace.as_deref()
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    check_url_name(&obj, &name)?;
    let approval = target.sub.as_deref() == Some("approval");
    let pod_spec_view = target
        .sub
        .as_deref()
        .filter(|s| matches!(*s, "ephemeralcontainers" | "resize"));
    let status_only = target.sub.as_deref() == Some("status") || approval;
    let sent_fields = obj
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .cloned();
    let api_version = info.api_version();
    let mut dry_result = None;
    let mut deleted = false;
    let outcome = state.store.mutate(&info.id(), &target.key(), |cur, _| {
        let Some(cur) = cur else {
            return Err(ApiError::not_found(info, &name));
        };
        let cur_value = cur.value();
        let wanted_rv = obj
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        if let Some(rv) = wanted_rv
            && rv != cur.rv().to_string()
        {
            return Err(ApiError::conflict(info, &name));
        }
        let rv_sent = wanted_rv.is_some();
        if wanted_rv.is_none() && !info.unconditional_update {
            return Err(ApiError::invalid_resource(
                info,
                &name,
                vec![Cause::new(
                    "FieldValueInvalid",
                    "Invalid value: 0: must be specified for an update",
                    "metadata.resourceVersion",
                )],
            ));
        }
        let mut next = if let Some(view) = pod_spec_view {
            pod_spec_update(&cur_value, &obj, view)
        } else if approval {
            // The approval subresource writes the conditions and the metadata, nothing else.
            let mut v = cur_value.clone();
            for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
                match obj.get("metadata").and_then(|m| m.get(k)) {
                    Some(x) => v["metadata"][k] = x.clone(),
                    None => {
                        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                            m.remove(k);
                        }
                    }
                }
            }
            if !v["status"].is_object() {
                v["status"] = json!({});
            }
            v["status"]["conditions"] = obj
                .get("status")
                .and_then(|s| s.get("conditions"))
                .cloned()
                .unwrap_or(Value::Null);
            rules::csr_condition_times(&mut v, &now_rfc3339());
            v
        } else if status_only {
            let mut v = cur_value.clone();
            v["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
            status_metadata(info, obj.get("metadata"), &mut v);
            if info.group == "certificates.k8s.io" {
                rules::csr_condition_times(&mut v, &now_rfc3339());
            }
            v
        } else {
            let mut v = Value::Object(obj);
            let cur_meta = cur_value
                .get("metadata")
                .cloned()
                .unwrap_or_else(|| json!({}));
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                for k in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "namespace",
                    "name",
                ] {
                    match cur_meta.get(k) {
                        Some(x) => {
                            m.insert(k.into(), x.clone());
                        }
                        None => {
                            m.remove(k);
                        }
                    }
                }
            } else {
                v["metadata"] = cur_meta;
            }
            let has_status_subresource = info.subresources.iter().any(|s| s == "status");
            let keep_status = has_status_subresource
                || (cur_value.get("status").is_some() && v.get("status").is_none());
            if keep_status {
                // With a status subresource, the main resource cannot change status.
                match cur_value.get("status") {
                    Some(st) => v["status"] = st.clone(),
                    None => {
                        if let Some(m) = v.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            v
        };
        rules::on_update(
            info,
            &cur_value,
            &mut next,
            status_only || pod_spec_view.is_some(),
        )?;
        if info.tracks_generation && spec_part(&next) != spec_part(&cur_value) {
            let g = cur_value
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            next["metadata"]["generation"] = json!(g + 1);
        }
        if same_content(&next, &cur_value) {
            return Ok(Mutation::Keep);
        }
        let cur_fields = cur_value.pointer("/metadata/managedFields");
        let transition = Transition {
            old: &cur_value,
            new: &next,
            status_only,
        };
        let fields = updated_fields(
            cur_fields,
            sent_fields.as_ref(),
            change,
            Some(&transition),
            &api_version,
            &now_rfc3339(),
        );
        if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            match fields {
                Some(f) => m.insert("managedFields".into(), f),
                None => m.remove("managedFields"),
            };
        }
        let finishing =
            next.pointer("/metadata/deletionTimestamp").is_some() && !has_finalizers(&next);
        if dry_run {
            // Not stored: the answer carries the current resourceVersion, as kube-apiserver's.
            dry_result = Some((next, Some(cur.rv())));
            return Ok(Mutation::Keep);
        }
        if finishing {
            // kube-apiserver deletes without writing the update and answers the object of the
            // request, with the resourceVersion it was sent (the current one).
            let sent = rv_sent.then(|| cur.rv());
            deleted = true;
            dry_result = Some((next, sent));
            return Ok(Mutation::Delete);
        }
        Ok(Mutation::Put(next))
    })?;
    if let Some((v, rv)) = dry_result {
        if deleted {
            // Deleted as its last finalizer went: owners may be waiting for it.
            state.gc.wake();
        }
        return Ok(Arc::new(match rv {
            Some(rv) => StoredObject::new(v, rv),
            None => StoredObject::without_rv(v),
        }));
    }
    let updated = outcome
        .object
        .ok_or_else(|| ApiError::not_found(info, &name))?;
    state.gc.wake_for(&updated);
    if crd::is_crd(info) && !status_only {
        crd::install(state, &updated.value());
    }
    Ok(updated)
}
