//! What the informer's set-up calls fail with.

use crate::store::IndexError;

/// Errors of informer set-up calls.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The informer has stopped; no handler can be added.
    #[error("the informer has stopped")]
    Stopped,
    /// Adding indexers failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}
