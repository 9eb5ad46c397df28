//! `list`: pagination with opaque continue tokens, resourceVersion semantics, selectors,
//! and JSON / Table / metadata renderings.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::HeaderValue;
use http::header::CONTENT_TYPE;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::negotiate::Output;
use super::params::{ListParams, RvMatch};
use super::table::{IncludeObject, partial_metadata, table};
use super::{AppState, Target, json_response, protobuf};
use crate::object::StoredObject;
use crate::status::ApiError;
use crate::store::{ListQuery, ReadAt, StoreError};

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

#[derive(Serialize, Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
}

/// Encodes a continue token: base64url (no padding) of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}` like kube-apiserver.
pub(crate) fn encode_token(rv: i64, start: &str) -> String {
    let t = Token {
        v: TOKEN_VERSION.into(),
        rv,
        start: format!("{start}\u{0}"),
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&t).unwrap_or_default())
}

/// Decodes a continue token into (rv, key after which to continue). `rv` is -1 for an
/// inconsistent continuation at the latest state.
pub(crate) fn decode_token(token: &str) -> Result<(i64, String), ApiError> {
    let invalid = |why: String| {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {why}"
        ))
    };
    let raw = URL_SAFE_NO_PAD.decode(token).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(i, _)
            | base64::DecodeError::InvalidLastSymbol(i, _) => i,
            base64::DecodeError::InvalidLength(n) => n.saturating_sub(1),
            base64::DecodeError::InvalidPadding => token.len(),
        };
        invalid(format!("illegal base64 data at input byte {at}"))
    })?;
    let t: Token = serde_json::from_slice(&raw).map_err(|e| invalid(e.to_string()))?;
    if t.v != TOKEN_VERSION {
        return Err(invalid(format!(
            "unsupported continue key version {:?}",
            t.v
        )));
    }
    let start = t.start.strip_suffix('\u{0}').unwrap_or(&t.start);
    let start = start.strip_prefix('/').unwrap_or(start);
    if start.is_empty() || start.split('/').any(|p| p == ".." || p == ".") {
        return Err(invalid("continue key is not valid".into()));
    }
    Ok((t.rv, start.to_owned()))
}

/// Waits (up to the configured time) for the store to reach `rv`; 504 if it does not.
pub(crate) async fn wait_for_rv(state: &AppState, rv: u64) -> Result<(), ApiError> {
    let mut rx = state.store.subscribe_rv();
    let reached = tokio::time::timeout(
        state.config.too_large_rv_wait,
        rx.wait_for(|cur| *cur >= rv),
    )
    .await;
    match reached {
        Ok(Ok(_)) => Ok(()),
        _ => Err(ApiError::too_large_rv(rv, state.store.current_rv())),
    }
}

pub(crate) fn list_meta(rv: u64, cont: Option<&str>, remaining: Option<u64>) -> Value {
    let mut m = Map::new();
    m.insert("resourceVersion".into(), json!(rv.to_string()));
    if let Some(c) = cont {
        m.insert("continue".into(), json!(c));
    }
    if let Some(r) = remaining {
        m.insert("remainingItemCount".into(), json!(r));
    }
    Value::Object(m)
}

/// Handles a list request.
pub(crate) async fn list(
    state: &Arc<AppState>,
    target: &Target,
    p: &ListParams,
    out: Output,
    query: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let id = target.info.id();
    let ns = target.namespace.as_deref();
    let (at, start_after, limit) = if let Some(tok) = &p.continue_token {
        if p.resource_version.as_deref().is_some_and(|rv| rv != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (rv, start) = decode_token(tok)?;
        let at = u64::try_from(rv).map_or(ReadAt::Latest, ReadAt::Exact);
        (at, Some(start), p.limit)
    } else {
        match (p.rv, p.rv_match) {
            (None, _) => (ReadAt::Latest, None, p.limit),
            (Some(0), _) => (ReadAt::Latest, None, None),
            (Some(r), Some(RvMatch::Exact)) => (ReadAt::Exact(r), None, p.limit),
            (Some(r), None) if p.limit.is_some() => (ReadAt::Exact(r), None, p.limit),
            (Some(r), _) => {
                if r > state.store.current_rv() {
                    wait_for_rv(state, r).await?;
                }
                (ReadAt::Latest, None, p.limit)
            }
        }
    };
    if let ReadAt::Exact(r) = at
        && r > state.store.current_rv()
    {
        wait_for_rv(state, r).await?;
    }
    let count_remaining = p.labels.is_empty() && p.fields.is_empty();
    // Only a selector needs the parsed object.
    let filter = |o: &StoredObject| {
        count_remaining || {
            let v = o.value();
            p.labels.matches(&v) && p.fields.matches(&v)
        }
    };
    let q = ListQuery {
        namespace: ns,
        at,
        start_after: start_after.as_deref(),
        limit,
        filter: &filter,
        count_remaining,
    };
    let mut page = match state.store.list(&id, &q) {
        Ok(page) => page,
        Err(StoreError::TooOld { .. }) => {
            return Err(match &start_after {
                Some(start) => ApiError::continue_too_old(encode_token(-1, start)),
                None => ApiError::list_too_old(),
            });
        }
        Err(StoreError::TooLarge { requested, current }) => {
            return Err(ApiError::too_large_rv(requested, current));
        }
    };
    if target
        .info
        .schema
        .as_deref()
        .is_some_and(crate::registry::crd::has_defaults)
    {
        for item in &mut page.items {
            if let Some(d) = crate::registry::crd::defaulted_on_read(&target.info, item) {
                *item = Arc::new(d);
            }
        }
    }
    let token = page
        .continue_after
        .as_deref()
        .map(|k| encode_token(i64::try_from(page.rv).unwrap_or(i64::MAX), &format!("/{k}")));
    if out == Output::Protobuf {
        let meta = protobuf::encode::list_meta(page.rv, token.as_deref(), page.remaining);
        let (api_version, kind) = (
            target.info.api_version(),
            format!("{}List", target.info.kind),
        );
        // A long list is streamed a chunk of items at a time, never built whole.
        let body = if page.items.len() <= CHUNK_ITEMS {
            Body::from(protobuf::encode::list(
                &api_version,
                &kind,
                &meta,
                &page.items,
            )?)
        } else {
            let chunks = protobuf::encode::list_chunks(&api_version, &kind, &meta, &page.items)?;
            Body::from_stream(futures::stream::iter(
                chunks.map(Ok::<_, std::convert::Infallible>),
            ))
        };
        let mut resp = Response::new(body);
        resp.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static(protobuf::CONTENT_TYPE),
        );
        return Ok(resp);
    }
    let meta = list_meta(page.rv, token.as_deref(), page.remaining);
    match out {
        Output::Table(api_version) => {
            let include = IncludeObject::parse(query.get("includeObject").map(String::as_str));
            Ok(json_response(
                200,
                &table(&target.info, &page.items, api_version, include, meta),
            ))
        }
        Output::Metadata(api_version) => {
            let items: Vec<Value> = page
                .items
                .iter()
                .map(|o| partial_metadata(&o.value(), api_version))
                .collect();
            Ok(json_response(
                200,
                &json!({"kind": "PartialObjectMetadataList", "apiVersion": api_version,
                        "metadata": meta, "items": items}),
            ))
        }
        Output::Json | Output::Discovery | Output::Protobuf => Ok(json_list(
            &format!("{}List", target.info.kind),
            &target.info.api_version(),
            &meta,
            page.items,
        )),
    }
}

const CHUNK_ITEMS: usize = 256;

/// Renders a JSON list from pre-serialised items; large lists are streamed in chunks.
pub(crate) fn json_list(
    kind: &str,
    api_version: &str,
    meta: &Value,
    items: Vec<Arc<StoredObject>>,
) -> Response {
    let head = format!(
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
        json!(kind),
        json!(api_version),
        meta
    );
    let total: usize = items.iter().map(|o| o.item_len() + 1).sum();
    let body = if total < 64 * 1024 {
        let mut buf = Vec::with_capacity(head.len() + total + 4);
        buf.extend_from_slice(head.as_bytes());
        for (i, o) in items.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            o.write_item(&mut buf);
        }
        buf.extend_from_slice(b"]}\n");
        Body::from(buf)
    } else {
        let head = Bytes::from(head);
        let n = items.len();
        let chunks = (0..n.div_ceil(CHUNK_ITEMS)).map(move |c| {
            let slice = &items[c * CHUNK_ITEMS..((c + 1) * CHUNK_ITEMS).min(n)];
            let mut buf = Vec::with_capacity(slice.iter().map(|o| o.item_len() + 1).sum());
            for (i, o) in slice.iter().enumerate() {
                if c > 0 || i > 0 {
                    buf.push(b',');
                }
                o.write_item(&mut buf);
            }
            Ok::<_, std::convert::Infallible>(Bytes::from(buf))
        });
        let stream = futures::stream::iter(
            std::iter::once(Ok(head))
                .chain(chunks)
                .chain(std::iter::once(Ok(Bytes::from_static(b"]}\n")))),
        );
        Body::from_stream(stream)
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_has_the_kube_apiserver_format() {
        let t = encode_token(235, "/cm-3");
        assert_eq!(
            t,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjM1LCJzdGFydCI6Ii9jbS0zXHUwMDAwIn0"
        );
        assert_eq!(decode_token(&t).unwrap(), (235, "cm-3".to_owned()));
    }

    #[test]
    fn garbage_continue_token_reports_the_base64_offset() {
        let e = decode_token("not-a-valid-token").unwrap_err();
        assert_eq!(
            e.message,
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 16"
        );
    }
}
