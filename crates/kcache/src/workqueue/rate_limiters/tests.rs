use std::time::Duration;

use super::*;

const MS: Duration = Duration::from_millis(1);

#[test]
fn exponential_limiter_doubles_from_5ms_and_caps_at_1000s() {
    let limiter = ItemExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1000));
    let mut expected = 5 * MS;
    for failure in 0..18 {
        assert_eq!(limiter.when(&"one"), expected, "failure {failure}");
        expected *= 2;
    }
    // 5 ms * 2^18 = 1310.72 s > 1000 s: capped from here on.
    for _ in 0..100 {
        assert_eq!(limiter.when(&"one"), Duration::from_secs(1000));
    }
    assert_eq!(limiter.num_requeues(&"one"), 118);
    assert_eq!(limiter.when(&"two"), 5 * MS, "items are tracked separately");
}

#[test]
fn exponential_limiter_does_not_overflow() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000));
    for _ in 0..1000 {
        limiter.when(&"overflow");
    }
    assert_eq!(limiter.when(&"overflow"), Duration::from_secs(1000));

    let limiter = ItemExponentialFailureRateLimiter::new(
        Duration::from_secs(60),
        Duration::from_secs(1000 * 3600),
    );
    limiter.when(&"two");
    limiter.when(&"two");
    assert_eq!(limiter.when(&"two"), Duration::from_secs(240));
    for _ in 0..1000 {
        limiter.when(&"overflow");
    }
    assert_eq!(limiter.when(&"overflow"), Duration::from_secs(1000 * 3600));

    let huge = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
    assert_eq!(huge.when(&1), Duration::MAX);
    assert_eq!(huge.when(&1), Duration::MAX);
}

#[test]
fn forget_resets_failures() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
    assert_eq!(limiter.when(&"a"), MS);
    assert_eq!(limiter.when(&"a"), 2 * MS);
    assert_eq!(limiter.num_requeues(&"a"), 2);
    limiter.forget(&"a");
    assert_eq!(limiter.num_requeues(&"a"), 0);
    assert_eq!(limiter.when(&"a"), MS);

    let fast_slow = ItemFastSlowRateLimiter::new(MS, Duration::from_secs(1), 1);
    fast_slow.when(&"a");
    fast_slow.when(&"a");
    fast_slow.forget(&"a");
    assert_eq!(fast_slow.num_requeues(&"a"), 0);
    assert_eq!(fast_slow.when(&"a"), MS);
}

#[test]
fn fast_slow_limiter_is_fast_for_the_first_attempts_then_slow() {
    let limiter = ItemFastSlowRateLimiter::new(5 * MS, Duration::from_secs(10), 3);
    for _ in 0..3 {
        assert_eq!(limiter.when(&"one"), 5 * MS);
    }
    assert_eq!(limiter.when(&"one"), Duration::from_secs(10));
    assert_eq!(limiter.when(&"one"), Duration::from_secs(10));
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 1);
}

#[tokio::test(start_paused = true)]
async fn bucket_allows_burst_of_100_then_10_per_second() {
    let bucket = BucketRateLimiter::new(10.0, 100).unwrap();
    let when = |bucket: &BucketRateLimiter| RateLimiter::<()>::when(bucket, &());
    for i in 0..100 {
        assert_eq!(when(&bucket), Duration::ZERO, "burst token {i}");
    }
    // The bucket is empty: each further token is reserved 100 ms after the previous one.
    assert_eq!(when(&bucket), 100 * MS);
    assert_eq!(when(&bucket), 200 * MS);
    assert_eq!(when(&bucket), 300 * MS);

    // A full second later, the three reservations are paid and 7 tokens have come back.
    tokio::time::advance(Duration::from_secs(1)).await;
    for i in 0..7 {
        assert_eq!(when(&bucket), Duration::ZERO, "refilled token {i}");
    }
    assert_eq!(when(&bucket), 100 * MS);

    // Idle long enough, the bucket is full again, but never holds more than the burst.
    tokio::time::advance(Duration::from_secs(3600)).await;
    for _ in 0..100 {
        assert_eq!(when(&bucket), Duration::ZERO);
    }
    assert_eq!(when(&bucket), 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn bucket_tracks_no_items() {
    let bucket = BucketRateLimiter::default_controller();
    for _ in 0..150 {
        RateLimiter::<&str>::when(&bucket, &"a");
    }
    assert_eq!(RateLimiter::<&str>::num_requeues(&bucket, &"a"), 0);
    RateLimiter::<&str>::forget(&bucket, &"a");
    assert_eq!(
        RateLimiter::<&str>::when(&bucket, &"a"),
        51 * 100 * MS,
        "forget does not refill the bucket"
    );
}

#[test]
fn bucket_rejects_invalid_rates_and_bursts() {
    assert_eq!(
        BucketRateLimiter::new(0.0, 1).unwrap_err(),
        Error::InvalidRate(0.0)
    );
    assert_eq!(
        BucketRateLimiter::new(-1.0, 1).unwrap_err(),
        Error::InvalidRate(-1.0)
    );
    assert!(matches!(
        BucketRateLimiter::new(f64::NAN, 1),
        Err(Error::InvalidRate(_))
    ));
    assert!(matches!(
        BucketRateLimiter::new(f64::INFINITY, 1),
        Err(Error::InvalidRate(_))
    ));
    assert!(matches!(
        BucketRateLimiter::new(1e12, 1),
        Err(Error::InvalidRate(_))
    ));
    assert!(matches!(
        BucketRateLimiter::new(1e-30, 1),
        Err(Error::InvalidRate(_))
    ));
    assert_eq!(
        BucketRateLimiter::new(10.0, 0).unwrap_err(),
        Error::ZeroBurst
    );
    assert!(BucketRateLimiter::new(0.5, u32::MAX).is_ok());
}

#[tokio::test(start_paused = true)]
async fn max_of_limiter_returns_the_longest_wait() {
    let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(
            5 * MS,
            3 * Duration::from_secs(1),
            3,
        )),
        Box::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        )),
    ]);
    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), 5 * MS);
    assert_eq!(limiter.when(&"one"), Duration::from_secs(3));
    assert_eq!(limiter.when(&"one"), Duration::from_secs(3));
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    limiter.forget(&"one");
    assert_eq!(
        limiter.num_requeues(&"one"),
        0,
        "forget reaches every limiter"
    );
    assert_eq!(limiter.when(&"one"), 5 * MS);
}

#[tokio::test(start_paused = true)]
async fn default_controller_limiter_is_the_max_of_exponential_and_bucket() {
    let limiter = default_controller_rate_limiter::<u32>();
    // Item 0 fails repeatedly: per-item exponential from 5 ms.
    assert_eq!(limiter.when(&0), 5 * MS);
    assert_eq!(limiter.when(&0), 10 * MS);
    assert_eq!(limiter.when(&0), 20 * MS);
    // 97 more distinct items use up the burst of 100; each waits only its own 5 ms.
    for item in 1..98 {
        assert_eq!(limiter.when(&item), 5 * MS);
    }
    // The bucket is empty now: the overall 10 qps dominates a first failure.
    assert_eq!(limiter.when(&1000), 100 * MS);
    assert_eq!(limiter.when(&1001), 200 * MS);
    assert_eq!(limiter.num_requeues(&0), 3);
    limiter.forget(&0);
    assert_eq!(limiter.num_requeues(&0), 0);
}

#[test]
fn with_max_wait_limiter_caps_the_wait() {
    let limiter = WithMaxWaitRateLimiter::new(
        ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(1000)),
        Duration::from_secs(4),
    );
    assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
    assert_eq!(limiter.when(&"a"), Duration::from_secs(2));
    assert_eq!(limiter.when(&"a"), Duration::from_secs(4));
    assert_eq!(limiter.when(&"a"), Duration::from_secs(4));
    assert_eq!(limiter.num_requeues(&"a"), 4);
    limiter.forget(&"a");
    assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
}

#[test]
fn default_item_based_limiter_starts_at_1ms() {
    let limiter = default_item_based_rate_limiter::<&str>();
    assert_eq!(limiter.when(&"a"), MS);
    assert_eq!(limiter.when(&"a"), 2 * MS);
}
