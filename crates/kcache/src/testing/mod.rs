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

use std::{collections::HashMap, sync::Arc};

use crate::store::{ObjectKey, ThreadSafeStore};

mod fake_source;
mod recording_store;

pub use fake_source::{Call, FakeSource, status};
pub use recording_store::{RecordingStore, StoreOp, Write};

/// Replaces `store`'s content with objects whose keys are already computed, as an informer
/// applies a relist (a `DeltaObject::ReplacedAll`), and returns the previous content: for
/// benchmarks and model tests that drive a [`ThreadSafeStore`] from a queue the way the
/// informer does. Applications use [`ThreadSafeStore::replace`].
///
/// ```
/// use std::sync::Arc;
/// use kcache::store::{ObjectKey, ThreadSafeStore};
///
/// let store = ThreadSafeStore::<k8s_openapi::api::core::v1::ConfigMap>::for_resource();
/// let cm = Arc::new(kcache::testing::config_map("a"));
/// let previous = kcache::testing::replace_keyed(&store, vec![(ObjectKey::new(Some("ns"), "a"), cm)], "5");
/// assert!(previous.is_empty());
/// assert_eq!(store.last_sync_resource_version(), "5");
/// ```
pub fn replace_keyed<K: Send + Sync + 'static>(
    store: &ThreadSafeStore<K>,
    list: Vec<(ObjectKey, Arc<K>)>,
    resource_version: impl Into<String>,
) -> HashMap<ObjectKey, Arc<K>> {
    store.replace_keyed(list, resource_version)
}

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
