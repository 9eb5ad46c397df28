//! The HTTP requests of a [`HttpListerWatcher`]: list and watch URLs with its selectors (and
//! the shard selector), `Accept` headers for JSON or metadata-only answers.

use std::fmt;

use http::HeaderValue;
use kcache::{
    lister_watcher::{Error, ListParams, WatchParams},
    sharding::Current,
};

use super::{ACCEPT_JSON, ACCEPT_METADATA, ACCEPT_METADATA_LIST, HttpListerWatcher};

impl<K, D> HttpListerWatcher<K, D> {
    pub(super) fn list_request(
        &self,
        params: &ListParams,
        shard: Option<&Current>,
    ) -> Result<http::Request<Vec<u8>>, Error> {
        let mut params = params.clone();
        if params.label_selector.is_none() {
            params.label_selector.clone_from(&self.label_selector);
        }
        if params.field_selector.is_none() {
            params.field_selector.clone_from(&self.field_selector);
        }
        let mut req = self.request.list(&params).map_err(build_error)?;
        // kube-core omits `resourceVersion=0` when a limit is set; client-go sends both (the
        // server then answers from its watch cache and ignores the limit). Send what client-go
        // sends, so that the reflector's first list is served from the cache.
        if params.continue_token.is_none()
            && params.limit.is_some()
            && params.resource_version.as_deref() == Some("0")
        {
            let mut uri = format!("{}&resourceVersion=0", req.uri());
            match params.version_match {
                Some(kcache::lister_watcher::VersionMatch::NotOlderThan) => {
                    uri.push_str("&resourceVersionMatch=NotOlderThan");
                }
                Some(kcache::lister_watcher::VersionMatch::Exact) | None => {}
            }
            *req.uri_mut() = uri.parse().map_err(|e| build_error(format!("{e}")))?;
        }
        add_shard_selector(&mut req, shard)?;
        let accept = if self.metadata_only {
            ACCEPT_METADATA_LIST
        } else {
            ACCEPT_JSON
        };
        req.headers_mut()
            .insert(http::header::ACCEPT, HeaderValue::from_static(accept));
        Ok(req)
    }

    pub(super) fn watch_request(
        &self,
        params: &WatchParams,
        resource_version: &str,
        shard: Option<&Current>,
    ) -> Result<http::Request<Vec<u8>>, Error> {
        let mut params = params.clone();
        if params.label_selector.is_none() {
            params.label_selector.clone_from(&self.label_selector);
        }
        if params.field_selector.is_none() {
            params.field_selector.clone_from(&self.field_selector);
        }
        let mut req = self
            .request
            .watch(&params, resource_version)
            .map_err(build_error)?;
        add_shard_selector(&mut req, shard)?;
        let accept = if self.metadata_only {
            ACCEPT_METADATA
        } else {
            ACCEPT_JSON
        };
        req.headers_mut()
            .insert(http::header::ACCEPT, HeaderValue::from_static(accept));
        if params.send_initial_events {
            // kube-apiserver 1.37+ compresses a streaming list that asks for it
            // (`WatchListCompression`, on by default); older servers ignore the header.
            req.headers_mut().insert(
                http::header::ACCEPT_ENCODING,
                HeaderValue::from_static("gzip"),
            );
        }
        Ok(req)
    }
}

/// Appends `shardSelector=<the selector's wire form>` to a request's query.
fn add_shard_selector(
    req: &mut http::Request<Vec<u8>>,
    shard: Option<&Current>,
) -> Result<(), Error> {
    let Some(selector) = shard.and_then(|c| c.selector.as_deref()) else {
        return Ok(());
    };
    let value: String = form_urlencoded::byte_serialize(selector.to_wire().as_bytes()).collect();
    let uri = req.uri().to_string();
    let sep = if uri.contains('?') { '&' } else { '?' };
    *req.uri_mut() = format!("{uri}{sep}shardSelector={value}")
        .parse()
        .map_err(|e| build_error(format!("{e}")))?;
    Ok(())
}

/// A request that kube-core refused to build (invalid params): a bug of the caller.
#[derive(Debug, thiserror::Error)]
#[error("invalid list/watch parameters: {0}")]
struct BuildError(String);

fn build_error(e: impl fmt::Display) -> Error {
    Error::protocol(BuildError(e.to_string()).to_string())
}
