//! Decode benchmark: realistic ~8 KB Pods through our decoder vs serde_json → k8s-openapi
//! (kube-client's path), for list pages, one list body split from chunks of 16, 64 and 256 KiB,
//! that body inflated from gzip, and watch frames, plus bytes held per object in each storage
//! mode.
//!
//! `cargo bench -p kcache-client --bench decode` (release). Env: `KCACHE_BENCH_PODS` (10000),
//! `KCACHE_BENCH_RUNS` (3, the median is reported). Single-threaded; figures are per core.
//! Throughput is per CPU-second of this process (user + system time), so that a loaded
//! machine does not distort it. Bytes held per object are measured by the `memory` benchmark (its counting allocator
//! would slow this one down).

use std::{convert::Infallible, hint::black_box};

use bytes::Bytes;
use futures::{StreamExt, executor::block_on, stream};
use k8s_openapi::api::core::v1::Pod;
use kcache_client::{
    compact::{Compact, CompactDecoder},
    decode::{
        ItemDecoder, Typed,
        internals::{ItemSink, ListSplitter, decode_list, watch_events},
    },
};
use kube_core::{ObjectList, PartialObjectMeta, WatchEvent};
use serde_json::Value;

#[path = "support/pods.rs"]
mod pods;
use pods::pod;

#[path = "support/cpu.rs"]
mod cpu;
use cpu::{env_usize, median_secs};

fn report(what: &str, secs: f64, bytes: usize, objects: usize, baseline: Option<f64>) {
    cpu::report(what, secs, bytes, objects, baseline, "baseline");
}

fn main() {
    let n = env_usize("KCACHE_BENCH_PODS", 10_000);
    let runs = env_usize("KCACHE_BENCH_RUNS", 3);
    let page = 500;
    let pods: Vec<String> = (0..n).map(|i| pod(i).to_string()).collect();
    let total: usize = pods.iter().map(String::len).sum();
    let mf_bytes: usize = pods
        .iter()
        .map(|p| {
            let v: Value = serde_json::from_str(p).unwrap();
            v["metadata"]["managedFields"].to_string().len()
        })
        .sum();
    println!(
        "{n} pods, {:.1} KB JSON each on average, managedFields {:.0}% of the bytes",
        total as f64 / n as f64 / 1024.0,
        100.0 * mf_bytes as f64 / total as f64
    );

    // List pages of 500, as the reflector asks for them.
    let pages: Vec<Vec<u8>> = pods
        .chunks(page)
        .map(|c| {
            format!(
                r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"200000"}},"items":[{}]}}"#,
                c.join(",")
            )
            .into_bytes()
        })
        .collect();
    let list_bytes: usize = pages.iter().map(Vec::len).sum();

    println!("\n-- list pages ({page} pods per page) --");
    let base = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(serde_json::from_slice::<ObjectList<Pod>>(p).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "serde_json -> ObjectList<Pod> (baseline)",
        base,
        list_bytes,
        n,
        None,
    );
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<Pod, _>(p, &Typed::new()).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report("kcache typed Pod", t, list_bytes, n, Some(base));
    let strip = Typed::new().strip_managed_fields(true);
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<Pod, _>(p, &strip).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "kcache typed Pod, managedFields skipped",
        t,
        list_bytes,
        n,
        Some(base),
    );
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<PartialObjectMeta<Pod>, _>(p, &strip).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "kcache metadata only (from full objects)",
        t,
        list_bytes,
        n,
        Some(base),
    );
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<Compact<Pod>, _>(p, &CompactDecoder::new()).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "kcache compact (split + metadata)",
        t,
        list_bytes,
        n,
        Some(base),
    );
    let cstrip = CompactDecoder::new().strip_managed_fields(true);
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<Compact<Pod>, _>(p, &cstrip).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "kcache compact, managedFields stripped",
        t,
        list_bytes,
        n,
        Some(base),
    );
    let t = median_secs(
        runs,
        || pages.iter().map(|p| black_box(split_keys(p))).sum(),
        n,
    );
    report(
        "item splitting + key extraction",
        t,
        list_bytes,
        n,
        Some(base),
    );

    // One list body of every pod, split as it arrives: items cut across two chunks take the
    // splitter's slow path, so the chunk size the client hands it matters (kcache-client
    // gathers 256 KiB; an HTTP/2 frame is 16 KiB).
    let body = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"200000"}},"items":[{}]}}"#,
        pods.join(",")
    )
    .into_bytes();
    println!("\n-- one list body, split from chunks of --");
    for kib in [16, 64, 256] {
        let t = median_secs(runs, || split_body(&body, kib * 1024), n);
        report(
            &format!("kcache compact, {kib} KiB chunks"),
            t,
            body.len(),
            n,
            None,
        );
    }

    // The same body as kube-apiserver sends a large list: gzip at level 1, inflated as the
    // client does (written in 16 KiB pieces; the CRC-32 checked at the end). Throughput is of
    // the inflated bytes.
    let gzip = {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&body).unwrap();
        enc.finish().unwrap()
    };
    println!(
        "\n-- the body in gzip ({:.1} MB, {:.0}x smaller), inflated --",
        gzip.len() as f64 / 1e6,
        body.len() as f64 / gzip.len() as f64
    );
    let t = median_secs(runs, || inflate(&gzip, body.len(), n), n);
    report("flate2 (zlib-rs) MultiGzDecoder", t, body.len(), n, None);

    // Watch frames: one ADDED event per line, delivered in 16 KiB chunks.
    let mut watch = Vec::with_capacity(total + n * 32);
    for p in &pods {
        watch.extend_from_slice(br#"{"type":"ADDED","object":"#);
        watch.extend_from_slice(p.as_bytes());
        watch.extend_from_slice(b"}\n");
    }
    let chunks: Vec<Bytes> = watch
        .chunks(16 * 1024)
        .map(Bytes::copy_from_slice)
        .collect();
    println!("\n-- watch frames (16 KiB chunks) --");
    let base = median_secs(
        runs,
        || {
            // kube-client's path: split lines, serde_json each line into WatchEvent<Pod>.
            let mut n = 0;
            for line in watch.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                black_box(serde_json::from_slice::<WatchEvent<Pod>>(line).unwrap());
                n += 1;
            }
            n
        },
        n,
    );
    report(
        "serde_json -> WatchEvent<Pod> (baseline)",
        base,
        watch.len(),
        n,
        None,
    );
    let run_watch = |strip: bool| {
        let s = stream::iter(chunks.clone().into_iter().map(Ok::<_, Infallible>));
        let events =
            watch_events::<Pod, _, _, _>(s, Typed::new().strip_managed_fields(strip), 1 << 24);
        block_on(events.map(|e| black_box(e.unwrap())).count())
    };
    let t = median_secs(runs, || run_watch(false), n);
    report("kcache typed Pod", t, watch.len(), n, Some(base));
    let t = median_secs(runs, || run_watch(true), n);
    report(
        "kcache typed Pod, managedFields skipped",
        t,
        watch.len(),
        n,
        Some(base),
    );
    let t = median_secs(
        runs,
        || {
            let s = stream::iter(chunks.clone().into_iter().map(Ok::<_, Infallible>));
            block_on(
                watch_events::<Compact<Pod>, _, _, _>(s, CompactDecoder::new(), 1 << 24)
                    .map(|e| black_box(e.unwrap()))
                    .count(),
            )
        },
        n,
    );
    report("kcache compact", t, watch.len(), n, Some(base));
}

/// Splits `body` (one JSON list) from chunks of `chunk` bytes, decoding each item into a
/// `Compact<Pod>` as kcache-client's list path does; returns the item count.
fn split_body(body: &[u8], chunk: usize) -> usize {
    struct Decode(usize);
    impl ItemSink for Decode {
        fn whole(&mut self, data: &[u8]) -> Option<usize> {
            let decoder = CompactDecoder::new();
            let (item, len) = ItemDecoder::<Compact<Pod>>::decode_json_prefix(&decoder, data)?;
            black_box(item);
            self.0 += 1;
            Some(len)
        }
        fn item(&mut self, item: Bytes) {
            let decoder = CompactDecoder::new();
            black_box(ItemDecoder::<Compact<Pod>>::decode_json_item(&decoder, item).unwrap());
            self.0 += 1;
        }
    }
    let mut items = Decode(0);
    let mut splitter = ListSplitter::new();
    for c in body.chunks(chunk) {
        splitter.push_into(c, &mut items).unwrap();
    }
    splitter.finish().unwrap();
    items.0
}

/// Inflates a gzip body in 16 KiB pieces, as kcache-client does a list's, checks its length is
/// `expect` and returns `objects` (the count `median_secs` checks).
fn inflate(gzip: &[u8], expect: usize, objects: usize) -> usize {
    use std::io::Write;
    let mut out = flate2::write::MultiGzDecoder::new(Vec::with_capacity(expect));
    for piece in gzip.chunks(16 * 1024) {
        out.write_all(piece).unwrap();
    }
    let body = out.finish().unwrap();
    assert_eq!(body.len(), expect, "inflated length");
    black_box(body);
    objects
}

/// Splits a list page into its items' raw bytes and reads each item's namespace and name:
/// the floor of any decoder that must key objects.
fn split_keys(page: &[u8]) -> usize {
    #[derive(serde::Deserialize)]
    struct Page<'a> {
        #[serde(borrow)]
        items: Vec<&'a serde_json::value::RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Meta<'a> {
        #[serde(borrow)]
        metadata: Key<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Key<'a> {
        #[serde(borrow, default)]
        namespace: Option<&'a str>,
        #[serde(borrow)]
        name: &'a str,
    }
    let p: Page<'_> = serde_json::from_slice(page).unwrap();
    p.items
        .iter()
        .map(|raw| {
            let m: Meta<'_> = serde_json::from_str(raw.get()).unwrap();
            black_box((m.metadata.namespace, m.metadata.name));
        })
        .count()
}
