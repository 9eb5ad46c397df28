//! [`Error`]: why a manager could not be built, a controller not be added, or a run did not
//! end cleanly.

use std::time::Duration;

/// What went wrong building or running a [`Manager`](super::Manager).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The leader election settings are invalid (client-go's rules).
    #[error("manager {manager}: invalid leader election settings: {source}")]
    LeaderElection {
        /// The manager's name.
        manager: String,
        /// Which rule is broken.
        #[source]
        source: kcache::leaderelection::Error,
    },
    /// The metrics and probes address could not be bound.
    #[error("manager {manager}: cannot serve metrics and probes on {addr}: {source}")]
    Bind {
        /// The manager's name.
        manager: String,
        /// The address.
        addr: std::net::SocketAddr,
        /// The socket's error.
        #[source]
        source: std::io::Error,
    },
    /// Two controllers of one manager have the same name.
    #[error(
        "manager {manager}: there is already a controller named {controller}; name each with ControllerBuilder::name"
    )]
    DuplicateController {
        /// The manager's name.
        manager: String,
        /// The name in use.
        controller: String,
    },
    /// A controller stopped with an error; the manager shut down.
    #[error("controller {controller} stopped: {source}")]
    Controller {
        /// The controller's name.
        controller: String,
        /// Why.
        #[source]
        source: kcache::controller::Error,
    },
    /// A controller's task panicked outside a reconcile; the manager shut down.
    #[error("controller {controller} panicked: {message}")]
    ControllerPanicked {
        /// The controller's name.
        controller: String,
        /// The panic's message.
        message: String,
    },
    /// The reconciles in flight did not finish within the graceful shutdown timeout; they
    /// were aborted.
    #[error(
        "manager {manager}: the reconciles of {controllers:?} did not finish within {timeout:?} of shutdown; aborted"
    )]
    DrainTimeout {
        /// The manager's name.
        manager: String,
        /// The controllers still running.
        controllers: Vec<String>,
        /// The graceful shutdown timeout.
        timeout: Duration,
    },
    /// The metrics and probes server failed.
    #[error("manager {manager}: the metrics and probes server failed: {source}")]
    Serve {
        /// The manager's name.
        manager: String,
        /// The server's error.
        #[source]
        source: std::io::Error,
    },
    /// [`Manager::cache`](super::Manager::cache) for a type the manager already caches (a
    /// controller, `owns`, `watches` or `informer` asked for it first, or another `cache`
    /// call): declare the cache before them.
    #[error(
        "manager {manager}: {kind} is already cached ({existing}); declare its cache before any controller, owns, watches or informer uses it"
    )]
    CacheExists {
        /// The manager's name.
        manager: String,
        /// The kind.
        kind: String,
        /// The existing cache's selectors.
        existing: String,
    },
}
