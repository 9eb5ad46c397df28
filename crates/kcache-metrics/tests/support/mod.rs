//! Shared by the tests: the exposition fetched over HTTP and parsed with a Prometheus text
//! parser. Each test crate uses a part of it.
#![allow(dead_code)]

use std::{collections::HashMap, net::SocketAddr, time::Duration};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sorted labels.
pub(crate) type Labels = Vec<(String, String)>;

/// Samples by (metric name, sorted labels) → value.
pub(crate) type Samples = HashMap<(String, Labels), f64>;

/// Histogram buckets by (family name, sorted labels without `le`) → `(le, cumulative count)`
/// in ascending `le`, `+Inf` last.
pub(crate) type Histograms = HashMap<(String, Labels), Vec<(f64, f64)>>;

fn scrape(body: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("the exposition parses")
}

fn sorted(labels: &prometheus_parse::Labels) -> Labels {
    let mut l: Labels = labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    l.sort();
    l
}

pub(crate) fn parse(body: &str) -> Samples {
    scrape(body)
        .samples
        .into_iter()
        .filter_map(|s| {
            let v = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                // OpenMetrics names a counter family without `_total`: the parser types its
                // `_total` samples as untyped (and a histogram's `_sum` and `_count`).
                | prometheus_parse::Value::Untyped(v) => v,
                _ => return None,
            };
            Some(((s.metric, sorted(&s.labels)), v))
        })
        .collect()
}

pub(crate) fn histograms(body: &str) -> Histograms {
    scrape(body)
        .samples
        .into_iter()
        .filter_map(|s| match s.value {
            prometheus_parse::Value::Histogram(buckets) => {
                let mut b: Vec<(f64, f64)> =
                    buckets.iter().map(|b| (b.less_than, b.count)).collect();
                b.sort_by(|x, y| x.0.total_cmp(&y.0));
                Some(((s.metric, sorted(&s.labels)), b))
            }
            _ => None,
        })
        .collect()
}

fn key(name: &str, labels: &[(&str, &str)]) -> (String, Labels) {
    let mut l: Labels = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    l.sort();
    (name.to_owned(), l)
}

/// The sample `name{labels}`; panics, listing what there is, when it is missing.
pub(crate) fn value(m: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let k = key(name, labels);
    *m.get(&k)
        .unwrap_or_else(|| panic!("no sample {k:?} in {:?}", m.keys().collect::<Vec<_>>()))
}

/// The buckets of histogram `name{labels}`.
pub(crate) fn buckets<'a>(
    h: &'a Histograms,
    name: &str,
    labels: &[(&str, &str)],
) -> &'a [(f64, f64)] {
    let k = key(name, labels);
    h.get(&k)
        .unwrap_or_else(|| panic!("no histogram {k:?} in {:?}", h.keys().collect::<Vec<_>>()))
}

/// GET `path` on `addr`: (status code, body).
pub(crate) async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (code, body.to_owned())
}

/// Waits (polling every 50 ms, at most 10 s) until `cond` holds.
pub(crate) async fn eventually(mut cond: impl AsyncFnMut() -> bool) {
    for _ in 0..200 {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("condition never held");
}
