//! Running a future only while leading.

use tokio_util::sync::CancellationToken;

use super::{elector::LeaderElector, lock::LeaseLock};

/// Runs `elector` until `cancel` fires, and `work` only while it leads.
///
/// `work` starts when this candidate acquires the lease. If leadership ends first (lost, or
/// `cancel`), `work` is dropped before the lease is released and the result is `None`. If
/// `work` finishes while leading, the election ends (releasing the lease if
/// `release_on_cancel` is set) and the result is `Some(output)`. Either way the elector's
/// `on_stopped_leading` has run when this returns.
///
/// ```
/// use kcache::leaderelection::{Config, FakeLock, LeaderElector, run_leading};
/// use tokio_util::sync::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), kcache::leaderelection::Error> {
/// let elector = LeaderElector::new(Config::new("replica-0"), FakeLock::new())?;
/// let out = run_leading(&elector, CancellationToken::new(), async { 42 }).await;
/// assert_eq!(out, Some(42));
/// # Ok(())
/// # }
/// ```
pub async fn run_leading<L, F>(
    elector: &LeaderElector<L>,
    cancel: CancellationToken,
    work: F,
) -> Option<F::Output>
where
    L: LeaseLock,
    F: Future,
{
    let inner = cancel.child_token();
    let mut state = elector.watch();
    let run = elector.run(inner.clone());
    let guarded = async move {
        state.wait_for(|s| s.is_leading()).await.ok()?;
        tokio::select! {
            out = work => Some(out),
            _ = state.wait_for(|s| !s.is_leading()) => None,
        }
    };
    tokio::pin!(run, guarded);
    tokio::select! {
        () = &mut run => None,
        out = &mut guarded => {
            inner.cancel();
            run.await;
            out
        }
    }
}
