//! Compact storage, protobuf against JSON, on the same Pods: list pages decoded into
//! `Compact<Pod>` (managedFields kept or stripped) and the typed view decoded on demand, in
//! objects per CPU-second of this process (user + system), single-threaded.
//!
//! `cargo bench -p kcache-client --bench compact` (release). Env: `KCACHE_BENCH_PODS` (10000),
//! `KCACHE_BENCH_RUNS` (5, the median is reported), `KCACHE_BENCH_REPEAT` (10: each run decodes
//! the Pods this many times, so that a run lasts well beyond the 10 ms CPU-time tick),
//! `KCACHE_BENCH_SPLIT_ONLY` (set: only the JSON list splitter, items split out and dropped).
//! Bytes held per object: the `compact_memory` benchmark.
//!
//! The Pods are built as the generated prost type (`kcache-proto/benches/support/pb_pods.rs`, the ~8 KB Pod of
//! kcache-proto's benchmark); the JSON pages are the same Pods through k8s-openapi's
//! serializer, as the API server would send them. Protobuf pages are decoded as
//! `HttpListerWatcher` does: envelope, raw list, then the compact decoder per item.

use std::hint::black_box;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kcache_client::{
    compact::{Compact, CompactDecoder, Format},
    decode::{
        ItemDecoder,
        internals::{ItemSink, ListSplitter, decode_list},
    },
};
use kcache_proto::{
    Envelope, api::core::v1 as pb, apimachinery::pkg::apis::meta::v1 as meta, convert::FromProto,
    list::RawList,
};

#[path = "../../kcache-proto/benches/support/pb_pods.rs"]
mod pb_pods;

#[path = "support/cpu.rs"]
mod cpu;
use cpu::{env_usize, median_secs};

fn report(what: &str, secs: f64, bytes: usize, objects: usize, baseline: Option<f64>) {
    cpu::report(what, secs, bytes, objects, baseline, "JSON");
}

/// One protobuf list page into compact Pods, as the lister-watcher decodes it.
fn pb_page(body: &Bytes, decoder: &CompactDecoder) -> Vec<Compact<Pod>> {
    let env = Envelope::decode(body.clone()).unwrap();
    let list = RawList::decode_raw(env.raw).unwrap();
    list.items
        .into_iter()
        .map(|raw| {
            let item = Envelope {
                api_version: env.api_version.clone(),
                kind: "Pod".to_owned(),
                raw,
                content_type: String::new(),
            };
            ItemDecoder::<Compact<Pod>>::decode_protobuf(decoder, item)
                .unwrap()
                .unwrap()
        })
        .collect()
}

/// One JSON list page into compact Pods, as the lister-watcher decodes it: the body split into
/// items chunk by chunk (64 KB, the inflater's chunk), each item decoded on its own.
fn json_split_page(body: &[u8], decoder: &CompactDecoder) -> Vec<Compact<Pod>> {
    struct Sink<'a>(&'a CompactDecoder, Vec<Compact<Pod>>);
    impl ItemSink for Sink<'_> {
        fn whole(&mut self, data: &[u8]) -> Option<usize> {
            let (item, len) = ItemDecoder::<Compact<Pod>>::decode_json_prefix(self.0, data)?;
            self.1.push(item);
            Some(len)
        }
        fn item(&mut self, item: Bytes) {
            self.1
                .push(ItemDecoder::<Compact<Pod>>::decode_json_item(self.0, item).unwrap());
        }
    }
    let mut splitter = ListSplitter::new();
    let mut sink = Sink(decoder, Vec::new());
    for chunk in body.chunks(64 * 1024) {
        splitter.push_into(chunk, &mut sink).unwrap();
    }
    splitter.finish().unwrap();
    sink.1
}

fn main() {
    let n = env_usize("KCACHE_BENCH_PODS", 10_000);
    let runs = env_usize("KCACHE_BENCH_RUNS", 5);
    let reps = env_usize("KCACHE_BENCH_REPEAT", 10).max(1);
    let page = 500;
    let pods: Vec<pb::Pod> = (0..n).map(pb_pods::pod).collect();
    let list_meta = Some(meta::ListMeta {
        resource_version: Some("200000".into()),
        ..Default::default()
    });
    let pb_pages: Vec<Bytes> = pods
        .chunks(page)
        .map(|c| {
            let list = pb::PodList {
                metadata: list_meta.clone(),
                items: c.to_vec(),
            };
            Envelope::for_message("v1", "PodList", &list).encode_to_bytes()
        })
        .collect();
    let json_pages: Vec<Vec<u8>> = pods
        .chunks(page)
        .map(|c| {
            let items: Vec<serde_json::Value> = c
                .iter()
                .map(|p| serde_json::to_value(Pod::from_proto(p.clone()).unwrap()).unwrap())
                .collect();
            serde_json::to_vec(&serde_json::json!({"kind": "PodList", "apiVersion": "v1",
                "metadata": {"resourceVersion": "200000"}, "items": items}))
            .unwrap()
        })
        .collect();
    drop(pods);
    let pb_bytes: usize = pb_pages.iter().map(Bytes::len).sum();
    let json_bytes: usize = json_pages.iter().map(Vec::len).sum();
    println!(
        "{n} pods; list pages of {page}: JSON {:.0} B/pod, protobuf {:.0} B/pod ({:.2}× JSON)",
        json_bytes as f64 / n as f64,
        pb_bytes as f64 / n as f64,
        pb_bytes as f64 / json_bytes as f64
    );

    if std::env::var_os("KCACHE_BENCH_SPLIT_ONLY").is_some() {
        let split = median_secs(
            runs,
            || {
                (0..reps)
                    .flat_map(|_| &json_pages)
                    .map(|p| {
                        let mut s = ListSplitter::new();
                        let n: usize = p.chunks(64 * 1024).map(|c| s.push(c).unwrap().len()).sum();
                        n
                    })
                    .sum()
            },
            n * reps,
        );
        report("JSON split only", split, json_bytes * reps, n * reps, None);
        return;
    }
    for strip in [false, true] {
        let decoder = CompactDecoder::new().strip_managed_fields(strip);
        let label = if strip {
            "managedFields stripped"
        } else {
            "managedFields kept"
        };
        println!("\n-- list pages -> Vec<Compact<Pod>>, {label} --");
        let json = median_secs(
            runs,
            || {
                (0..reps)
                    .flat_map(|_| &json_pages)
                    .map(|p| {
                        black_box(decode_list::<Compact<Pod>, _>(p, &decoder).unwrap())
                            .items
                            .len()
                    })
                    .sum()
            },
            n * reps,
        );
        report("compact JSON", json, json_bytes * reps, n * reps, None);
        let split = median_secs(
            runs,
            || {
                (0..reps)
                    .flat_map(|_| &json_pages)
                    .map(|p| black_box(json_split_page(p, &decoder)).len())
                    .sum()
            },
            n * reps,
        );
        report(
            "compact JSON, split as listed",
            split,
            json_bytes * reps,
            n * reps,
            Some(json),
        );
        let proto = median_secs(
            runs,
            || {
                (0..reps)
                    .flat_map(|_| &pb_pages)
                    .map(|p| black_box(pb_page(p, &decoder)).len())
                    .sum()
            },
            n * reps,
        );
        report(
            "compact protobuf",
            proto,
            pb_bytes * reps,
            n * reps,
            Some(json),
        );
    }

    println!("\n-- typed view on demand: Compact<Pod>::typed(), managedFields stripped --");
    let decoder = CompactDecoder::new().strip_managed_fields(true);
    let json_objs: Vec<Compact<Pod>> = json_pages
        .iter()
        .flat_map(|p| decode_list::<Compact<Pod>, _>(p, &decoder).unwrap().items)
        .collect();
    let pb_objs: Vec<Compact<Pod>> = pb_pages.iter().flat_map(|p| pb_page(p, &decoder)).collect();
    assert!(json_objs.iter().all(|c| c.format() == Format::Json));
    assert!(pb_objs.iter().all(|c| c.format() == Format::Protobuf));
    // Same objects either way.
    assert_eq!(
        json_objs[n / 2].typed().unwrap(),
        pb_objs[n / 2].typed().unwrap()
    );
    let held = |v: &[Compact<Pod>]| v.iter().map(|c| c.bytes().len()).sum::<usize>();
    let (jb, pbb) = (held(&json_objs), held(&pb_objs));
    // A quarter of the repetitions: the typed view costs several times the compact decode.
    let treps = reps.div_ceil(4);
    let typed = |objs: &[Compact<Pod>]| {
        (0..treps)
            .flat_map(|_| objs)
            .filter(|c| black_box(c.typed().unwrap()).metadata.name.is_some())
            .count()
    };
    let json = median_secs(runs, || typed(&json_objs), n * treps);
    report(
        "typed() from compact JSON",
        json,
        jb * treps,
        n * treps,
        None,
    );
    let proto = median_secs(runs, || typed(&pb_objs), n * treps);
    report(
        "typed() from compact protobuf",
        proto,
        pbb * treps,
        n * treps,
        Some(json),
    );
}
