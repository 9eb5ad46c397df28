//! Encoding helpers shared by the collectors: one family from labelled rows, and kcache's
//! atomic histograms as Prometheus histograms.

use kcache::HistogramSnapshot;
use prometheus_client::{
    encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet},
    metrics::MetricType,
};

/// One sample's labels.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// Encodes the family `name` with one metric per row.
pub(crate) fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: Vec<(Labels, M)>,
) -> Result<(), std::fmt::Error> {
    let mut f = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, metric) in rows {
        metric.encode(f.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A [`HistogramSnapshot`] read at scrape time, encoded as a histogram (prometheus-client
/// has const counters and gauges, not histograms).
#[derive(Debug)]
pub(crate) struct ConstHistogram(pub(crate) HistogramSnapshot);

impl EncodeMetric for ConstHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        // Per-bucket counts; the encoder accumulates them.
        let buckets: Vec<(f64, u64)> = s
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(s.counts.iter().copied())
            .collect();
        encoder.encode_histogram::<NoLabelSet>(s.sum, s.count(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::{collector::Collector, encoding::text::encode, registry::Registry};

    use super::*;

    #[derive(Debug)]
    struct One;

    impl Collector for One {
        fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
            let snapshot = HistogramSnapshot {
                bounds: vec![1.0, 10.0],
                counts: vec![2, 1, 4],
                sum: 50.5,
            };
            family(
                &mut encoder,
                "h_seconds",
                "help",
                MetricType::Histogram,
                vec![(
                    vec![("resource", "pods".to_owned())],
                    ConstHistogram(snapshot),
                )],
            )
        }
    }

    #[test]
    fn a_snapshot_is_exposed_with_cumulative_buckets_sum_and_count() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(One));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE h_seconds histogram",
            r#"h_seconds_sum{resource="pods"} 50.5"#,
            r#"h_seconds_count{resource="pods"} 7"#,
            r#"h_seconds_bucket{le="1.0",resource="pods"} 2"#,
            r#"h_seconds_bucket{le="10.0",resource="pods"} 3"#,
            r#"h_seconds_bucket{le="+Inf",resource="pods"} 7"#,
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
        }
    }
}
