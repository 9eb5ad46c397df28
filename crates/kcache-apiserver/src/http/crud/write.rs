//! The write path POST, PUT and PATCH share: the answer's form and the typed query parameters
//! ([`Write::open`]), the body decoded into an object with its kind, apiVersion and fields
//! checked ([`Write::decode_object`]), the field manager, dry run, and the answer with its
//! warnings ([`Write::respond`]).

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use http::HeaderMap;
use serde::Deserialize;
use serde::de::value::{Error as ValueError, MapDeserializer};
use serde_json::{Map, Value};

use super::{create_object, render_object, update_object, with_warnings};
use crate::http::negotiate::{BodyType, Output, body_type, output};
use crate::http::{AppState, Target};
use crate::object::{StoredObject, meta_str};
use crate::registry::managed::{FieldsChange, Manager, field_set};
use crate::registry::validate::{check_type, decode_object, unknown_field_warning, unknown_fields};
use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};

/// The query parameters a write reads (kube-apiserver's `CreateOptions`, `UpdateOptions` and
/// `PatchOptions`); an absent parameter is empty. `force` (apply) is not read: apply here never
/// reports conflicts to force through.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct WriteQuery {
    /// `dryRun`: `All` validates and answers without storing.
    dry_run: String,
    /// `fieldManager`: who owns the written fields (empty: derived from the User-Agent).
    field_manager: String,
    /// `fieldValidation`: `Strict` makes unknown fields an error instead of a warning.
    pub(super) field_validation: String,
    /// `includeObject` of a Table answer.
    include_object: String,
}

impl WriteQuery {
    /// The typed view of a request's query parameters, as axum's `Query` decoded them in
    /// dispatch (a repeated parameter keeps its last value there, so it is read from that map
    /// rather than decoded again, which would refuse the repetition).
    pub(super) fn from_query(query: &HashMap<String, String>) -> Self {
        let pairs = query.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        Self::deserialize(MapDeserializer::<_, ValueError>::new(pairs)).unwrap_or_default()
    }

    /// `dryRun=All`.
    pub(super) fn dry_run(&self) -> bool {
        self.dry_run == "All"
    }

    /// `fieldManager`, if set and not empty.
    pub(super) fn field_manager(&self) -> Option<&str> {
        Some(self.field_manager.as_str()).filter(|m| !m.is_empty())
    }

    /// `fieldValidation=Strict`.
    #[cfg(test)]
    fn strict(&self) -> bool {
        self.field_validation == "Strict"
    }

    /// 422 for a `dryRun` other than `All` or a `fieldValidation` kube-apiserver does not
    /// know, worded for `options` (`CreateOptions`, `UpdateOptions`, `PatchOptions`).
    pub(super) fn check(&self, options: &str) -> Result<(), ApiError> {
        if !self.dry_run.is_empty() && self.dry_run != "All" {
            return Err(ApiError::invalid_options(
                options,
                vec![Cause::new(
                    "FieldValueNotSupported",
                    format!(
                        "Unsupported value: [\"{}\"]: supported values: \"All\"",
                        self.dry_run
                    ),
                    "dryRun",
                )],
            ));
        }
        if !matches!(
            self.field_validation.as_str(),
            "" | "Ignore" | "Warn" | "Strict"
        ) {
            return Err(ApiError::invalid_options(
                options,
                vec![Cause::new(
                    "FieldValueNotSupported",
                    format!(
                        "Unsupported value: \"{}\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                        self.field_validation
                    ),
                    "fieldValidation",
                )],
            ));
        }
        Ok(())
    }

    /// `includeObject`, if set.
    fn include_object(&self) -> Option<&str> {
        Some(self.include_object.as_str()).filter(|v| !v.is_empty())
    }
}

/// One write request's opening: how to answer and what its query asks for.
pub(super) struct Write {
    /// The negotiated form of the answer.
    pub(super) out: Output,
    /// The typed query parameters.
    pub(super) query: WriteQuery,
}

impl Write {
    /// Negotiates the answer's form (406 first, as kube-apiserver) and reads the query.
    pub(super) fn open(
        target: &Target,
        query: &HashMap<String, String>,
        headers: &HeaderMap,
        options: &str,
    ) -> Result<Self, ApiError> {
        let write = Self {
            out: output(headers, crate::object::protobuf::supports(&target.info))?,
            query: WriteQuery::from_query(query),
        };
        write.query.check(options)?;
        Ok(write)
    }

    /// Whether nothing is stored.
    pub(super) fn dry_run(&self) -> bool {
        self.query.dry_run()
    }

    /// The field manager of this write, for `operation` (`Update` or `Apply`).
    pub(super) fn manager(&self, headers: &HeaderMap, operation: &'static str) -> Manager {
        Manager::from_request(self.query.field_manager(), headers, operation)
    }

    /// The body as an object of the target's type: decoded (JSON, YAML or protobuf), its
    /// apiVersion and kind checked, unknown fields dropped with a warning each (an error with
    /// `fieldValidation=Strict`).
    pub(super) fn decode_object(
        &self,
        target: &Target,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(Value, Vec<String>), ApiError> {
        let mut obj = decode_body(target, headers, body)?;
        check_type(&target.info, &mut obj)?;
        let mut warnings = unknown_fields(&target.info, &mut obj, &self.query.field_validation)?;
        if let Some(schema) = &target.info.schema {
            let mut v = Value::Object(obj);
            let pruned = crate::registry::crd::prune(&mut v, schema);
            obj = match v {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            match self.query.field_validation.as_str() {
                "Ignore" => {}
                "Strict" if !pruned.is_empty() => {
                    let list: Vec<String> = pruned
                        .iter()
                        .map(|f| format!("unknown field \"{f}\""))
                        .collect();
                    return Err(ApiError::bad_request(format!(
                        "{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error: {}",
                        target.info.version,
                        list.join(", "),
                        kind = target.info.kind,
                    )));
                }
                _ => warnings.extend(pruned.iter().map(|f| unknown_field_warning(f))),
            }
        }
        Ok((Value::Object(obj), warnings))
    }

    /// The answer: `obj` in the negotiated form with status `code`, one `Warning` header per
    /// warning.
    pub(super) fn respond(
        &self,
        info: &ResourceInfo,
        obj: &StoredObject,
        code: u16,
        warnings: &[String],
    ) -> Response {
        let rendered = render_object(info, obj, code, self.out, self.query.include_object());
        with_warnings(rendered, warnings)
    }
}

fn decode_body(
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Map<String, Value>, ApiError> {
    match body_type(headers) {
        BodyType::Json => decode_object(&target.info, body),
        BodyType::Yaml => decode_yaml(&target.info, body),
        BodyType::Protobuf => crate::object::protobuf::decode::object(body).map_err(|e| match e {
            crate::object::protobuf::ProtoError::Unsupported(_) => ApiError::unsupported_body(),
            e => ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): {e}",
                target.info.kind
            )),
        }),
        _ => Err(ApiError::unsupported_body()),
    }
}

/// A YAML body (JSON is YAML too) as a JSON object.
fn decode_yaml(info: &ResourceInfo, body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if serde_json::from_slice::<Value>(body).is_ok() {
        return decode_object(info, body);
    }
    match serde_saphyr::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; \
             yaml: the document is not a mapping",
            info.kind
        ))),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid YAML");
            Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): couldn't get version/kind; \
                 yaml: {}",
                info.kind,
                first.chars().take(200).collect::<String>()
            )))
        }
    }
}

/// POST: create an object.
pub(crate) fn create(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let write = Write::open(target, query, headers, "CreateOptions")?;
    if target.info.namespaced && target.namespace.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    let (obj, warnings) = write.decode_object(target, headers, body)?;
    let change = FieldsChange::Set(write.manager(headers, "Update"), field_set(&obj, false));
    let created = create_object(state, target, obj, write.dry_run(), &change)?;
    Ok(write.respond(&target.info, &created, 201, &warnings))
}

/// PUT: replace an object (404 if missing, 409 on a stale resourceVersion).
pub(crate) fn update(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let write = Write::open(target, query, headers, "UpdateOptions")?;
    let (obj, warnings) = write.decode_object(target, headers, body)?;
    let url_name = target.name.clone().unwrap_or_default();
    let body_name = meta_str(&obj, "name").to_owned();
    if !body_name.is_empty() && body_name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
        )));
    }
    let change = FieldsChange::Update(write.manager(headers, "Update"));
    let updated = update_object(state, target, obj, write.dry_run(), &change)?;
    Ok(write.respond(&target.info, &updated, 200, &warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> WriteQuery {
        let map = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        WriteQuery::from_query(&map)
    }

    #[test]
    fn write_query_reads_the_camel_case_parameters_and_ignores_the_rest() {
        let q = query(&[
            ("dryRun", "All"),
            ("fieldManager", "kubectl"),
            ("fieldValidation", "Strict"),
            ("includeObject", "None"),
            ("pretty", "true"),
        ]);
        assert!(q.dry_run());
        assert_eq!(q.field_manager(), Some("kubectl"));
        assert!(q.strict());
        assert_eq!(q.include_object(), Some("None"));
    }

    #[test]
    fn absent_or_empty_write_parameters_are_unset() {
        let q = query(&[("fieldManager", ""), ("dryRun", "Some")]);
        assert!(!q.dry_run());
        assert_eq!(q.field_manager(), None);
        assert!(!q.strict());
        assert_eq!(q.include_object(), None);
    }
}
