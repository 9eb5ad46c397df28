//! `meta.k8s.io` Table and PartialObjectMetadata renderings (what kubectl asks for).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::object::StoredObject;
use crate::resource::ResourceInfo;

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating \
resources, although some resources may allow a client to request the generation of an \
appropriate name automatically. Name is primarily intended for creation idempotence and \
configuration definition. Cannot be updated. More info: \
https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when \
this object was created. It is not guaranteed to be set in happens-before order across separate \
operations. Clients may not set this value. It is represented in RFC3339 form and is in \
UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: \
https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn column(name: &str, ty: &str, format: &str, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": 0})
}

fn count_keys(v: &Value, field: &str) -> Value {
    json!(
        v.get(field)
            .and_then(Value::as_object)
            .map_or(0, serde_json::Map::len)
    )
}

/// A kubectl-style age: `42s`, `5m`, `3h`, `2d`.
#[must_use]
pub(crate) fn human_age(obj: &Value) -> String {
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok());
    let Some(created) = created else {
        return "<unknown>".into();
    };
    let secs = (chrono::Utc::now() - created.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Renders the cells of one row.
type CellsFn = fn(&Value) -> Vec<Value>;

fn columns_and_cells(info: &ResourceInfo) -> (Vec<Value>, CellsFn) {
    match info.kind.as_str() {
        "ConfigMap" if info.group.is_empty() => (
            vec![
                column("Name", "string", "name", NAME_DESC),
                column(
                    "Data",
                    "string",
                    "",
                    "Data contains the configuration data.",
                ),
                column("Age", "string", "", AGE_DESC),
            ],
            |o| {
                vec![
                    json!(crate::object::meta_str(o, "name")),
                    count_keys(o, "data"),
                    json!(human_age(o)),
                ]
            },
        ),
        "Secret" if info.group.is_empty() => (
            vec![
                column("Name", "string", "name", NAME_DESC),
                column(
                    "Type",
                    "string",
                    "",
                    "Used to facilitate programmatic handling of secret data.",
                ),
                column("Data", "string", "", "Data contains the secret data."),
                column("Age", "string", "", AGE_DESC),
            ],
            |o| {
                vec![
                    json!(crate::object::meta_str(o, "name")),
                    o.get("type").cloned().unwrap_or_else(|| json!("Opaque")),
                    count_keys(o, "data"),
                    json!(human_age(o)),
                ]
            },
        ),
        "Pod" if info.group.is_empty() => (
            vec![
                column("Name", "string", "name", NAME_DESC),
                column(
                    "Status",
                    "string",
                    "",
                    "The aggregate status of the containers in this pod.",
                ),
                column("Age", "string", "", AGE_DESC),
            ],
            |o| {
                let phase = o
                    .pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or("Pending");
                let phase = if o.pointer("/metadata/deletionTimestamp").is_some() {
                    "Terminating"
                } else {
                    phase
                };
                vec![
                    json!(crate::object::meta_str(o, "name")),
                    json!(phase),
                    json!(human_age(o)),
                ]
            },
        ),
        _ => (
            vec![
                column("Name", "string", "name", NAME_DESC),
                column("Age", "string", "", AGE_DESC),
            ],
            |o| {
                vec![
                    json!(crate::object::meta_str(o, "name")),
                    json!(human_age(o)),
                ]
            },
        ),
    }
}

/// How much of each object a Table row or metadata list carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    /// `includeObject=None`: `object: null`.
    None,
    /// The default: a PartialObjectMetadata.
    Metadata,
    /// `includeObject=Object`: the full object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter.
    #[must_use]
    pub(crate) fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// A PartialObjectMetadata for `obj`.
#[must_use]
pub(crate) fn partial_metadata(obj: &Value, api_version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A Table with one row per object.
#[must_use]
pub(crate) fn table<'a>(
    info: &ResourceInfo,
    objects: impl IntoIterator<Item = &'a Arc<StoredObject>>,
    api_version: &str,
    include: IncludeObject,
    list_meta: Value,
) -> Value {
    let (columns, cells) = columns_and_cells(info);
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|o| {
            let object = match include {
                IncludeObject::None => Value::Null,
                IncludeObject::Metadata => partial_metadata(&o.value(), api_version),
                IncludeObject::Object => o.value().clone(),
            };
            json!({"cells": cells(&o.value()), "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtin_resources;

    #[test]
    fn configmap_table_has_name_data_age_and_one_row_per_object() {
        let info = builtin_resources()
            .into_iter()
            .find(|r| r.plural == "configmaps")
            .unwrap();
        let o = Arc::new(StoredObject::new(
            json!({"metadata": {"name": "a", "creationTimestamp": "2020-01-01T00:00:00Z"}, "data": {"x": "1", "y": "2"}}),
            5,
        ));
        let t = table(
            &info,
            [&o],
            "meta.k8s.io/v1",
            IncludeObject::None,
            json!({}),
        );
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Data", "Age"]);
        assert_eq!(t["rows"][0]["cells"][0], "a");
        assert_eq!(t["rows"][0]["cells"][1], 2);
        assert!(t["rows"][0]["object"].is_null());
    }
}
