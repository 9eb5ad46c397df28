//! Errors of the work queues.

use std::fmt;

/// An item was offered to a queue that is shutting down; the item is handed back.
///
/// client-go silently drops such items. We give the value back instead, like tokio's
/// `mpsc::error::SendError`, so that the caller can decide what to do with it (usually:
/// nothing — the controller is stopping).
///
/// The payload is public: `err.0` (or [`ShutDownError::into_inner`]) is the rejected item.
#[derive(Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the work queue is shutting down")]
pub struct ShutDownError<T>(pub T);

impl<T> ShutDownError<T> {
    /// The item that was not queued.
    pub fn into_inner(self) -> T {
        self.0
    }
}

// Written by hand so that `T` need not be `Debug` (a queue handle must not require more bounds
// than it needs).
impl<T> fmt::Debug for ShutDownError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutDownError").finish_non_exhaustive()
    }
}

/// A rate limiter was configured with values it cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The token bucket's rate must be a finite number of tokens per second above zero.
    #[error("invalid token bucket rate {0} (must be finite and > 0 tokens per second)")]
    InvalidRate(f64),
    /// The token bucket must hold at least one token.
    #[error("invalid token bucket burst 0 (must be at least 1)")]
    ZeroBurst,
}

/// The result type of fallible work queue configuration.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shut_down_error_gives_the_item_back_and_needs_no_debug_bound() {
        struct NotDebug(u32);
        let err = ShutDownError(NotDebug(7));
        assert_eq!(err.to_string(), "the work queue is shutting down");
        assert_eq!(format!("{err:?}"), "ShutDownError { .. }");
        assert_eq!(err.into_inner().0, 7);
    }
}
