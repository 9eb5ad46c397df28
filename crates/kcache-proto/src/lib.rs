//! Kubernetes' protobuf wire format, for kcache's list/watch client.
//!
//! The API server answers `Accept: application/vnd.kubernetes.protobuf` for built-in types with
//! a protobuf body; client-go uses it by default because it is smaller and much cheaper to
//! decode than JSON. This crate holds everything below HTTP:
//!
//! - [`generated`]: prost types generated from the upstream `.proto` files of Kubernetes
//!   v1.36 (`k8s.io/apimachinery` runtime, meta/v1, resource, intstr; `k8s.io/api` core/v1,
//!   coordination/v1, apps/v1). Re-exported as [`api`] and [`apimachinery`]. `regen.sh`
//!   regenerates them with protox (no `protoc` needed); the generated Rust is committed.
//! - [`envelope`]: the `k8s\0` magic + `runtime.Unknown` envelope around every object, list
//!   and `Status`.
//! - [`frame`]: the watch stream's 4-byte big-endian length-prefixed frames, decoded from
//!   chunks split anywhere, with a frame size limit.
//! - [`watch`]: `meta.v1.WatchEvent` frames → typed events; [`WatchDecoder`] does it all.
//! - [`list`]: list bodies (`XList { metadata, items }`) with the items kept as raw bytes.
//! - [`decode_object`] / [`decode_list`]: wire bytes straight into the k8s-openapi type of the
//!   envelope's kind, by decoders generated field by field for every kind of the packages above
//!   (no intermediate prost message: about twice as fast as prost + conversion).
//! - [`convert`]: prost type → k8s-openapi type, generated field by field (for callers holding
//!   prost messages; the direct decoders follow the same field rules, and tests check both
//!   agree).
//! - [`encode`]: the reverse, k8s-openapi type (or a JSON object, [`encode_json`]) → prost
//!   type → wire bytes, generated field by field from the same messages (for servers: the
//!   embedded `kcache-apiserver` answers protobuf with it).
//! - [`compact`]: an object kept as its protobuf bytes plus the metadata a cache needs, with a
//!   typed view decoded on demand.
//!
//! # Example
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_proto::{decode_object, envelope::Envelope};
//!
//! // What the server sends for a ConfigMap (built here from the generated prost type).
//! let pb = kcache_proto::api::core::v1::ConfigMap {
//!     metadata: Some(kcache_proto::apimachinery::pkg::apis::meta::v1::ObjectMeta {
//!         name: Some("cm".into()),
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let body = Envelope::for_message("v1", "ConfigMap", &pb).encode_to_bytes();
//!
//! let cm: ConfigMap = decode_object(Envelope::decode(body)?)?;
//! assert_eq!(cm.metadata.name.as_deref(), Some("cm"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![doc(test(attr(deny(warnings))))]

pub mod compact;
pub mod convert;
pub mod encode;
pub mod envelope;
pub mod frame;
pub mod list;
pub mod watch;

mod decode;
#[cfg(feature = "serde")]
pub mod serde_support;
pub mod varint;
mod wire;

/// prost types generated from the upstream Kubernetes `.proto` files (see `regen.sh`).
///
/// The module tree follows the protobuf packages (`k8s.io.api.core.v1` →
/// `generated::k8s::io::api::core::v1`). Field documentation is upstream's.
#[allow(
    missing_docs,
    reason = "generated from the upstream .proto files, which leave some items undocumented"
)]
#[allow(clippy::all, clippy::pedantic, reason = "generated code")]
#[allow(rustdoc::all, reason = "upstream comments are not written for rustdoc")]
pub mod generated {
    include!("generated/mod.rs");
}

pub use generated::k8s::io::api;
pub use generated::k8s::io::apimachinery;

pub use decode::{
    DecodeConfig, DecodeError, decode_list, decode_list_with, decode_object, decode_object_with,
    decode_status, kind_is_supported, native_kind,
};
pub use encode::{EncodeError, ToProto, encode_json, encode_status_json};
pub use envelope::{Envelope, EnvelopeError};
pub use frame::{FrameDecoder, FrameError};
pub use watch::{RawWatchEvent, WatchDecoder, WatchError, WatchEventType};
pub use wire::WireError;

/// `Content-Type` of a protobuf object, list or `Status`.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// `Content-Type` (and `Accept`) of a protobuf watch stream.
pub const CONTENT_TYPE_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
