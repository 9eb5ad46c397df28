//! Shared by the tests: the exposition parsed with a Prometheus text parser.

use std::collections::HashMap;

/// Samples by (metric name, sorted labels) → value.
pub(crate) type Samples = HashMap<(String, Vec<(String, String)>), f64>;

pub(crate) fn parse(body: &str) -> Samples {
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("the exposition parses");
    scrape
        .samples
        .into_iter()
        .filter_map(|s| {
            let v = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                // OpenMetrics names a counter family without `_total`: the parser types its
                // `_total` samples as untyped.
                | prometheus_parse::Value::Untyped(v) => v,
                _ => return None,
            };
            let mut labels: Vec<(String, String)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            labels.sort();
            Some(((s.metric, labels), v))
        })
        .collect()
}
