//! Kubernetes' protobuf wire format on the server side: request bodies in (`decode`, and
//! `schema` for the kinds kcache-proto has no type for) and responses out (`encode`: every
//! built-in kind, their lists, `Status` and watch frames).
//!
//! Which kinds answer protobuf is [`supports`]: the kinds `kcache-proto` has a prost type for
//! (core/v1, coordination/v1, apps/v1) and every other kind of `k8s.io/api` through the
//! schema table. Custom resources, CustomResourceDefinitions and APIServices answer JSON when
//! the `Accept` header allows it and 406 otherwise, as kube-apiserver does for kinds without
//! a protobuf serializer.

pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod schema;

use crate::resource::ResourceInfo;

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
