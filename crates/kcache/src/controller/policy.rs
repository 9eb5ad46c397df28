//! What happens after a reconcile: [`Action`] on success; on failure the error's
//! [`ReconcileError::is_terminal`], then the controller's [`ErrorPolicy`].

use std::{convert::Infallible, fmt, time::Duration};

use crate::store::ObjectKey;

/// What a successful reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing: wait for the next change (the key's retry backoff is reset).
    Done,
    /// Reconcile again right away (backoff reset).
    Requeue,
    /// Reconcile again after this delay (backoff reset).
    RequeueAfter(Duration),
}

/// What an [`ErrorPolicy`] decides for a failed (non-terminal) reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorAction {
    /// Retry with the queue's rate limiter (per-key exponential backoff). The default.
    Backoff,
    /// Retry after this delay, bypassing the rate limiter (still a retry: it counts
    /// towards [`Config::max_retries`](super::Config::max_retries)).
    RequeueAfter(Duration),
    /// Stop retrying: the key is forgotten until its next change (logged, counted in
    /// [`Metrics::gave_up`](super::Metrics::gave_up)).
    GiveUp,
}

/// The error type of a reconcile: displayable, and able to say that retrying is pointless.
///
/// A **terminal** error (`is_terminal() == true`) is logged at error level, counted in
/// [`Metrics::terminal`](super::Metrics::terminal) and never retried:
/// the key is forgotten until the object changes again. The [`ErrorPolicy`] is not
/// consulted. Any other error goes to the policy (default: retry with backoff).
///
/// Implemented for `String`, `&'static str`, [`Infallible`] and
/// `Box<dyn Error + Send + Sync>` (never terminal) and for [`Terminal`] (always terminal).
/// For your own error type, implement it in one line, overriding `is_terminal` where
/// some variants are terminal:
///
/// ```
/// use kcache::controller::ReconcileError;
///
/// #[derive(Debug)]
/// enum MyError { Conflict, InvalidSpec(String) }
/// impl std::fmt::Display for MyError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         match self {
///             MyError::Conflict => f.write_str("conflict"),
///             MyError::InvalidSpec(why) => write!(f, "invalid spec: {why}"),
///         }
///     }
/// }
/// impl ReconcileError for MyError {
///     fn is_terminal(&self) -> bool { matches!(self, MyError::InvalidSpec(_)) }
/// }
/// assert!(MyError::InvalidSpec("no image".into()).is_terminal());
/// assert!(!MyError::Conflict.is_terminal());
/// ```
pub trait ReconcileError: fmt::Display + Send + 'static {
    /// Whether retrying cannot help (default: `false`).
    fn is_terminal(&self) -> bool {
        false
    }
}

impl ReconcileError for String {}
impl ReconcileError for &'static str {}
impl ReconcileError for Infallible {}
impl ReconcileError for Box<dyn std::error::Error + Send + Sync> {}

/// Wraps an error to make it terminal: never retried (see [`ReconcileError`]).
///
/// ```
/// use kcache::controller::{ReconcileError, Terminal};
/// assert!(Terminal("the spec is invalid").is_terminal());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminal<E>(pub E);

impl<E: fmt::Display> fmt::Display for Terminal<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "terminal: {}", self.0)
    }
}

impl<E: fmt::Display + Send + 'static> ReconcileError for Terminal<E> {
    fn is_terminal(&self) -> bool {
        true
    }
}

/// Decides what to do with a failed, non-terminal reconcile (kube-rs' `error_policy`).
///
/// `retries` is how many times the key has been retried in a row before this failure (0 on
/// its first failure). [`Config::max_retries`](super::Config::max_retries)
/// applies on top: once reached, the key is given up whatever the policy says. Closures
/// `Fn(&ObjectKey, &E, u32) -> ErrorAction` are policies:
///
/// ```
/// use std::time::Duration;
/// use kcache::controller::{ErrorAction, ErrorPolicy};
/// use kcache::store::ObjectKey;
///
/// let policy = |_key: &ObjectKey, err: &String, retries: u32| {
///     if err.contains("conflict") && retries < 3 {
///         ErrorAction::RequeueAfter(Duration::from_millis(100))
///     } else {
///         ErrorAction::Backoff
///     }
/// };
/// let key = ObjectKey::new(Some("ns"), "a");
/// assert_eq!(policy.on_error(&key, &"conflict".to_owned(), 0), ErrorAction::RequeueAfter(Duration::from_millis(100)));
/// ```
pub trait ErrorPolicy<E>: Send + Sync + 'static {
    /// What to do after `error` reconciling `key`.
    fn on_error(&self, key: &ObjectKey, error: &E, retries: u32) -> ErrorAction;
}

impl<E, F> ErrorPolicy<E> for F
where
    F: Fn(&ObjectKey, &E, u32) -> ErrorAction + Send + Sync + 'static,
{
    fn on_error(&self, key: &ObjectKey, error: &E, retries: u32) -> ErrorAction {
        self(key, error, retries)
    }
}

/// The default [`ErrorPolicy`]: always [`ErrorAction::Backoff`] (client-go's
/// `AddRateLimited`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultErrorPolicy;

impl<E> ErrorPolicy<E> for DefaultErrorPolicy {
    fn on_error(&self, _key: &ObjectKey, _error: &E, _retries: u32) -> ErrorAction {
        ErrorAction::Backoff
    }
}
