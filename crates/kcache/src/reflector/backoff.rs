//! The reflector's backoff: client-go's `DelayWithReset` over an exponential `wait.Backoff`.

use std::time::Duration;

use tokio::time::Instant;

/// Exponential backoff with jitter and a reset after a healthy period.
///
/// Defaults are client-go's reflector backoff: 800 ms, doubling, capped at 30 s, jitter 1.0
/// (each delay is `d + rand[0, d)`), reset to 800 ms when no delay was asked for in 2 minutes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BackoffConfig {
    /// The first delay (client-go: 800 ms).
    pub initial: Duration,
    /// The largest base delay (client-go: 30 s); jitter may add up to `jitter ×` on top.
    pub max: Duration,
    /// Growth factor per step (client-go: 2.0).
    pub factor: f64,
    /// Jitter fraction: a delay `d` becomes `d + rand[0, jitter·d)` (client-go: 1.0).
    pub jitter: f64,
    /// After this long without a delay the backoff starts over (client-go: 2 min).
    pub reset_after: Duration,
}

impl BackoffConfig {
    /// A backoff from `initial` doubling up to `max`, with client-go's jitter (1.0) and reset
    /// (2 min); change the other settings through the builder methods.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache::reflector::BackoffConfig;
    ///
    /// let fixed = BackoffConfig::new(Duration::from_millis(10), Duration::from_millis(10))
    ///     .factor(1.0)
    ///     .jitter(0.0);
    /// assert_eq!(fixed.max, Duration::from_millis(10));
    /// ```
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            ..Self::default()
        }
    }

    /// Sets the growth factor per step.
    pub fn factor(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }

    /// Sets the jitter fraction.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// Sets how long without a delay starts the backoff over.
    pub fn reset_after(mut self, reset_after: Duration) -> Self {
        self.reset_after = reset_after;
        self
    }

    /// The reconnect backoff: 250 ms doubling to 1 s, jitter 0.5, reset after 2 min.
    ///
    /// Used while the server cannot be reached at all, so that the reflector notices within
    /// about a second that it is back (client-go keeps its 30 s cap here).
    pub fn reconnect() -> Self {
        Self {
            initial: Duration::from_millis(250),
            max: Duration::from_secs(1),
            factor: 2.0,
            jitter: 0.5,
            reset_after: Duration::from_secs(120),
        }
    }
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// The backoff state.
#[derive(Debug)]
pub(crate) struct Backoff {
    config: BackoffConfig,
    next: Duration,
    last: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Self {
        let next = config.initial;
        Self {
            config,
            next,
            last: None,
        }
    }

    /// The next delay to wait.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last) >= self.config.reset_after)
        {
            self.next = self.config.initial;
        }
        self.last = Some(now);
        let base = self.next.min(self.config.max);
        let factor = if self.config.factor.is_finite() {
            self.config.factor.max(1.0)
        } else {
            1.0
        };
        self.next = saturating_mul(base, factor).min(self.config.max);
        let jitter = if self.config.jitter.is_finite() && self.config.jitter > 0.0 {
            saturating_mul(base, self.config.jitter * rand::random::<f64>())
        } else {
            Duration::ZERO
        };
        base.saturating_add(jitter)
    }

    /// Starts over at the first delay: the server proved healthy (a watch delivered events
    /// and stayed open past the very-short-watch bound).
    pub(crate) fn reset(&mut self) {
        self.next = self.config.initial;
        self.last = None;
    }

    /// The largest base delay; server-sent `Retry-After` values are capped to it.
    pub(crate) fn cap(&self) -> Duration {
        self.config.max
    }

    /// The next delay, at least the server's `retry_after` when that is within
    /// [`Backoff::cap`]. A `Retry-After` beyond the cap (2^64-1, 10^9 s, a huge
    /// `retryAfterSeconds`) is not a plausible instruction: it is treated as malformed and
    /// ignored, so the normal backoff applies (client-go's reflector does not honour a watch's
    /// `Retry-After` at all; its own backoff decides).
    pub(crate) fn next_delay_honouring(&mut self, retry_after: Option<Duration>) -> Duration {
        let asked = retry_after.filter(|d| *d <= self.cap()).unwrap_or_default();
        self.next_delay().max(asked)
    }
}

/// `d × f`, saturating at [`Duration::MAX`] (and zero for a negative or NaN `f`).
fn saturating_mul(d: Duration, f: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * f).unwrap_or(if f > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_from_800ms_caps_at_30s_and_resets_after_2min() {
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::default()
        });
        let delays: Vec<_> = (0..8).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        tokio::time::advance(Duration::from_secs(121)).await;
        assert_eq!(b.next_delay(), Duration::from_millis(800));
    }

    #[tokio::test(start_paused = true)]
    async fn reset_starts_over_at_the_first_delay() {
        let mut b = Backoff::new(BackoffConfig::default().jitter(0.0));
        for _ in 0..4 {
            b.next_delay();
        }
        assert_eq!(b.next_delay(), Duration::from_millis(12_800));
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(800));
        assert_eq!(b.next_delay(), Duration::from_millis(1600));
    }

    #[tokio::test(start_paused = true)]
    async fn absurd_settings_and_retry_after_never_overflow() {
        let mut b = Backoff::new(BackoffConfig {
            initial: Duration::MAX,
            max: Duration::from_secs(30),
            factor: f64::INFINITY,
            jitter: f64::NAN,
            ..BackoffConfig::default()
        });
        assert_eq!(b.next_delay(), Duration::from_secs(30));
        assert_eq!(
            b.next_delay_honouring(Some(Duration::MAX)),
            Duration::from_secs(30)
        );
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::default()
        });
        assert_eq!(
            b.next_delay_honouring(Some(Duration::from_secs(1_000_000_000))),
            Duration::from_millis(800),
            "a Retry-After of 10^9 s is malformed: the normal backoff applies, not the cap"
        );
        assert_eq!(
            b.next_delay_honouring(Some(Duration::from_secs(31))),
            Duration::from_millis(1600),
            "a Retry-After just beyond the 30 s cap is ignored too"
        );
        assert_eq!(
            b.next_delay_honouring(Some(Duration::from_secs(30))),
            Duration::from_secs(30),
            "a Retry-After at the cap is honoured"
        );
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::default()
        });
        assert_eq!(
            b.next_delay_honouring(Some(Duration::from_secs(5))),
            Duration::from_secs(5),
            "a reasonable Retry-After is honoured when longer than the backoff"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_jitter_stays_within_one_base_delay() {
        let mut b = Backoff::new(BackoffConfig::default());
        for base in [800u128, 1600, 3200] {
            let d = b.next_delay().as_millis();
            assert!(
                (base..2 * base).contains(&d),
                "{d} not in [{base}, {})",
                2 * base
            );
        }
    }
}
