//! What the informer hands its reflector when `run` starts it: the starter built around the
//! `ListerWatcher` at construction, and the hooks known only at start.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::reflector::{self, ReflectorHandle, ReflectorStore, TransformFunc, WatchErrorHandler};

/// Builds and starts the informer's reflector once `run` knows its store and settings (the
/// `ListerWatcher` is captured when the informer is built, by [`super::Builder::build`]).
pub(super) type ReflectorStarter<K> = Box<
    dyn FnOnce(
            Arc<dyn ReflectorStore<K>>,
            reflector::Config,
            Hooks<K>,
            CancellationToken,
        ) -> (ReflectorHandle, BoxFuture<'static, ()>)
        + Send,
>;

/// What the informer hands its reflector besides the store.
pub(super) struct Hooks<K> {
    pub(super) transform: Option<TransformFunc<K>>,
    pub(super) error_handler: Option<WatchErrorHandler>,
    pub(super) should_resync: reflector::ShouldResyncFunc,
}
