//! List bodies. Every Kubernetes list message has the same shape, `XList { ListMeta metadata = 1;
//! repeated X items = 2; }`, so one view decodes them all, keeping each item as its raw
//! protobuf bytes (zero-copy slices of the body) to be decoded one by one.

use bytes::Bytes;
use prost::Message;

use crate::apimachinery::pkg::apis::meta::v1::ListMeta;

mod split;
pub use split::{ListSplitter, SplitError};

/// Errors decoding a list.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListError {
    /// The list message is not valid protobuf.
    #[error("malformed protobuf list")]
    Malformed(#[source] prost::DecodeError),
    /// The envelope's kind is not a list kind (`...List`).
    #[error("expected a list, got kind {0:?}")]
    NotAList(String),
}

/// The common shape of all list messages, items undecoded.
///
/// This is not a Kubernetes type: it is a view of the two fields every generated `XList` has
/// (same tags, same wire types), checked against `PodList` by a test.
#[derive(Clone, PartialEq, Message)]
pub struct RawList {
    /// The list's metadata (resourceVersion, continue, remainingItemCount).
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    /// Each item's protobuf message.
    #[prost(bytes = "bytes", repeated, tag = "2")]
    pub items: Vec<Bytes>,
}

impl RawList {
    /// Decodes a list message (the envelope's `raw`).
    ///
    /// # Errors
    ///
    /// [`ListError::Malformed`].
    pub fn decode_raw(raw: Bytes) -> Result<Self, ListError> {
        Self::decode(raw).map_err(ListError::Malformed)
    }
}

/// The item kind of a list kind: `PodList` → `Pod`.
pub fn item_kind(list_kind: &str) -> Result<&str, ListError> {
    list_kind
        .strip_suffix("List")
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ListError::NotAList(list_kind.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::core::v1::{Pod, PodList};
    use crate::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn raw_list_view_matches_generated_pod_list() {
        let pod = |n: &str| Pod {
            metadata: Some(ObjectMeta {
                name: Some(n.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let list = PodList {
            metadata: Some(ListMeta {
                resource_version: Some("7".into()),
                ..Default::default()
            }),
            items: vec![pod("a"), pod("b")],
        };
        let raw = RawList::decode_raw(Bytes::from(list.encode_to_vec())).unwrap();
        assert_eq!(raw.metadata, list.metadata);
        let items: Vec<Pod> = raw
            .items
            .into_iter()
            .map(|b| Pod::decode(b).unwrap())
            .collect();
        assert_eq!(items, list.items);
    }

    #[test]
    fn item_kind_of_list_kinds() {
        assert_eq!(item_kind("PodList").unwrap(), "Pod");
        assert!(matches!(item_kind("Pod"), Err(ListError::NotAList(_))));
        assert!(matches!(item_kind("List"), Err(ListError::NotAList(_))));
    }
}
