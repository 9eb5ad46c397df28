//! [`HttpListerWatcher`]: kcache's [`ListerWatcher`](kcache::ListerWatcher) over HTTP.
//!
//! The type, its constructors and settings are here; the requests it sends are built in
//! `request`, sent and decoded (protobuf first when asked for, JSON otherwise) in `fetch`;
//! [`WireStats`] counts the wire formats of the answers; `describe` names the collection for
//! logs.

mod describe;
mod fetch;
mod inflate;
mod item_types;
mod request;
mod wire_stats;

use std::{fmt, marker::PhantomData};

use kcache::{
    lister_watcher::WatchStream,
    sharding::{Current, Selection, ShardFilter},
};
use kube_core::{NamespaceResourceScope, Resource};

use crate::{
    Client,
    decode::{DEFAULT_MAX_FRAME_SIZE, ItemDecoder, Typed},
};
pub use wire_stats::WireStats;

/// The `Accept` header of a JSON list or watch (the protobuf ones are in [`crate::protobuf`]).
pub const ACCEPT_JSON: &str = "application/json";
/// The `Accept` header of a metadata-only list.
pub const ACCEPT_METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
/// The `Accept` header of a metadata-only watch (and get).
pub const ACCEPT_METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

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

    /// The largest watch frame accepted (default 64 MiB).
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
}

impl<K, D: ItemDecoder<K>> HttpListerWatcher<K, D> {
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
