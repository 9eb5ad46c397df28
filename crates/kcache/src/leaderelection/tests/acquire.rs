//! Acquiring: client-go's `TestTryAcquireOrRenew` cases, callbacks and the state watch.

use std::time::Duration;

use tokio::time::Instant;

use super::{ME, config, held_by, holder, spawn_holder, start, wait_until};
use crate::leaderelection::{FakeLock, LeaderState, LeaseRecord, LockOp};

/// client-go "acquire from no object".
#[tokio::test(start_paused = true)]
async fn acquires_a_missing_lease_by_creating_it() {
    let lock = FakeLock::new();
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    assert!(me.elector.is_leader());
    assert_eq!(lock.ops()[..2], [LockOp::Get, LockOp::Create]);
    let record = lock.record().unwrap();
    assert_eq!(record.holder_identity, ME);
    assert_eq!(record.lease_duration_seconds, 15);
    assert_eq!(record.leader_transitions, 0);
    assert!(record.acquire_time.is_some() && record.renew_time.is_some());
    assert_eq!(me.events(), ["new leader baz", "started"]);
    assert_eq!(me.elector.leader().as_deref(), Some(ME));
}

/// client-go "acquire from unled object" and "acquire from empty led, acked object": an
/// empty holder is free at once, whatever the lease duration says.
#[tokio::test(start_paused = true)]
async fn acquires_an_unheld_lease_at_once() {
    let lock = FakeLock::with_record(held_by("", 15));
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    assert_eq!(
        lock.ops()[..2],
        [LockOp::Get, LockOp::Update],
        "first attempt"
    );
    assert_eq!(holder(&lock), ME);
    assert_eq!(lock.record().unwrap().leader_transitions, 1);
}

/// client-go "acquire from object without annotations": a lease with an empty spec.
#[tokio::test(start_paused = true)]
async fn acquires_a_lease_with_an_empty_record() {
    let lock = FakeLock::with_record(LeaseRecord::default());
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    assert_eq!(lock.ops()[..2], [LockOp::Get, LockOp::Update]);
    assert_eq!(lock.record().unwrap().leader_transitions, 1);
}

/// client-go "acquire from led object with the lease duration seconds" and "acquire from
/// led, unacked object": a lease nobody renews is taken over once this replica has seen it
/// unchanged for its duration (3 s here), on its own clock.
#[tokio::test(start_paused = true)]
async fn acquires_an_expired_lease_held_by_another() {
    let lock = FakeLock::with_record(held_by("bing", 3));
    let begin = Instant::now();
    let me = start(&lock, config(ME, false));
    me.wait_leading().await;
    assert!(
        begin.elapsed() >= Duration::from_secs(3),
        "took over before observing the lease unchanged for its duration"
    );
    let record = lock.record().unwrap();
    assert_eq!(record.holder_identity, ME);
    assert_eq!(record.leader_transitions, 1);
    assert_eq!(
        me.events(),
        ["new leader bing", "new leader baz", "started"]
    );
}

/// client-go "don't acquire from led, acked object": while the holder keeps changing the
/// record, a standby never writes, however old the record's timestamps are.
#[tokio::test(start_paused = true)]
async fn does_not_acquire_a_valid_lease_held_by_another() {
    let lock = FakeLock::new();
    let bing = spawn_holder(&lock, "bing", 3);
    let me = start(&lock, config(ME, false));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!me.elector.is_leader());
    assert_eq!(holder(&lock), "bing");
    assert!(
        lock.ops().iter().all(|op| *op == LockOp::Get),
        "{:?}",
        lock.ops()
    );
    assert_eq!(
        *me.elector.watch().borrow(),
        LeaderState::Standby {
            leader: Some("bing".to_owned())
        }
    );
    assert_eq!(me.events(), ["new leader bing"]);

    bing.cancel();
    me.wait_leading().await;
    assert_eq!(holder(&lock), ME);
}

/// `on_new_leader` is called for every change of the observed holder, and the standby state
/// follows it.
#[tokio::test(start_paused = true)]
async fn reports_each_new_leader_observed() {
    let lock = FakeLock::new();
    let bing = spawn_holder(&lock, "bing", 15);
    let me = start(&lock, config(ME, false));
    wait_until("bing observed", || me.events().len() == 1).await;
    bing.cancel();
    let other = spawn_holder(&lock, "other", 15);
    wait_until("other observed", || me.events().len() == 2).await;
    assert_eq!(me.events(), ["new leader bing", "new leader other"]);
    assert_eq!(me.elector.leader().as_deref(), Some("other"));
    let mut rx = me.elector.watch();
    let want = LeaderState::Standby {
        leader: Some("other".to_owned()),
    };
    rx.wait_for(|s| *s == want).await.unwrap();
    other.cancel();
}

/// client-go's `OnStoppedLeading` contract: it runs whenever `run` ends, even if this
/// candidate never led.
#[tokio::test(start_paused = true)]
async fn on_stopped_leading_runs_even_if_never_leading() {
    let lock = FakeLock::new();
    let bing = spawn_holder(&lock, "bing", 15);
    let me = start(&lock, config(ME, false));
    wait_until("bing observed", || !me.events().is_empty()).await;
    let me = me.stop().await;
    assert_eq!(me.events(), ["new leader bing", "stopped"]);
    assert!(!me.elector.is_leader());
    bing.cancel();
}

/// A run cancelled before it starts makes no call and still reports that it stopped.
#[tokio::test(start_paused = true)]
async fn a_cancelled_run_returns_at_once() {
    let lock = FakeLock::new();
    let me = start(&lock, config(ME, true));
    me.cancel.cancel();
    let me = me.stop().await;
    assert!(lock.ops().is_empty(), "{:?}", lock.ops());
    assert_eq!(me.events(), ["stopped"]);
}

/// The callbacks' order over a whole run: the holder observed, this candidate observed as
/// the new holder, started, then (on cancel) stopped; the leading token is cancelled when
/// the run returns.
#[tokio::test(start_paused = true)]
async fn callbacks_run_in_order() {
    let lock = FakeLock::with_record(held_by("bing", 3));
    let me = start(&lock, config(ME, true));
    me.wait_leading().await;
    assert_eq!(
        me.events(),
        ["new leader bing", "new leader baz", "started"]
    );
    let token = me.leading_token();
    assert!(!token.is_cancelled());
    let me = me.stop().await;
    assert!(token.is_cancelled());
    assert_eq!(
        me.events(),
        ["new leader bing", "new leader baz", "started", "stopped"]
    );
}
