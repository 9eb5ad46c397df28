//! Kubernetes' protobuf wire format on the server side: request bodies in (`decode`, and
//! `schema` for the kinds kcache-proto has no type for) and responses out (`encode`: every
//! built-in kind, their lists, `Status` and watch frames; `schema_encode` for the kinds
//! `schema` decodes).
//!
//! Which kinds answer protobuf is [`supports`]: the kinds `kcache-proto` has a prost type for
//! (core/v1, coordination/v1, apps/v1) and every other kind of `k8s.io/api` through the
//! schema table. Custom resources, CustomResourceDefinitions and APIServices answer JSON when
//! the `Accept` header allows it and 406 otherwise, as kube-apiserver does for kinds without
//! a protobuf serializer.

pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod schema;
pub(crate) mod schema_encode;

use crate::resource::ResourceInfo;

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtoError {
    /// The bytes are not valid protobuf of the expected shape.
    #[error("invalid protobuf body: {0}")]
    Malformed(&'static str),
    /// The bytes are not a protobuf message at all (kcache-proto's wire reader refused them).
    #[error("invalid protobuf body: {0}")]
    Layout(#[from] kcache_proto::compact::LayoutError),
    /// The kind has no protobuf decoder here.
    #[error("protobuf bodies of kind {0:?} are not supported")]
    Unsupported(String),
}

/// `Content-Type` of protobuf objects, lists and `Status`.
pub(crate) const CONTENT_TYPE: &str = kcache_proto::CONTENT_TYPE;
/// `Content-Type` of a protobuf watch stream.
pub(crate) const CONTENT_TYPE_WATCH: &str = kcache_proto::CONTENT_TYPE_WATCH;

/// Whether objects of this resource can be sent as protobuf.
#[must_use]
pub(crate) fn supports(info: &ResourceInfo) -> bool {
    kcache_proto::kind_is_supported(&info.api_version(), &info.kind)
        || (info.schema.is_none() && schema::message_for(&info.api_version(), &info.kind).is_some())
}
