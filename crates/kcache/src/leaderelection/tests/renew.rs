//! Renewing and losing the lease: client-go's fast-path tests and the renew deadline.

use std::time::Duration;

use tokio::time::Instant;

use super::{ME, config, held_by, holder, start, wait_until};
use crate::leaderelection::{FakeLock, LeaderState, LeaseRecord, LockOp};

/// client-go "renew already acquired object" and "Exercise fast path after lock acquired":
/// the leader renews with updates alone, keeping its acquire time and transition count.
#[tokio::test(start_paused = true)]
async fn renews_the_lease_while_leading() {
    let lock = FakeLock::new();
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    let acquired = lock.record().unwrap();
    lock.clear_ops();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(me.elector.is_leader());
    let ops = lock.ops();
    assert!(
        ops.len() >= 2 && ops.iter().all(|op| *op == LockOp::Update),
        "{ops:?}"
    );
    let renewed = lock.record().unwrap();
    assert_eq!(renewed.holder_identity, ME);
    assert_eq!(renewed.acquire_time, acquired.acquire_time);
    assert_eq!(renewed.leader_transitions, 0);
    assert!(renewed.renew_time >= acquired.renew_time);
    assert_eq!(me.events(), ["new leader baz", "started"]);
    assert!(!me.leading_token().is_cancelled());
}

/// client-go "Fallback to slow path after fast path fails": a conflicting optimistic renewal
/// re-reads the lease and renews at the current version.
#[tokio::test(start_paused = true)]
async fn falls_back_to_the_slow_path_when_the_optimistic_renewal_conflicts() {
    let lock = FakeLock::new();
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    // Someone rewrites our record (same holder): our version is stale.
    let mut record = lock.record().unwrap();
    record.renew_time = None;
    lock.set_record(record);
    lock.clear_ops();
    wait_until("three calls", || lock.ops().len() >= 3).await;
    assert_eq!(
        lock.ops()[..3],
        [LockOp::Update, LockOp::Get, LockOp::Update]
    );
    assert!(me.elector.is_leader());
    assert_eq!(lock.record().unwrap().leader_transitions, 0);
    assert!(lock.record().unwrap().renew_time.is_some());
}

/// Losing on conflict: another candidate overwrites the lease; every renewal then conflicts,
/// re-reads and finds it held, and once the renew deadline passes this candidate steps down,
/// cancels the leading token and (although `release_on_cancel` is set) leaves the other's
/// lease alone.
#[tokio::test(start_paused = true)]
async fn steps_down_when_another_candidate_takes_over() {
    let lock = FakeLock::new();
    let mut me = start(&lock, config(ME, true));
    me.wait_leading().await;
    lock.set_record(held_by("other", 15));
    me.wait_ended().await;
    assert!(!me.elector.is_leader());
    assert!(me.leading_token().is_cancelled());
    assert_eq!(
        me.events(),
        ["new leader baz", "started", "new leader other", "stopped"]
    );
    assert_eq!(
        *me.elector.watch().borrow(),
        LeaderState::Standby {
            leader: Some("other".to_owned())
        }
    );
    assert_eq!(holder(&lock), "other");
    let ops = lock.ops();
    assert!(
        ops.contains(&LockOp::Get) && ops.contains(&LockOp::Update),
        "{ops:?}"
    );
}

/// Losing on renewal failures: with the lock unreachable, the leader keeps retrying until
/// `renew_deadline` (10 s) has passed, then steps down.
#[tokio::test(start_paused = true)]
async fn steps_down_when_renewals_fail_past_the_deadline() {
    let lock = FakeLock::new();
    let mut me = start(&lock, config(ME, false));
    me.wait_leading().await;
    let failing_since = Instant::now();
    lock.set_failing(true);
    me.wait_ended().await;
    assert!(
        failing_since.elapsed() >= Duration::from_secs(10),
        "stepped down before the renew deadline"
    );
    assert!(lock.ops().iter().filter(|op| **op == LockOp::Get).count() >= 2);
    assert!(me.leading_token().is_cancelled());
    assert_eq!(me.events(), ["new leader baz", "started", "stopped"]);
    assert_eq!(
        *me.elector.watch().borrow(),
        LeaderState::Standby { leader: None }
    );
}

/// Failures shorter than the renew deadline do not cost the lease.
#[tokio::test(start_paused = true)]
async fn survives_renewal_failures_shorter_than_the_deadline() {
    let lock = FakeLock::new();
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    lock.set_failing(true);
    tokio::time::sleep(Duration::from_secs(5)).await;
    lock.set_failing(false);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(me.elector.is_leader());
    assert_eq!(me.events(), ["new leader baz", "started"]);
    assert!(!me.leading_token().is_cancelled());
    assert_eq!(holder(&lock), ME);
}

/// Dropping the run's future (an aborted task) still ends leadership and runs
/// `on_stopped_leading`.
#[tokio::test(start_paused = true)]
async fn dropping_the_run_steps_down() {
    let lock = FakeLock::with_record(LeaseRecord::default());
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    me.handle.abort();
    wait_until("stopped", || {
        me.events().last().map(String::as_str) == Some("stopped")
    })
    .await;
    assert!(me.leading_token().is_cancelled());
    assert!(!me.elector.is_leader());
}
