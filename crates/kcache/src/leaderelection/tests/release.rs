//! Releasing on cancel (client-go's `TestReleaseLease`, `TestReleaseOnCancellation`,
//! `TestReleaseMethodCallsGet`), leader transitions and `run_leading`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ME, config, held_by, holder, spawn_holder, start};
use crate::leaderelection::{FakeLock, LeaderElector, LeaderState, LockOp, run_leading};

/// Cancelled while leading with `release_on_cancel`: the lease is written with an empty
/// holder and a 1 s duration, keeping the transition count, before `on_stopped_leading`.
#[tokio::test(start_paused = true)]
async fn release_on_cancel_clears_the_holder() {
    let lock = FakeLock::new();
    let me = start(&lock, config(ME, true));
    me.wait_leading().await;
    let me = me.stop().await;
    let record = lock.record().unwrap();
    assert_eq!(record.holder_identity, "");
    assert_eq!(record.lease_duration_seconds, 1);
    assert_eq!(record.leader_transitions, 0);
    assert_eq!(me.events(), ["new leader baz", "started", "stopped"]);
    assert!(me.leading_token().is_cancelled());
    assert_eq!(
        *me.elector.watch().borrow(),
        LeaderState::Standby { leader: None }
    );
    assert_eq!(me.elector.leader(), None);
}

/// Without `release_on_cancel` the lease stays ours until it expires.
#[tokio::test(start_paused = true)]
async fn cancel_without_release_keeps_the_holder() {
    let lock = FakeLock::new();
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    let me = me.stop().await;
    assert_eq!(holder(&lock), ME);
    assert_eq!(me.events().last().map(String::as_str), Some("stopped"));
}

/// A standby takes over a released lease on its next attempt, well before the released
/// holder's lease duration (15 s) would have run out.
#[tokio::test(start_paused = true)]
async fn a_standby_takes_over_a_released_lease_at_once() {
    let lock = FakeLock::new();
    let me = start(&lock, config(ME, true));
    me.wait_leading().await;
    let other = start(&lock, config("other", true));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!other.elector.is_leader());
    let released_at = Instant::now();
    me.stop().await;
    other.wait_leading().await;
    assert!(released_at.elapsed() < Duration::from_secs(15));
    assert_eq!(holder(&lock), "other");
    assert_eq!(lock.record().unwrap().leader_transitions, 1);
    other.stop().await;
}

/// client-go `TestReleaseMethodCallsGet`: release reads the lease first, and writes nothing
/// when this candidate is not the holder.
#[tokio::test(start_paused = true)]
async fn release_reads_and_leaves_another_holders_lease_alone() {
    let lock = FakeLock::with_record(held_by("bing", 15));
    let elector = LeaderElector::new(config(ME, true), lock.clone()).unwrap();
    assert!(elector.release().await);
    assert_eq!(lock.ops(), [LockOp::Get]);
    assert_eq!(holder(&lock), "bing");
}

/// Each hand-over counts one transition; a release does not.
#[tokio::test(start_paused = true)]
async fn leader_transitions_are_counted() {
    let lock = FakeLock::new();
    for (round, id) in ["a", "b", "a"].into_iter().enumerate() {
        let c = start(&lock, config(id, true));
        c.wait_leading().await;
        assert_eq!(lock.record().unwrap().leader_transitions, round as i32);
        c.stop().await;
        assert_eq!(lock.record().unwrap().leader_transitions, round as i32);
    }
}

/// `run_leading` polls the work only while leading and drops it when leadership is lost.
#[tokio::test(start_paused = true)]
async fn run_leading_runs_work_only_while_leading() {
    let lock = FakeLock::new();
    let bing = spawn_holder(&lock, "bing", 3);
    let elector = LeaderElector::new(config(ME, true), lock.clone()).unwrap();
    let (started, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, d) = (started.clone(), dropped.clone());
    let work = async move {
        let _guard = SetOnDrop(d);
        s.store(true, Ordering::SeqCst);
        std::future::pending::<()>().await;
    };
    let lock2 = lock.clone();
    let driver = async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(
            !started.load(Ordering::SeqCst),
            "work ran while standing by"
        );
        bing.cancel();
        while !started.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(holder(&lock2), ME);
        lock2.set_record(held_by("other", 15));
    };
    let (out, ()) = tokio::join!(
        run_leading(&elector, CancellationToken::new(), work),
        driver
    );
    assert_eq!(out, None);
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(holder(&lock), "other", "a lost lease is not released");
}

/// Work that finishes while leading ends the election, releasing the lease.
#[tokio::test(start_paused = true)]
async fn run_leading_ends_the_election_when_the_work_finishes() {
    let lock = FakeLock::new();
    let elector = LeaderElector::new(config(ME, true), lock.clone()).unwrap();
    let out = run_leading(&elector, CancellationToken::new(), async { 7 }).await;
    assert_eq!(out, Some(7));
    assert_eq!(holder(&lock), "");
    assert!(!elector.is_leader());
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
