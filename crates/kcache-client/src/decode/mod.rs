//! Our own decoding of API server responses.
//!
//! Lists are decoded in one pass straight into `Vec<K>` ([`decode_list`]); watch bodies are
//! split into newline-delimited frames as chunks arrive ([`JsonFrameDecoder`]) and each frame is
//! decoded into a [`WatchEvent`](kube_core::WatchEvent) ([`decode_event`], [`watch_events`]).
//! How each object is decoded is an [`ItemDecoder`]: [`Typed`] (optionally skipping
//! `managedFields` inside the parser) or [`crate::compact::CompactDecoder`].

mod event;
mod frame;
mod item;
mod list;
mod split;
mod stream;
mod strip;

pub use event::{EventError, decode_event};
pub use frame::{DEFAULT_MAX_FRAME_SIZE, JsonFrameDecoder, JsonFrameError};
pub use item::{ItemDecoder, Typed, decode_object};
pub use list::decode_list;
pub use split::{ListSplitter, SplitError};
pub use stream::watch_events;
pub use strip::StripManagedFields;

pub(crate) use strip::Key;
