//! [`LeaderElector::check`](crate::leaderelection::LeaderElector::check), client-go's
//! leader-election health check, in paused time.

use std::time::Duration;

use super::{ME, config, spawn_holder, start, wait_until};
use crate::leaderelection::FakeLock;

/// client-go's defaults: lease 15 s; with a 5 s tolerance the check fails from 20 s after the
/// last renewal.
const TOLERANCE: Duration = Duration::from_secs(5);

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_fails_the_check_after_lease_duration_plus_tolerance() {
    let lock = FakeLock::new();
    let mut me = start(&lock, config(ME, false));
    me.wait_leading().await;
    assert_eq!(me.elector.check(TOLERANCE), Ok(()));

    lock.set_failing(true);
    // Renewals fail; after the renew deadline (10 s) the elector steps down and `run`
    // returns, but the record it last saw still names it: it still believes it leads.
    me.wait_ended().await;
    assert!(!me.elector.is_leader());
    let renewed = me.elector.observed.lock().time.expect("renewed once");
    let limit = renewed + Duration::from_secs(15) + TOLERANCE;
    tokio::time::sleep_until(limit).await;
    assert_eq!(
        me.elector.check(TOLERANCE),
        Ok(()),
        "exactly lease + tolerance: still healthy"
    );
    tokio::time::sleep(Duration::from_millis(1)).await;
    let err = me.elector.check(TOLERANCE).expect_err("overdue");
    assert_eq!(err.identity, ME);
    assert_eq!(
        err.since,
        Duration::from_secs(20) + Duration::from_millis(1)
    );
    assert!(
        err.to_string()
            .contains("failed election to renew leadership"),
        "{err}"
    );

    // The server is back and the process competes again: it renews, and is healthy.
    lock.set_failing(false);
    let elector = me.elector.clone();
    let cancel = me.cancel.clone();
    let again = tokio::spawn(async move { elector.run(cancel).await });
    wait_until("leading again", || me.elector.is_leader()).await;
    assert_eq!(me.elector.check(TOLERANCE), Ok(()));
    me.cancel.cancel();
    again.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_standby_is_healthy_however_long_the_lock_fails() {
    let lock = FakeLock::new();
    let other = spawn_holder(&lock, "other", 15);
    let me = start(&lock, config(ME, false));
    wait_until("saw the other leader", || {
        me.elector.leader().as_deref() == Some("other")
    })
    .await;
    lock.set_failing(true);
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(!me.elector.is_leader());
    assert_eq!(me.elector.check(TOLERANCE), Ok(()));
    other.cancel();
    me.stop().await;
}
