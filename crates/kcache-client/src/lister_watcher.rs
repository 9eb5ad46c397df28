//! [`HttpListerWatcher`]: kcache's [`ListerWatcher`] over HTTP.

use std::{
    fmt,
    marker::PhantomData,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use bytes::Bytes;
use http::HeaderValue;
use http_body_util::BodyDataStream;
use kcache::{
    ListerWatcher,
    lister_watcher::{Error, ListParams, ObjectList, WatchParams, WatchStream},
    sharding::{Current, Selection, ShardFilter},
};
use kube_core::{NamespaceResourceScope, Resource};

use crate::{
    Client,
    decode::{DEFAULT_MAX_FRAME_SIZE, ItemDecoder, Typed, decode_list, watch_events},
};

/// The `Accept` header of a JSON list or watch (the protobuf ones are in [`crate::protobuf`]).
pub const ACCEPT_JSON: &str = "application/json";
/// The `Accept` header of a metadata-only list.
pub const ACCEPT_METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
/// The `Accept` header of a metadata-only watch (and get).
pub const ACCEPT_METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// List bodies at least this large are decoded on Tokio's blocking pool.
const BLOCKING_DECODE_THRESHOLD: usize = 256 * 1024;

/// Lists and watches one collection of `K` over HTTP.
///
/// Requests are built with kube-core's [`Request`](kube_core::Request) and sent through
/// kube-client's transport; responses are decoded by this crate's decoder with the item
/// strategy `D` ([`Typed`] by default; [`crate::compact::CompactDecoder`] for compact storage).
///
/// - typed: any k8s-openapi `K` — [`HttpListerWatcher::all`], [`HttpListerWatcher::namespaced`];
/// - dynamic: `DynamicObject` with an [`ApiResource`](kube_core::discovery::ApiResource) from
///   discovery — [`HttpListerWatcher::all_with`], [`crate::dynamic`];
/// - metadata only: `PartialObjectMeta<K>` — detected from [`Resource::metadata_api`], the
///   requests then ask for `PartialObjectMetadata[List]`.
///
/// Label and field selectors set here apply to every list and watch, unless the caller's
/// params carry their own.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kcache::ListerWatcher;
/// use kcache::lister_watcher::ListParams;
/// use kcache_client::{Client, HttpListerWatcher};
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::infer().await?;
/// let lw = HttpListerWatcher::<Pod>::namespaced(client, "default").label_selector("app=web");
/// let page = lw.list(&ListParams::default().limit(500)).await?;
/// println!("{} pods at RV {:?}", page.items.len(), page.metadata.resource_version);
/// # Ok(()) }
/// ```
pub struct HttpListerWatcher<K, D = Typed> {
    client: Client,
    request: kube_core::Request,
    metadata_only: bool,
    label_selector: Option<String>,
    field_selector: Option<String>,
    decoder: D,
    max_frame_size: usize,
    protobuf: bool,
    wire: WireStats,
    shards: Option<Sharding<K>>,
    _k: PhantomData<fn() -> K>,
}

/// A [`ShardFilter`] with its filters bound to `K` (which has metadata) when
/// [`HttpListerWatcher::shards`] was called.
struct Sharding<K> {
    filter: ShardFilter,
    accept_items: fn(&ShardFilter, &Current, Option<&str>, &mut Vec<K>),
    watch: fn(&ShardFilter, Current, bool, WatchStream<K>) -> WatchStream<K>,
}

impl<K> Clone for Sharding<K> {
    fn clone(&self) -> Self {
        Self {
            filter: self.filter.clone(),
            accept_items: self.accept_items,
            watch: self.watch,
        }
    }
}

/// How many list and watch responses a [`HttpListerWatcher`] (and its clones) decoded in each
/// wire format: which format the server really answered in, whatever was asked for.
///
/// A cheap handle: clones share the counters, so it can be kept while the lister-watcher is
/// handed to a reflector.
#[derive(Clone, Debug, Default)]
pub struct WireStats(Arc<WireCounters>);

#[derive(Debug, Default)]
struct WireCounters {
    protobuf: AtomicU64,
    json: AtomicU64,
    list_bytes: AtomicU64,
}

impl WireStats {
    /// Responses (list pages and watch streams) decoded from protobuf.
    pub fn protobuf(&self) -> u64 {
        self.0.protobuf.load(Ordering::Relaxed)
    }

    /// Responses (list pages and watch streams) decoded from JSON.
    pub fn json(&self) -> u64 {
        self.0.json.load(Ordering::Relaxed)
    }

    /// Bytes of list response bodies received (after content decoding).
    pub fn list_bytes(&self) -> u64 {
        self.0.list_bytes.load(Ordering::Relaxed)
    }

    fn record(&self, protobuf: bool) {
        let c = if protobuf {
            &self.0.protobuf
        } else {
            &self.0.json
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

impl<K, D: Clone> Clone for HttpListerWatcher<K, D> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            request: self.request.clone(),
            metadata_only: self.metadata_only,
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            decoder: self.decoder.clone(),
            max_frame_size: self.max_frame_size,
            protobuf: self.protobuf,
            wire: self.wire.clone(),
            shards: self.shards.clone(),
            _k: PhantomData,
        }
    }
}

impl<K, D: fmt::Debug> fmt::Debug for HttpListerWatcher<K, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpListerWatcher")
            .field("server", &self.client.server_url())
            .field("path", &self.request.url_path)
            .field("metadata_only", &self.metadata_only)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("decoder", &self.decoder)
            .field("protobuf", &self.protobuf)
            .field("sharded", &self.shards.is_some())
            .finish()
    }
}

impl<K: Resource<DynamicType = ()>, D: Default> HttpListerWatcher<K, D> {
    /// All objects of a statically typed `K`, across all namespaces (or the cluster-scoped
    /// collection).
    pub fn all(client: Client) -> Self {
        Self::all_with(client, &())
    }

    /// The objects of a namespaced, statically typed `K` in `namespace`.
    pub fn namespaced(client: Client, namespace: &str) -> Self
    where
        K: Resource<Scope = NamespaceResourceScope>,
    {
        Self::at_path(client, K::url_path(&(), Some(namespace)), K::metadata_api())
    }
}

impl<K: Resource, D: Default> HttpListerWatcher<K, D> {
    /// All objects of `K` described by `dyntype` (for `DynamicObject`, an `ApiResource`), across
    /// all namespaces.
    pub fn all_with(client: Client, dyntype: &K::DynamicType) -> Self {
        Self::at_path(client, K::url_path(dyntype, None), K::metadata_api())
    }

    /// The objects of `K` described by `dyntype` in `namespace`. The caller checks that the
    /// resource is namespaced ([`crate::dynamic::discover`] reports the scope).
    pub fn namespaced_with(client: Client, dyntype: &K::DynamicType, namespace: &str) -> Self {
        Self::at_path(
            client,
            K::url_path(dyntype, Some(namespace)),
            K::metadata_api(),
        )
    }
}

impl<K, D: Default> HttpListerWatcher<K, D> {
    /// A lister-watcher for the collection at `url_path` (`/api/v1/pods`, …).
    pub fn at_path(client: Client, url_path: String, metadata_only: bool) -> Self {
        Self {
            client,
            request: kube_core::Request::new(url_path),
            metadata_only,
            label_selector: None,
            field_selector: None,
            decoder: D::default(),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            protobuf: true,
            wire: WireStats::default(),
            shards: None,
            _k: PhantomData,
        }
    }
}

impl<K, D> HttpListerWatcher<K, D> {
    /// Restricts lists and watches to objects matching this label selector.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Restricts lists and watches to objects matching this field selector.
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Asks for metadata only (`PartialObjectMetadata[List]`), whatever `K` is.
    #[must_use]
    pub fn metadata_only(mut self, metadata_only: bool) -> Self {
        self.metadata_only = metadata_only;
        self
    }

    /// The largest watch frame accepted (default [`DEFAULT_MAX_FRAME_SIZE`]).
    #[must_use]
    pub fn max_frame_size(mut self, bytes: usize) -> Self {
        self.max_frame_size = bytes;
        self
    }

    /// Decodes objects with `decoder` instead.
    pub fn with_decoder<D2>(self, decoder: D2) -> HttpListerWatcher<K, D2> {
        HttpListerWatcher {
            client: self.client,
            request: self.request,
            metadata_only: self.metadata_only,
            label_selector: self.label_selector,
            field_selector: self.field_selector,
            decoder,
            max_frame_size: self.max_frame_size,
            protobuf: self.protobuf,
            wire: self.wire,
            shards: self.shards,
            _k: PhantomData,
        }
    }

    /// Whether protobuf may be asked for (default `true`). With `false`, lists and watches ask
    /// for JSON only (`Accept: application/json`), whatever the decoder and the kind; with
    /// `true`, protobuf is asked for when [`HttpListerWatcher::asks_for_protobuf`] says so
    /// (feature `protobuf`, a decoder that takes it, a built-in kind, not metadata-only). Use
    /// `false` to compare the two wire formats, or for a server whose protobuf is suspect.
    #[must_use]
    pub fn protobuf(mut self, enabled: bool) -> Self {
        self.protobuf = enabled;
        self
    }

    /// Lists and watches only the objects `selection` selects (KEP-5866 sharding): its
    /// selector is sent as `shardSelector` on every list and watch, list answers are checked
    /// for the server's `metadata.shardInfo` echo, and objects are filtered here too, so the
    /// result is the same when the server ignores the parameter (feature gate
    /// `ShardedListAndWatch` off, servers before v1.36) — only then every object is still
    /// transferred. Changing the selection ends the open watch, and the reflector lists again.
    ///
    /// ```no_run
    /// use std::collections::BTreeSet;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache::sharding::{Field, Layout, Selection};
    /// use kcache_client::{Client, HttpListerWatcher};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// let client = Client::infer().await?;
    /// let layout = Layout::new(3, Field::Uid);
    /// let selection = Selection::new(Some(layout.selector(&BTreeSet::from([0]))));
    /// let lw = HttpListerWatcher::<ConfigMap>::all(client).shards(selection.clone());
    /// println!("{lw:?}, {} lists filtered by the server", selection.lists_applied());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn shards(mut self, selection: Selection) -> Self
    where
        K: Resource + Clone + Send + 'static,
    {
        self.shards = Some(Sharding {
            filter: ShardFilter::new(selection),
            accept_items: |f, sent, echoed, items| f.accept_items(sent, echoed, items),
            watch: |f, sent, stale, stream| f.watch(sent, stale, stream),
        });
        self
    }

    /// The collection's URL path.
    pub fn url_path(&self) -> &str {
        &self.request.url_path
    }

    fn list_request(
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

    fn watch_request(
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
        Ok(req)
    }
}

impl<K, D> ListerWatcher<K> for HttpListerWatcher<K, D>
where
    K: Clone + Send + 'static,
    D: ItemDecoder<K>,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        let shard = self
            .shards
            .as_ref()
            .map(|s| s.filter.for_list(params.continue_token.is_some()));
        let mut list = self.list_unfiltered(params, shard.as_ref()).await?;
        if let (Some(s), Some(sent)) = (&self.shards, &shard) {
            let echoed = list
                .metadata
                .shard_info
                .as_ref()
                .map(|i| i.selector.clone());
            (s.accept_items)(&s.filter, sent, echoed.as_deref(), &mut list.items);
        }
        Ok(list)
    }

    fn describe(&self) -> String {
        describe_collection(
            &self.request.url_path,
            self.label_selector.as_deref(),
            self.field_selector.as_deref(),
        )
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, Error> {
        let Some(s) = &self.shards else {
            return self.watch_unfiltered(params, resource_version, None).await;
        };
        let (sent, stale) = s.filter.for_watch(params.send_initial_events);
        let stream = self
            .watch_unfiltered(params, resource_version, Some(&sent))
            .await?;
        Ok((s.watch)(&s.filter, sent, stale, stream))
    }
}

impl<K, D> HttpListerWatcher<K, D>
where
    K: Clone + Send + 'static,
    D: ItemDecoder<K>,
{
    async fn list_unfiltered(
        &self,
        params: &ListParams,
        shard: Option<&Current>,
    ) -> Result<ObjectList<K>, Error> {
        #[cfg(feature = "protobuf")]
        if self.asks_for_protobuf() {
            let mut request = self.list_request(params, shard)?;
            request.headers_mut().insert(
                http::header::ACCEPT,
                HeaderValue::from_static(crate::protobuf::ACCEPT_LIST),
            );
            match self.client.send_collect_with_headers(request, "list").await {
                Ok((headers, body)) => {
                    let protobuf = crate::protobuf::is_protobuf(&headers);
                    return self.decode_list_body(body, protobuf).await;
                }
                // A server that cannot produce protobuf and does not take the JSON
                // alternative: ask again for JSON only.
                Err(e) if is_not_acceptable(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let request = self.list_request(params, shard)?;
        let body = self.client.send_collect(request, "list").await?;
        self.decode_list_body(body, false).await
    }

    async fn watch_unfiltered(
        &self,
        params: &WatchParams,
        resource_version: &str,
        shard: Option<&Current>,
    ) -> Result<WatchStream<K>, Error> {
        #[cfg(feature = "protobuf")]
        if self.asks_for_protobuf() {
            let mut request = self.watch_request(params, resource_version, shard)?;
            request.headers_mut().insert(
                http::header::ACCEPT,
                HeaderValue::from_static(crate::protobuf::ACCEPT_WATCH),
            );
            match self.client.send(request, "watch").await {
                Ok(response) => {
                    let protobuf = crate::protobuf::is_protobuf(response.headers());
                    self.wire.record(protobuf);
                    let body = BodyDataStream::new(response.into_body());
                    let decoder = self.decoder.clone();
                    return Ok(if protobuf {
                        crate::protobuf::watch_events(body, decoder, self.max_frame_size)
                    } else {
                        watch_events(body, decoder, self.max_frame_size)
                    });
                }
                Err(e) if is_not_acceptable(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let request = self.watch_request(params, resource_version, shard)?;
        let response = self.client.send(request, "watch").await?;
        self.wire.record(false);
        let body = BodyDataStream::new(response.into_body());
        Ok(watch_events(
            body,
            self.decoder.clone(),
            self.max_frame_size,
        ))
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

impl<K, D: ItemDecoder<K>> HttpListerWatcher<K, D> {
    /// Decodes a list body (protobuf or JSON, as the response said) and counts its format. The
    /// body is dropped as soon as its items are decoded; a large page (a 500-pod page is about
    /// 4 MB of JSON, tens of milliseconds of CPU) is decoded on the blocking pool so that it does
    /// not stall the runtime's worker.
    async fn decode_list_body(&self, body: Bytes, protobuf: bool) -> Result<ObjectList<K>, Error>
    where
        K: Clone + Send + 'static,
    {
        self.wire.record(protobuf);
        self.wire
            .0
            .list_bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        let decode = move |body: Bytes, decoder: &D| -> Result<ObjectList<K>, Error> {
            #[cfg(feature = "protobuf")]
            if protobuf {
                return crate::protobuf::decode_list(body, decoder);
            }
            decode_list(&body, decoder).map_err(crate::client::decode_error)
        };
        if body.len() < BLOCKING_DECODE_THRESHOLD {
            return decode(body, &self.decoder);
        }
        let decoder = self.decoder.clone();
        tokio::task::spawn_blocking(move || decode(body, &decoder))
            .await
            .map_err(|e| Error::decode(format!("list decoding task failed: {e}")))?
    }

    /// The counters of the wire formats this lister-watcher's responses came in (shared with
    /// its clones).
    pub fn wire_stats(&self) -> WireStats {
        self.wire.clone()
    }

    /// Whether lists and watches ask for protobuf: allowed by [`HttpListerWatcher::protobuf`],
    /// the decoder takes it for `K` (a built-in kind's k8s-openapi type with
    /// [`crate::decode::Typed`]) and the request is not metadata-only. The server may still
    /// answer JSON, which is then decoded as JSON.
    #[cfg(feature = "protobuf")]
    pub fn asks_for_protobuf(&self) -> bool {
        self.protobuf && !self.metadata_only && self.decoder.accepts_protobuf()
    }

    /// Whether lists and watches ask for protobuf: never without the feature `protobuf`.
    #[cfg(not(feature = "protobuf"))]
    pub fn asks_for_protobuf(&self) -> bool {
        false
    }
}

/// 406 Not Acceptable: the server produces none of the representations asked for.
#[cfg(feature = "protobuf")]
fn is_not_acceptable(e: &Error) -> bool {
    e.status().is_some_and(|s| s.code == 406)
}

/// A request that kube-core refused to build (invalid params): a bug of the caller.
#[derive(Debug, thiserror::Error)]
#[error("invalid list/watch parameters: {0}")]
struct BuildError(String);

fn build_error(e: impl fmt::Display) -> Error {
    Error::protocol(BuildError(e.to_string()).to_string())
}

/// `pods`, `deployments.apps in namespace ns with labels app=web`: the resource of a collection
/// path (`/api/v1/pods`, `/apis/apps/v1/namespaces/ns/deployments`), its namespace and
/// selectors.
pub(crate) fn describe_collection(
    path: &str,
    labels: Option<&str>,
    fields: Option<&str>,
) -> String {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => ("", &parts[..]),
    };
    let (namespace, resource) = match rest {
        ["namespaces", ns, resource, ..] => (Some(*ns), *resource),
        [resource, ..] => (None, *resource),
        [] => (None, path),
    };
    let mut out = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    if let Some(ns) = namespace {
        out.push_str(&format!(" in namespace {ns}"));
    }
    if let Some(l) = labels.filter(|l| !l.is_empty()) {
        out.push_str(&format!(" with labels {l}"));
    }
    if let Some(f) = fields.filter(|f| !f.is_empty()) {
        out.push_str(&format!(" with fields {f}"));
    }
    out
}

#[cfg(test)]
mod describe_tests {
    use super::describe_collection;

    #[test]
    fn reflectors_are_named_after_their_resource_namespace_and_selectors() {
        assert_eq!(describe_collection("/api/v1/pods", None, None), "pods");
        assert_eq!(
            describe_collection(
                "/apis/apps/v1/namespaces/ns/deployments",
                Some("app=web"),
                None
            ),
            "deployments.apps in namespace ns with labels app=web"
        );
        assert_eq!(
            describe_collection(
                "/api/v1/namespaces/kube-system/configmaps",
                None,
                Some("metadata.name=x")
            ),
            "configmaps in namespace kube-system with fields metadata.name=x"
        );
    }
}
