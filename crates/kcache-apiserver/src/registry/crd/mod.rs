//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): a created CRD serves its resource
//! at once — every served version registered (discovery, list/watch, CRUD, the `status`
//! subresource when declared, short names), its custom resources pruned by the version's
//! structural schema, defaulted and validated by it ([`schema`], [`listtype`]) — and gets the
//! status kube-apiserver's apiextensions controllers write (`NamesAccepted`, `Established`,
//! `acceptedNames`, `storedVersions`). Deleting the CRD deletes its custom resources and
//! stops serving it.

pub(crate) mod cel;
mod defaults;
mod formats;
mod gofmt;
mod listtype;
mod prune;
mod schema;

use std::sync::Arc;

use serde_json::{Map, Value, json};

pub(crate) use prune::prune;

use super::AppState;
use crate::resource::{ResourceId, ResourceInfo};
use crate::status::{ApiError, Cause};
use crate::store::Mutation;

/// Prunes the `null`s a custom resource's schema neither allows nor defaults, then applies
/// the schema's defaults (what apiextensions-apiserver does after pruning, on every decode).
pub(crate) fn default(obj: &mut Value, schema: &Value) {
    defaults::prune_nulls(obj, Some(schema));
    defaults::apply(obj, schema);
}

/// Whether a schema declares a `default` anywhere (only then do reads default).
pub(crate) fn has_defaults(schema: &Value) -> bool {
    let Some(m) = schema.as_object() else {
        return false;
    };
    m.get("default").is_some_and(|d| !d.is_null())
        || m.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.values().any(has_defaults))
        || m.get("additionalProperties").is_some_and(has_defaults)
        || m.get("items").is_some_and(has_defaults)
}

/// A stored custom resource as reads serve it: apiextensions-apiserver defaults every object
/// it decodes from storage, so a `default` added to the schema after the object was written
/// shows on GET, LIST and WATCH (the stored bytes keep what was written). `None` when the
/// kind has no defaults or they change nothing.
pub(crate) fn defaulted_on_read(
    info: &ResourceInfo,
    obj: &crate::object::StoredObject,
) -> Option<crate::object::StoredObject> {
    let schema = info.schema.as_deref().filter(|s| has_defaults(s))?;
    let mut v = obj.value();
    let before = v.clone();
    default(&mut v, schema);
    (v != before).then(|| crate::object::StoredObject::new(v, obj.rv()))
}

/// The failures of a custom resource `new` against its schema, as kube-apiserver reports them:
/// the structural schema (ratcheted against `old` on an update), then the list types (on an
/// update only when `old` had no list-type failure). A `/status` write (`status_only`) checks
/// `status` by its own schema, with paths under `status`.
pub(crate) fn schema_causes(
    schema: &Value,
    new: &Value,
    old: Option<&Value>,
    status_only: bool,
) -> Vec<Cause> {
    let mut causes = if status_only {
        match (new.get("status"), schema.pointer("/properties/status")) {
            (Some(status), Some(status_schema)) => schema::validate(
                status_schema,
                status,
                old.and_then(|o| o.get("status")),
                "status",
            ),
            _ => Vec::new(),
        }
    } else {
        schema::validate(schema, new, old, "")
    };
    if old.is_none_or(|o| listtype::validate(schema, o).is_empty()) {
        causes.extend(listtype::validate(schema, new));
    }
    // CEL rules run only on an object without the failures that block them (kube-apiserver's
    // hasBlockingErr); they see the whole object, also on a `/status` write.
    let blocking = causes.iter().any(|c| {
        matches!(
            c.reason.as_str(),
            "FieldValueNotSupported"
                | "FieldValueRequired"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
                | "FieldValueTypeInvalid"
        )
    });
    if !cel::has_rules(schema) {
        return causes;
    }
    if blocking {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            "<nil>",
        ));
    } else {
        causes.extend(cel::validate(schema, new, old, ""));
    }
    causes
}

/// Where a custom resource's `scale` subresource reads and writes (JSON pointers converted
/// from the CRD's `specReplicasPath`, `statusReplicasPath` and `labelSelectorPath`).
#[derive(Debug, Clone)]
pub(crate) struct ScalePaths {
    /// The desired replicas (`/spec/replicas`).
    pub(crate) spec: String,
    /// The observed replicas (`/status/replicas`).
    pub(crate) status: String,
    /// The label selector string, when declared.
    pub(crate) selector: Option<String>,
}

/// A CRD's JSONPath (`.spec.replicas`) as a JSON pointer (`/spec/replicas`).
fn pointer_of(json_path: &str) -> String {
    json_path
        .split('.')
        .filter(|p| !p.is_empty())
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The `scale` subresource of the custom resource type `info`, from its stored CRD.
pub(crate) fn scale_paths(state: &AppState, info: &ResourceInfo) -> Option<ScalePaths> {
    info.schema.as_ref()?;
    let crd_info = state
        .registry
        .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    let crd = state
        .store
        .get(&crd_info.id(), &format!("{}.{}", info.plural, info.group))?
        .value();
    let version = crd
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(info.version.as_str()))?;
    let scale = version.pointer("/subresources/scale")?;
    Some(ScalePaths {
        spec: pointer_of(str_at(scale, "/specReplicasPath")),
        status: pointer_of(str_at(scale, "/statusReplicasPath")),
        selector: scale
            .get("labelSelectorPath")
            .and_then(Value::as_str)
            .map(pointer_of),
    })
}

/// Whether `info` is the CustomResourceDefinition type.
pub(crate) fn is_crd(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions"
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Defaults (`singular`, `listKind`, the conversion strategy) and kube-apiserver's checks of
/// a CRD's names, scope and versions.
pub(crate) fn validate(info: &ResourceInfo, obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    let name = obj
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if !kind.is_empty() {
            names
                .entry("singular")
                .or_insert_with(|| json!(kind.to_ascii_lowercase()));
            names
                .entry("listKind")
                .or_insert_with(|| json!(format!("{kind}List")));
        }
    }
    if let Some(s) = spec.as_object_mut() {
        s.entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
    }
    let spec = &*spec;
    let mut causes = Vec::new();
    let (group, plural) = (str_at(spec, "/group"), str_at(spec, "/names/plural"));
    if name != format!("{plural}.{group}") {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
            "metadata.name",
        ));
    }
    if group.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.group",
        ));
    } else if !group.contains('.') {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
            "spec.group",
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.names.plural",
        ));
    }
    if str_at(spec, "/names/kind").is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.names.kind",
        ));
    }
    match str_at(spec, "/scope") {
        "Namespaced" | "Cluster" => {}
        "" => causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.scope",
        )),
        other => causes.push(Cause::new(
            "FieldValueNotSupported",
            format!(
                "Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\""
            ),
            "spec.scope",
        )),
    }
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "Invalid value: \"null\": must have exactly one version marked as storage version",
            "spec.versions",
        ));
    } else {
        let storage = versions
            .iter()
            .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .count();
        if storage != 1 {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {storage}: must have exactly one version marked as storage version"),
                "spec.versions",
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(info, &name, causes))
    }
}

/// The resource types a CRD serves, one per served version.
fn served(crd: &Value) -> Vec<ResourceInfo> {
    let spec = crd.get("spec").cloned().unwrap_or_default();
    let (group, plural, kind) = (
        str_at(&spec, "/group"),
        str_at(&spec, "/names/plural"),
        str_at(&spec, "/names/kind"),
    );
    let namespaced = str_at(&spec, "/scope") != "Cluster";
    let short: Vec<&str> = spec
        .pointer("/names/shortNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let singular = str_at(&spec, "/names/singular");
    spec.get("versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
        .map(|v| {
            let version = str_at(v, "/name");
            let mut info = if namespaced {
                ResourceInfo::namespaced(group, version, plural, kind)
            } else {
                ResourceInfo::cluster(group, version, plural, kind)
            }
            .with_short_names(&short);
            if !singular.is_empty() {
                info.singular = singular.to_owned();
            }
            if v.pointer("/subresources/status").is_some() {
                info.subresources.push("status".into());
            }
            if v.pointer("/subresources/scale").is_some() {
                info.subresources.push("scale".into());
            }
            info.schema = v.pointer("/schema/openAPIV3Schema").cloned().map(Arc::new);
            info
        })
        .collect()
}

/// Serves what `crd` (as stored) defines, stops serving its versions no longer served, and
/// writes the status the apiextensions controllers write.
pub(crate) fn install(state: &AppState, crd: &Value) {
    let infos = served(crd);
    let (group, plural) = (
        str_at(crd, "/spec/group"),
        str_at(crd, "/spec/names/plural"),
    );
    for old in state.registry.all() {
        if old.group == group
            && old.plural == plural
            && !infos.iter().any(|i| i.version == old.version)
        {
            state.registry.unregister(&old.id());
        }
    }
    for info in infos {
        state.registry.register(info);
    }
    let Some(crd_info) =
        state
            .registry
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    else {
        return;
    };
    let name = str_at(crd, "/metadata/name").to_owned();
    let now = super::now_rfc3339();
    let _ = state.store.mutate::<ApiError>(&crd_info.id(), &name, |cur, _| {
        let Some(cur) = cur else {
            return Ok(Mutation::Keep);
        };
        let mut v = cur.value().clone();
        let names = v.pointer("/spec/names").cloned().unwrap_or_default();
        let storage: Vec<Value> = v
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|x| x.get("storage").and_then(Value::as_bool) == Some(true))
            .filter_map(|x| x.get("name").cloned())
            .collect();
        let mut stored = v
            .pointer("/status/storedVersions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for s in storage {
            if !stored.contains(&s) {
                stored.push(s);
            }
        }
        let status = json!({
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
                 "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": now,
                 "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
            ],
            "storedVersions": stored,
        });
        if v.get("status") == Some(&status) {
            return Ok(Mutation::Keep);
        }
        v["status"] = status;
        Ok(Mutation::Put(v))
    });
}

/// Deletes the custom resources of `crd` and stops serving it.
pub(crate) fn uninstall(state: &AppState, crd: &Value) {
    let (group, plural) = (
        str_at(crd, "/spec/group"),
        str_at(crd, "/spec/names/plural"),
    );
    let ids: Vec<ResourceId> = state
        .registry
        .all()
        .iter()
        .filter(|i| i.group == group && i.plural == plural)
        .map(|i| i.id())
        .collect();
    for id in ids {
        for key in state.store.keys_with_prefix(&id, "") {
            let _ = state
                .store
                .mutate::<ApiError>(&id, &key, |_, _| Ok(Mutation::Delete));
        }
        state.registry.unregister(&id);
    }
}
