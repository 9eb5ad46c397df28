//! client-go's `TestLeaderElectionConfigValidation`, one test per rule.

use std::time::Duration;

use crate::leaderelection::{Config, Error, FakeLock, LeaderElector};

fn with(f: impl FnOnce(&mut Config)) -> Result<(), Error> {
    let mut c = Config::new("baz");
    f(&mut c);
    c.validate()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn defaults_are_client_gos_and_valid() {
    let c = Config::new("baz");
    assert_eq!(
        (c.lease_duration, c.renew_deadline, c.retry_period),
        (secs(15), secs(10), secs(2))
    );
    assert!(!c.release_on_cancel);
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn rejects_a_zero_lease_duration() {
    assert_eq!(
        with(|c| c.lease_duration = Duration::ZERO),
        Err(Error::ZeroLeaseDuration)
    );
}

#[test]
fn rejects_a_zero_renew_deadline() {
    assert_eq!(
        with(|c| c.renew_deadline = Duration::ZERO),
        Err(Error::ZeroRenewDeadline)
    );
}

#[test]
fn rejects_a_zero_retry_period() {
    assert_eq!(
        with(|c| c.retry_period = Duration::ZERO),
        Err(Error::ZeroRetryPeriod)
    );
}

#[test]
fn rejects_a_lease_duration_not_above_the_renew_deadline() {
    for lease in [10, 5] {
        assert!(matches!(
            with(|c| c.lease_duration = secs(lease)),
            Err(Error::LeaseDurationNotAboveRenewDeadline { .. })
        ));
    }
}

#[test]
fn rejects_a_renew_deadline_not_above_the_jittered_retry_period() {
    // 1.2 * 9 s = 10.8 s, and 1.2 * 10 s = 12 s exactly.
    for (renew, retry) in [(10, 9), (12, 10)] {
        assert!(matches!(
            with(|c| {
                c.lease_duration = secs(15);
                c.renew_deadline = secs(renew);
                c.retry_period = secs(retry);
            }),
            Err(Error::RenewDeadlineNotAboveJitteredRetry { .. })
        ));
    }
    assert_eq!(
        with(|c| c.retry_period = Duration::from_millis(8300)),
        Ok(())
    );
}

#[test]
fn rejects_a_sub_second_lease_duration() {
    let r = with(|c| {
        c.lease_duration = Duration::from_millis(900);
        c.renew_deadline = Duration::from_millis(800);
        c.retry_period = Duration::from_millis(100);
    });
    assert!(matches!(r, Err(Error::LeaseDurationOutOfRange(_))));
}

#[test]
fn rejects_an_empty_identity() {
    assert_eq!(with(|c| c.identity.clear()), Err(Error::EmptyIdentity));
}

#[test]
fn the_elector_refuses_an_invalid_config() {
    let mut c = Config::new("");
    c.release_on_cancel = true;
    let err = LeaderElector::new(c, FakeLock::new()).unwrap_err();
    assert_eq!(err, Error::EmptyIdentity);
    assert!(err.to_string().contains("identity"));
}
