//! Rate limiters: how long an item should wait before it is retried.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::error::{Error, Result};

/// Decides how long an item waits before its next try (client-go's `TypedRateLimiter`).
///
/// Implementations are shared by all workers, hence `&self` and `Send + Sync`.
pub trait RateLimiter<T>: Send + Sync {
    /// Records one more failure of `item` and returns how long it should wait.
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item` (it succeeded, or the caller gave up on it).
    fn forget(&self, item: &T);
    /// How many failures of `item` are being tracked.
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

/// client-go's default for controllers: the worse of a per-item exponential backoff (5 ms
/// doubling up to 1000 s) and an overall token bucket (10 per second, burst 100).
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::default_controller()),
    ])
}

/// client-go's default per-item limiter: exponential from 1 ms up to 1000 s.
pub fn default_item_based_rate_limiter<T>() -> ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash,
{
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}

/// `base * 2^failures`, capped at `max`, per item. The failure count grows with every
/// [`when`](RateLimiter::when) and is reset by [`forget`](RateLimiter::forget).
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: Mutex<HashMap<T, u32>>,
    base: Duration,
    max: Duration,
}

impl<T: Clone + Eq + Hash> ItemExponentialFailureRateLimiter<T> {
    /// Waits `base` after the first failure, doubling after each further one, never more
    /// than `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            base,
            max,
        }
    }

    /// `base * 2^exponent`, or `max` if that is larger or does not fit.
    fn backoff(&self, exponent: u32) -> Duration {
        let max = self.max.as_nanos();
        let delay = 1u128
            .checked_shl(exponent)
            .and_then(|factor| self.base.as_nanos().checked_mul(factor))
            .map_or(max, |delay| delay.min(max));
        nanos_to_duration(delay)
    }
}

/// A nanosecond count that came from a `Duration` (so it fits one) back into a `Duration`.
fn nanos_to_duration(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).unwrap_or(u64::MAX);
    // The remainder is below one second, so it fits a u32.
    let subsec = u32::try_from(nanos % NANOS_PER_SEC).unwrap_or(0);
    Duration::new(secs, subsec)
}

impl<T> RateLimiter<T> for ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let exponent = {
            let mut failures = self.failures.lock();
            let count = failures.entry(item.clone()).or_insert(0);
            let exponent = *count;
            *count = count.saturating_add(1);
            exponent
        };
        self.backoff(exponent)
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures.lock().get(item).map_or(0, |&n| n as usize)
    }
}

impl<T> fmt::Debug for ItemExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponentialFailureRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("tracked", &self.failures.lock().len())
            .finish()
    }
}

/// An overall token bucket (not per item), like `golang.org/x/time/rate` as client-go uses it:
/// the bucket holds up to `burst` tokens and refills at `qps` tokens per second; each
/// [`when`](RateLimiter::when) takes a token, reserving a future one (and returning the wait
/// until it) when the bucket is empty. It tracks no items: `forget` does nothing and
/// `num_requeues` is 0.
///
/// Time is tokio's [`Instant`], so paused-time tests control it.
pub struct BucketRateLimiter {
    /// Time per token.
    interval: Duration,
    /// `burst * interval`: how far the bucket's clock may run behind now (a full bucket).
    capacity: Duration,
    /// The "theoretical arrival time" of the bucket (GCRA): the time at which the bucket will
    /// be full again given the tokens already taken. `None` until the first call.
    full_at: Mutex<Option<Instant>>,
}

impl BucketRateLimiter {
    /// A bucket of `burst` tokens refilled at `qps` tokens per second.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRate`] if `qps` is not a finite number above zero (or so large that a
    /// token lasts less than a nanosecond), [`Error::ZeroBurst`] if `burst` is 0.
    pub fn new(qps: f64, burst: u32) -> Result<Self> {
        if !qps.is_finite() || qps <= 0.0 {
            return Err(Error::InvalidRate(qps));
        }
        if burst == 0 {
            return Err(Error::ZeroBurst);
        }
        let interval =
            Duration::try_from_secs_f64(qps.recip()).map_err(|_| Error::InvalidRate(qps))?;
        if interval.is_zero() {
            return Err(Error::InvalidRate(qps));
        }
        let capacity = interval.checked_mul(burst).ok_or(Error::InvalidRate(qps))?;
        Ok(Self {
            interval,
            capacity,
            full_at: Mutex::new(None),
        })
    }

    /// client-go's overall controller limiter: 10 per second, burst 100.
    pub fn default_controller() -> Self {
        Self {
            interval: Duration::from_millis(100),
            capacity: Duration::from_secs(10),
            full_at: Mutex::new(None),
        }
    }

    /// Takes one token and returns how long to wait until it is available.
    fn reserve(&self) -> Duration {
        let now = Instant::now();
        let mut full_at = self.full_at.lock();
        // A bucket that was full at some time in the past is simply full now.
        let start = full_at.map_or(now, |at| at.max(now));
        let next = start + self.interval;
        *full_at = Some(next);
        // The token is available once the bucket's clock is within `capacity` of now.
        next.saturating_duration_since(now)
            .saturating_sub(self.capacity)
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}

impl fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRateLimiter")
            .field("interval", &self.interval)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

/// `fast` for the first `max_fast_attempts` failures of an item, `slow` after that.
pub struct ItemFastSlowRateLimiter<T> {
    failures: Mutex<HashMap<T, u32>>,
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
}

impl<T: Clone + Eq + Hash> ItemFastSlowRateLimiter<T> {
    /// Waits `fast` for the first `max_fast_attempts` failures of an item, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            fast,
            slow,
            max_fast_attempts,
        }
    }
}

impl<T> RateLimiter<T> for ItemFastSlowRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let attempts = {
            let mut failures = self.failures.lock();
            let count = failures.entry(item.clone()).or_insert(0);
            *count = count.saturating_add(1);
            *count
        };
        if attempts <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures.lock().get(item).map_or(0, |&n| n as usize)
    }
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .finish_non_exhaustive()
    }
}

/// Asks every limiter and returns the longest wait (and the largest requeue count); `forget`
/// goes to all of them.
///
/// As in client-go, combining with a token bucket can appear to exceed the burst when some
/// items were delayed longer by another limiter.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`. With none, every wait is zero.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // Every limiter must see the failure (no short-circuit), as in client-go.
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

/// Caps another limiter's waits at `max`.
#[derive(Debug)]
pub struct WithMaxWaitRateLimiter<R> {
    limiter: R,
    max: Duration,
}

impl<R> WithMaxWaitRateLimiter<R> {
    /// Waits what `limiter` says, but never more than `max`.
    pub fn new(limiter: R, max: Duration) -> Self {
        Self { limiter, max }
    }
}

impl<T, R: RateLimiter<T>> RateLimiter<T> for WithMaxWaitRateLimiter<R> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max)
    }
    fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests;
