//! [`Error`]: a write that failed, and on what.

use kcache::controller::ReconcileError;
use kube_core::Status;

/// A write through a [`TrackedApi`](super::TrackedApi) (or a helper built on it) that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request failed: the server's answer, or the transport's error (after kube's
    /// retries of 429/503/504, see the [module docs](super#retries)).
    #[error("{verb} {what}: {}", describe(source))]
    Request {
        /// `create`, `apply`, `patch`, `patch_status`, `update` or `delete`.
        verb: &'static str,
        /// The object, e.g. `deployments mon/web`.
        what: String,
        /// kube's error.
        #[source]
        source: Box<kube_client::Error>,
    },
    /// The object could not be encoded as JSON.
    #[error("{what}: cannot encode it as JSON: {source}")]
    Encode {
        /// The object.
        what: String,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// [`Context::read`](crate::Context::read) found no such object in the manager's cache:
    /// it does not exist, or the cache's selectors leave it out.
    #[error(
        "{what} is not in the manager's cache of {resource} ({selectors}): it does not exist, or the cache's selectors leave it out"
    )]
    NotCached {
        /// The object, e.g. `configmaps apps/web`.
        what: String,
        /// The resource.
        resource: String,
        /// The cache's namespace when it is its own, and its selectors (`label selector
        /// "app=web"`, `namespace "vault"`, or `no selector`).
        selectors: String,
    },
    /// The object to write has no `metadata.name`.
    #[error("{verb} {resource}: the object has no metadata.name")]
    NoName {
        /// The verb.
        verb: &'static str,
        /// The resource.
        resource: String,
    },
}

fn describe(e: &kube_client::Error) -> String {
    match e {
        kube_client::Error::Api(s) => format!("{} ({}, {})", s.message, s.reason, s.code),
        other => other.to_string(),
    }
}

impl Error {
    pub(crate) fn request(verb: &'static str, what: &str, source: kube_client::Error) -> Self {
        Self::Request {
            verb,
            what: what.to_owned(),
            source: Box::new(source),
        }
    }

    /// The `Status` the API server answered, when it refused the write.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Self::Request { source, .. } => match &**source {
                kube_client::Error::Api(status) => Some(status),
                _ => None,
            },
            _ => None,
        }
    }

    /// 409 Conflict: the object changed since the resourceVersion the write was conditional
    /// on (retrying the reconcile reads the newer object).
    pub fn is_conflict(&self) -> bool {
        self.status()
            .is_some_and(|s| s.code == 409 && s.reason == "Conflict")
    }

    /// 409 AlreadyExists: a create of an object that exists.
    pub fn is_already_exists(&self) -> bool {
        self.status().is_some_and(Status::is_already_exists)
    }

    /// [`Error::NotCached`]: a read found nothing in the cache.
    pub fn is_not_cached(&self) -> bool {
        matches!(self, Self::NotCached { .. })
    }

    /// 404 NotFound.
    pub fn is_not_found(&self) -> bool {
        self.status().is_some_and(Status::is_not_found)
    }
}

/// Never terminal: a failed write is retried with the controller's backoff.
impl ReconcileError for Error {}
