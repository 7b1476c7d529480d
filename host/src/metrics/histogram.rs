//! A histogram made of atomics only, for the decision path.
//!
//! `prometheus_client`'s own `Histogram` takes a mutex on every
//! observation; a decision observes one per unit call and many threads
//! decide at once, so that would be a lock shared by every cluster. This
//! one counts with relaxed atomic adds and hands its figures to the
//! crate's encoder, which writes the exposition (no hand-written text).
//! A scrape may see a count and its buckets a few observations apart,
//! which Prometheus tolerates (rates over minutes).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Observations by bucket, their count and their sum; cloning shares them.
#[derive(Clone, Debug)]
pub struct AtomicHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Upper bounds, ascending; an implicit `+Inf` bucket follows.
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); one more than `bounds`.
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    /// The sum's `f64` bits, added to with a compare-and-swap loop.
    sum: AtomicU64,
}

impl AtomicHistogram {
    /// An empty histogram with these upper bounds (ascending).
    pub fn new(bounds: &'static [f64]) -> Self {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "ascending bounds");
        AtomicHistogram {
            inner: Arc::new(Inner {
                bounds,
                buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
                count: AtomicU64::new(0),
                sum: AtomicU64::new(0f64.to_bits()),
            }),
        }
    }

    /// Counts one observation of `value` (in the bucket of the first
    /// bound at or above it, Prometheus' `le`).
    pub fn observe(&self, value: f64) {
        let inner = &*self.inner;
        let bucket = inner.bounds.partition_point(|bound| *bound < value);
        inner.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        inner.count.fetch_add(1, Ordering::Relaxed);
        let _ = inner
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.inner.count.load(Ordering::Relaxed)
    }

    /// The sum of the observations so far.
    pub fn sum(&self) -> f64 {
        f64::from_bits(self.inner.sum.load(Ordering::Relaxed))
    }
}

impl TypedMetric for AtomicHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let inner = &*self.inner;
        let buckets: Vec<(f64, u64)> = inner
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(inner.buckets.iter().map(|b| b.load(Ordering::Relaxed)))
            .collect();
        // The `+Inf` bucket must equal the count: the count is the sum of
        // the buckets as read, not a separate reading.
        let count = buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(self.sum(), count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_at_or_above_them() {
        static BOUNDS: [f64; 3] = [1.0, 2.0, 4.0];
        let h = AtomicHistogram::new(&BOUNDS);
        for v in [0.5, 1.0, 1.5, 4.0, 9.0] {
            h.observe(v);
        }
        let counts: Vec<u64> = h
            .inner
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        assert_eq!(counts, [2, 1, 1, 1]);
        assert_eq!(h.count(), 5);
        assert_eq!(h.sum(), 16.0);
    }
}
