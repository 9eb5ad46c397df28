//! Our own decoding of API server responses.
//!
//! Lists are decoded in one pass straight into `Vec<K>`; watch bodies are split into
//! newline-delimited frames as chunks arrive and each frame is decoded into a
//! [`WatchEvent`](kube_core::WatchEvent) — both inside the crate. What users choose is how each
//! object is decoded, an [`ItemDecoder`]: [`Typed`] (optionally skipping `managedFields` inside
//! the parser, [`StripManagedFields`]) or [`crate::compact::CompactDecoder`]; [`decode_object`]
//! decodes one object's bytes with one.

mod event;
mod frame;
mod item;
mod list_items;
// Their `pub` items are public through `internals` with the feature, crate-private without it.
#[cfg_attr(
    not(feature = "unstable-decode-internals"),
    allow(unreachable_pub, reason = "public only through `internals`")
)]
mod list;
#[cfg_attr(
    not(feature = "unstable-decode-internals"),
    allow(unreachable_pub, reason = "public only through `internals`")
)]
mod split;
#[cfg_attr(
    not(feature = "unstable-decode-internals"),
    allow(unreachable_pub, reason = "public only through `internals`")
)]
mod stream;
mod strip;

pub use item::{ItemDecoder, Typed, decode_object};
pub use strip::StripManagedFields;

pub(crate) use event::{EventError, decode_event};
pub(crate) use frame::{DEFAULT_MAX_FRAME_SIZE, JsonFrameDecoder};
pub(crate) use list::decode_list;
pub(crate) use list_items::{Items, malformed as malformed_list};
pub(crate) use split::{ItemSink, ListSplitter, whole_item};
pub(crate) use stream::watch_events;

/// The decoder's internals, for this crate's benchmarks and property tests (which turn the
/// feature on through their dev-dependencies): not a supported API, and not semver-stable.
///
/// Available with the crate feature `unstable-decode-internals` (off by default).
#[cfg(feature = "unstable-decode-internals")]
pub mod internals {
    pub use super::list::decode_list;
    pub use super::split::{ItemSink, ListSplitter, SplitError};
    pub use super::stream::watch_events;
}

pub(crate) use strip::Key;
