//! Fixed-bucket histograms kept in atomics, for exporters to read without a metrics library.
//!
//! The reflector (items and duration of each initial sync) and the controller (reconcile
//! time) record observations here on their hot paths — one relaxed `fetch_add` per bucket
//! search plus a compare-and-swap on the sum — and an exporter such as `kcache-metrics` reads a
//! [`HistogramSnapshot`] at scrape time and encodes it as a Prometheus histogram.
//!
//! Only [`HistogramSnapshot`] is public (re-exported at the crate root, returned by
//! `ReflectorHandle::list_items`, `list_duration` and `controller::Metrics::reconcile_time`);
//! the atomic histogram and the bucket tables are the crate's own.

use std::sync::atomic::{AtomicU64, Ordering};

/// client-go's `rest_client_request_duration_seconds` buckets (seconds), used for the
/// reflector's list duration.
pub(crate) const REQUEST_DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// Buckets for the number of objects in one list.
pub(crate) const LIST_ITEMS_BUCKETS: &[f64] = &[
    0.0, 1.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0, 50000.0, 100000.0,
];

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets (seconds).
pub(crate) const RECONCILE_TIME_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// A histogram read at one moment: per-bucket counts (not cumulative) and the sum.
///
/// ```
/// use kcache::HistogramSnapshot;
///
/// let s = HistogramSnapshot {
///     bounds: vec![1.0, 10.0],
///     counts: vec![2, 1, 0],
///     sum: 7.5,
/// };
/// assert_eq!(s.count(), 3);
/// assert_eq!(s.cumulative(), vec![(1.0, 2), (10.0, 3), (f64::INFINITY, 3)]);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistogramSnapshot {
    /// The buckets' upper bounds (inclusive), ascending; the `+Inf` bucket is implied.
    pub bounds: Vec<f64>,
    /// Observations per bucket: `counts[i]` fell in `(bounds[i-1], bounds[i]]`; the last entry
    /// (`counts[bounds.len()]`) is the `+Inf` bucket.
    pub counts: Vec<u64>,
    /// The sum of all observations.
    pub sum: f64,
}

impl HistogramSnapshot {
    /// The number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(upper bound, observations ≤ bound)` per bucket, ending with `+Inf`, as Prometheus
    /// exposes them.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        self.bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(&self.counts)
            .map(|(bound, n)| {
                total += n;
                (bound, total)
            })
            .collect()
    }
}

/// A histogram over fixed bounds whose observations are atomic adds.
#[derive(Debug)]
pub(crate) struct AtomicHistogram {
    bounds: &'static [f64],
    /// One per bound, then `+Inf`.
    counts: Box<[AtomicU64]>,
    /// The sum's `f64` bits.
    sum: AtomicU64,
}

impl AtomicHistogram {
    pub(crate) fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Records one observation.
    pub(crate) fn observe(&self, value: f64) {
        let i = self.bounds.partition_point(|b| *b < value);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds.to_vec(),
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: f64::from_bits(self.sum.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_whose_bound_is_not_below_them() {
        let h = AtomicHistogram::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 1.5, 10.0, 11.0, 1e9] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(
            s.counts,
            vec![2, 2, 2],
            "le=1 takes 0.5 and 1.0 (bounds are inclusive)"
        );
        assert_eq!(s.count(), 6);
        assert_eq!(s.sum, 0.5 + 1.0 + 1.5 + 10.0 + 11.0 + 1e9);
        assert_eq!(
            s.cumulative(),
            vec![(1.0, 2), (10.0, 4), (f64::INFINITY, 6)]
        );
    }

    #[test]
    fn bucket_tables_are_ascending() {
        for b in [
            REQUEST_DURATION_BUCKETS,
            LIST_ITEMS_BUCKETS,
            RECONCILE_TIME_BUCKETS,
        ] {
            assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
        }
        assert_eq!(RECONCILE_TIME_BUCKETS.len(), 40);
    }
}
