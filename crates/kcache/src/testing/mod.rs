//! In-memory test doubles for unit tests (integration tests use real servers).
//!
//! [`FakeSource`] is a [`ListerWatcher`](crate::ListerWatcher) with real resourceVersion
//! semantics and fault controls, the analogue of client-go's `FakeControllerSource`;
//! [`RecordingStore`] is a [`ReflectorStore`](crate::reflector::ReflectorStore) that records
//! what a reflector did.

mod fake_source;
mod recording_store;

pub use fake_source::{Call, FakeSource, status};
pub use recording_store::{Op, RecordingStore};
