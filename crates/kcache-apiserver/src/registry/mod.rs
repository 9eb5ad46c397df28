//! The registry layer: the semantics of objects, below `http/` (routing, negotiation,
//! encodings), admission and the garbage collector, and above auth's data types, the
//! versioned store and stored objects, after kube-apiserver's `pkg/registry`.
//!
//! - [`resolve`]: a resource path to the [`Target`] it names;
//! - `object.rs`: create and update with server-set metadata, optimistic concurrency,
//!   generation, status/spec split and managed fields; `delete.rs`: deletion with
//!   preconditions, finalizers and namespace termination; `propagation.rs` the garbage
//!   collector's finalizers a DELETE adds; `gc_trigger.rs` how a write wakes the collector;
//! - `rules.rs` and `apps.rs`: the per-kind strategies (defaults, validation);
//!   `admissionregistration.rs` the webhook configurations'; `validate.rs` names, kinds and
//!   unknown fields; `managed.rs` managedFields (their field sets in `fieldset.rs`); `crd/`
//!   what a CustomResourceDefinition serves; `smp.rs` strategic merge patch by the schema;
//! - `disruption.rs`: the PodDisruptionBudget side of an eviction; `label_selector.rs` a
//!   LabelSelector object's string form.
//!
//! Both the HTTP front and the Rust [`ServerHandle`](crate::ServerHandle) call this layer;
//! it never calls either, nor admission or the collector: what it needs of those is passed
//! in ([`Trigger`]).

pub(crate) mod admissionregistration;
pub(crate) mod apps;
pub(crate) mod crd;
mod defaults;
mod delete;
mod disruption;
mod field_rules;
mod fieldset;
mod gc_trigger;
mod jobs;
mod kinds;
mod label_selector;
mod list_keys;
pub(crate) mod managed;
mod networking;
mod object;
pub(crate) mod propagation;
mod rbac;
pub(crate) mod rules;
pub(crate) mod smp;
mod updates;
pub(crate) mod validate;
pub(crate) mod validation;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::fault::FaultState;
use crate::object::StoredObject;
use crate::resource::{Registry, ResourceInfo};
use crate::status::ApiError;
use crate::store::Store;

pub(crate) use delete::{delete_object, finalize_namespaces};
pub(crate) use disruption::check_disruption_budgets;
pub(crate) use gc_trigger::{Trigger, concerns_gc};
pub(crate) use label_selector::selector_string;
pub(crate) use object::{create_object, update_object};

/// Everything a request handler needs.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) store: Store,
    pub(crate) registry: Registry,
    pub(crate) config: ServerConfig,
    pub(crate) faults: Arc<FaultState>,
    pub(crate) shutdown: CancellationToken,
    /// The service account tokens issued by `serviceaccounts/token`, accepted as bearer tokens.
    pub(crate) tokens: parking_lot::Mutex<HashMap<String, IssuedToken>>,
    /// Wakes the garbage collector after writes that may concern it.
    pub(crate) gc: Trigger,
    /// The token table and the RBAC snapshot.
    pub(crate) auth: crate::auth::AuthState,
}

impl AppState {
    /// What the authorizer reads of this state.
    pub(crate) fn authz(&self) -> crate::auth::Authz<'_> {
        crate::auth::Authz {
            store: &self.store,
            auth: &self.auth,
            enabled: self.config.authorization,
        }
    }
}

/// Where a resource request points.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) info: Arc<ResourceInfo>,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<String>,
    pub(crate) watch_path: bool,
}

impl Target {
    /// Storage key of the named object.
    pub(crate) fn key(&self) -> String {
        crate::object::object_key(
            self.namespace.as_deref().filter(|_| self.info.namespaced),
            self.name.as_deref().unwrap_or(""),
        )
    }
}

/// The object or collection a resource path names under `group/version` (`rest`: what follows
/// `/api/<version>/` or `/apis/<group>/<version>/`, with an optional leading `watch`); `None`
/// for a resource or subresource that is not served.
pub(crate) fn resolve(
    registry: &Registry,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Option<Target> {
    let (watch_path, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let lookup = |plural: &str| registry.get(group, version, plural);
    let target =
        |info: Arc<ResourceInfo>, ns: Option<&str>, name: Option<&str>, sub: Option<&str>| {
            if sub.is_some_and(|s| !info.subresources.iter().any(|known| known == s)) {
                return None;
            }
            Some(Target {
                info,
                namespace: ns.map(str::to_owned),
                name: name.map(str::to_owned),
                sub: sub.map(str::to_owned),
                watch_path,
            })
        };
    let ns_info = lookup("namespaces").filter(|_| group.is_empty());
    match rest {
        ["namespaces", ns, "status" | "finalize"] if ns_info.is_some() => {
            let sub = rest[2];
            ns_info.and_then(|i| target(i, None, Some(ns), Some(sub)))
        }
        ["namespaces", ns, plural, tail @ ..] if tail.len() <= 2 => match lookup(plural) {
            Some(info) if info.namespaced => {
                target(info, Some(ns), tail.first().copied(), tail.get(1).copied())
            }
            _ => None,
        },
        [plural, tail @ ..] if tail.len() <= 2 => match lookup(plural) {
            Some(info) if info.namespaced && tail.is_empty() => target(info, None, None, None),
            Some(info) if !info.namespaced => {
                target(info, None, tail.first().copied(), tail.get(1).copied())
            }
            _ => None,
        },
        _ => None,
    }
}

/// The object or collection a REST path (`/api/v1/namespaces/default/configmaps`,
/// `/apis/apps/v1/...`) names; `None` when it names no served resource.
pub(crate) fn resolve_path(registry: &Registry, path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    if rest.is_empty() || !registry.has_group_version(group, version) {
        return None;
    }
    resolve(registry, group, version, rest)
}

/// Now, as kube-apiserver writes timestamps (RFC 3339, seconds).
pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The `metadata` map of `obj`, created when missing.
pub(crate) fn meta_mut(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let m = obj.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut()
        .unwrap_or_else(|| unreachable!("metadata was just made an object"))
}

/// Whether `v` holds finalizers.
pub(crate) fn has_finalizers(v: &Value) -> bool {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// The current object a target names, or 404.
pub(crate) fn get_object(state: &AppState, target: &Target) -> Result<Arc<StoredObject>, ApiError> {
    let name = target.name.as_deref().unwrap_or("");
    state
        .store
        .get(&target.info.id(), &target.key())
        .ok_or_else(|| ApiError::not_found(&target.info, name))
}

/// A service account token this server issued (`serviceaccounts/token`).
#[derive(Debug, Clone)]
pub(crate) struct IssuedToken {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) audiences: Vec<String>,
    pub(crate) expires: i64,
    /// The token's `jti` claim (the credential id kube-apiserver reports as an extra).
    pub(crate) jti: String,
}
