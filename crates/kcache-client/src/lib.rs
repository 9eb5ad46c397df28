//! # kcache-client
//!
//! kcache's [`ListerWatcher`](kcache::ListerWatcher) over HTTP, for real clusters and for
//! `kcache-apiserver`:
//!
//! - the configuration is kube-client's ([`Client`]: kubeconfig and in-cluster inference, auth
//!   plugins, TLS with verification on), the transport our own hyper client (HTTP/2 over TLS,
//!   with client-go's connection health pings);
//! - the decoding is ours ([`decode`]): list pages decoded in one pass straight into `Vec<K>`,
//!   watch bodies split into frames as chunks arrive, `managedFields` optionally skipped inside
//!   the parser;
//! - [`HttpListerWatcher`] lists and watches typed (k8s-openapi), dynamic
//!   (`DynamicObject`, with [`dynamic`] discovery) and metadata-only (`PartialObjectMeta<K>`)
//!   objects;
//! - [`compact`] stores objects as their wire bytes (JSON, or protobuf for built-in kinds) plus
//!   parsed metadata, with a typed view on demand; it is what `factory.informer::<K>(&client)`
//!   stores, and [`object`] is the view handlers and listers hand out ([`Object<K>`]: free
//!   metadata, typed `K` decoded on first access); `client.typed()` ([`TypedSource`]) gives
//!   typed `Arc<K>` storage instead;
//! - with the default feature `protobuf`, built-in kinds travel as protobuf
//!   ([`protobuf`], through `kcache-proto`), with a clean fallback to JSON;
//! - [`LeaseClient`] gets, creates and updates `coordination.k8s.io/v1` Leases, and
//!   [`HttpLeaseLock`] puts kcache's [`LeaderElector`](kcache::leaderelection::LeaderElector)
//!   on one; [`HttpShardLeases`] puts a
//!   [`ShardManager`](kcache::sharding::ShardManager) on the Leases of a shard group;
//! - [`events::Recorder`] publishes `events.k8s.io/v1` Events with client-go's series
//!   aggregation.
//!
//! Errors are one sentence a user can act on, and never contain credentials.
#![doc(test(attr(deny(warnings))))]

mod client;
pub mod compact;
pub mod decode;
pub mod dynamic;
pub mod error;
pub mod events;
pub mod lease;
pub mod lease_lock;
pub mod lister_watcher;
pub mod object;
#[cfg(feature = "protobuf")]
pub mod protobuf;
mod redact;
pub mod shard_leases;
mod source;

pub use client::{Client, ResponseObserver};
pub use compact::{Compact, CompactDecoder};
pub use decode::Typed;
pub use error::{Error, Result};
pub use lease::LeaseClient;
pub use lease_lock::HttpLeaseLock;
pub use lister_watcher::{HttpListerWatcher, WireStats};
pub use object::{Object, ObjectHandlerFns, ObjectLister};
pub use shard_leases::HttpShardLeases;
pub use source::TypedSource;
