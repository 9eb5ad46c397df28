//! In-memory test doubles for unit tests (integration tests use real servers).
//!
//! [`FakeSource`] is a [`ListerWatcher`](crate::ListerWatcher) with real resourceVersion
//! semantics and fault controls, the analogue of client-go's `FakeControllerSource`;
//! [`RecordingStore`] is a [`ReflectorStore`](crate::store::ReflectorStore) that records
//! what a reflector did.
//!
//! Available with the crate feature `testing` (off by default): enable it in the
//! dev-dependencies of the crate whose tests use it,
//! `kcache = { workspace = true, features = ["testing"] }`.

mod fake_source;
mod recording_store;

pub use fake_source::{Call, FakeSource, status};
pub use recording_store::{RecordingStore, StoreOp, Write};

/// A ConfigMap `ns/<name>` with nothing else set: the object the crates' tests use.
///
/// ```
/// let cm = kcache::testing::config_map("a");
/// assert_eq!(cm.metadata.namespace.as_deref(), Some("ns"));
/// ```
pub fn config_map(name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
    k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube_core::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..kube_core::ObjectMeta::default()
        },
        ..Default::default()
    }
}
