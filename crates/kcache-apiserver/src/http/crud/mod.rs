//! get / create / update / patch / delete of single objects, with the server-set
//! metadata (uid, creationTimestamp, generation, resourceVersion), optimistic
//! concurrency, finalizers and deletionTimestamp.
//!
//! This module has GET and the helpers every handler uses; `write.rs` the write path that
//! POST, PUT and PATCH share (typed query parameters, body decoding and checks, the answer),
//! `patch.rs` PATCH and server-side apply, `subresources.rs` and `token.rs` the action
//! subresources and create-only kinds; the stored-object side of create and update (also used
//! by apply and the Rust handle) is the registry's (`registry/object.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use serde_json::json;

use super::list::wait_for_rv;
use super::negotiate::{Output, output};
use super::params::parse_rv;
use super::table::{IncludeObject, partial_metadata, table};
use super::{AppState, Target, bytes_response, json_response};
use crate::object::StoredObject;
use crate::resource::ResourceInfo;
use crate::status::ApiError;

mod patch;
mod scale;
mod subresources;
mod token;
mod write;

pub(crate) use crate::registry::{create_object, get_object, update_object};
pub(crate) use crate::registry::{meta_mut, now_rfc3339};
pub(crate) use patch::patch;
pub(crate) use scale::{get_scale, patch_scale, update_scale};
pub(crate) use subresources::{bind, evict, is_core_binding, is_review, review};
pub(crate) use token::{token, token_identity};
pub(crate) use write::{create, update};

pub(super) fn is_dry_run(query: &HashMap<String, String>) -> bool {
    query.get("dryRun").is_some_and(|v| v == "All")
}

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(w) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
}

fn render_object(
    info: &ResourceInfo,
    obj: &StoredObject,
    code: u16,
    out: Output,
    include_object: Option<&str>,
) -> Response {
    let defaulted = crate::registry::crd::defaulted_on_read(info, obj);
    let obj = defaulted.as_ref().unwrap_or(obj);
    match out {
        Output::Table(api_version) => {
            let include = IncludeObject::parse(include_object);
            let meta = json!({"resourceVersion": obj.rv().to_string()});
            json_response(
                code,
                &table(info, [&Arc::new(obj.clone())], api_version, include, meta),
            )
        }
        Output::Metadata(api_version) => {
            json_response(code, &partial_metadata(&obj.value(), api_version))
        }
        Output::Protobuf => match super::protobuf::encode::object(obj) {
            Ok(b) => bytes_response(code, super::protobuf::CONTENT_TYPE, b),
            Err(e) => super::error_response(&e),
        },
        Output::Json | Output::Discovery => {
            let mut b = obj.json().to_vec();
            b.push(b'\n');
            bytes_response(code, "application/json", Bytes::from(b))
        }
    }
}

/// GET of one object.
pub(crate) async fn get(
    state: &Arc<AppState>,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let out = output(headers, super::protobuf::supports(&target.info))?;
    if let Some(raw) = query.get("resourceVersion").filter(|s| !s.is_empty()) {
        let rv = parse_rv(raw)?;
        if rv > state.store.current_rv() {
            wait_for_rv(state, rv).await?;
        }
    }
    let obj = get_object(state, target)?;
    let include_object = query.get("includeObject").map(String::as_str);
    Ok(render_object(&target.info, &obj, 200, out, include_object))
}
