//! What the informer's set-up calls fail with.

use crate::store::IndexError;

/// Errors of informer set-up calls.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The informer has already started; the call only works before.
    #[error("the informer has already started")]
    AlreadyStarted,
    /// The informer has stopped; no handler can be added.
    #[error("the informer has stopped")]
    Stopped,
    /// The informer's cache already has a memory sizer; it has at most one.
    #[error("the informer's memory is already accounted")]
    MemoryAccounted,
    /// Adding indexers failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}
