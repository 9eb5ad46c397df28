//! Decode cost of a 10k-Pod list, protobuf against JSON, in one run: the direct decoder (wire →
//! k8s-openapi), with managedFields skipped, and prost + conversion; conversion cost; compact
//! size. The list decodes are timed in CPU time of the benchmark thread (the machine may be
//! shared), the list dropped inside the timing as a cache would drop it. Run: `cargo bench -p kcache-proto --features serde --bench decode` (the `serde` feature
//! adds the generic prost → JSON value → k8s-openapi path to the comparison).
//!
//! The Pod is a realistic ~8 KB one (labels, annotations with a last-applied configuration,
//! managedFields, two containers with env, resources, probes and mounts, four volumes, status).

use std::hint::black_box;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod as K8sPod;
use kcache_proto::api::core::v1 as pb;
use kcache_proto::apimachinery::pkg::apis::meta::v1 as meta;
use kcache_proto::compact::CompactObject;
use kcache_proto::convert::FromProto;
use kcache_proto::{DecodeConfig, Envelope, decode_list, decode_list_with};
use prost::Message;

const PODS: usize = 10_000;

#[path = "support/pb_pods.rs"]
mod pb_pods;
use pb_pods::pod;

struct Data {
    pb_body: Bytes,
    json_body: Bytes,
    pods: Vec<pb::Pod>,
}

fn data() -> Data {
    let pods: Vec<pb::Pod> = (0..PODS).map(pod).collect();
    let list = pb::PodList {
        metadata: Some(meta::ListMeta {
            resource_version: Some("200000".into()),
            ..Default::default()
        }),
        items: pods.clone(),
    };
    let pb_body = Envelope::for_message("v1", "PodList", &list).encode_to_bytes();
    // The equivalent JSON, as the server would send it (through k8s-openapi's serializer).
    let items: Vec<serde_json::Value> = pods
        .iter()
        .map(|p| serde_json::to_value(K8sPod::from_proto(p.clone()).unwrap()).unwrap())
        .collect();
    let json = serde_json::json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "200000"}, "items": items});
    let json_body = Bytes::from(serde_json::to_vec(&json).unwrap());
    Data {
        pb_body,
        json_body,
        pods,
    }
}

#[derive(serde::Deserialize)]
struct JsonList {
    items: Vec<K8sPod>,
}

/// Thread CPU time on this core (`/proc/thread-self/schedstat`), so that other processes on a
/// shared machine do not count.
fn on_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat")
}

/// Like `Bencher::iter`, measuring CPU time instead of wall time.
fn on_cpu<R>(b: &mut criterion::Bencher<'_>, mut f: impl FnMut() -> R) {
    b.iter_custom(|iters| {
        let start = on_cpu_ns();
        for _ in 0..iters {
            black_box(f());
        }
        std::time::Duration::from_nanos(on_cpu_ns() - start)
    });
}

fn bench(c: &mut Criterion) {
    let d = data();
    let compact = CompactObject::from_list(&Envelope::decode(d.pb_body.clone()).unwrap()).unwrap();
    let compact_bytes: usize = compact.iter().map(CompactObject::size_bytes).sum();
    eprintln!(
        "sizes: JSON list {} bytes ({} per pod), protobuf list {} bytes ({} per pod, {:.2}x JSON), compact {} bytes held ({} per pod, {:.2}x JSON)",
        d.json_body.len(),
        d.json_body.len() / PODS,
        d.pb_body.len(),
        d.pb_body.len() / PODS,
        d.pb_body.len() as f64 / d.json_body.len() as f64,
        compact_bytes,
        compact_bytes / PODS,
        compact_bytes as f64 / d.json_body.len() as f64,
    );

    let mut g = c.benchmark_group("list_10k_pods");
    g.sample_size(10);
    g.throughput(Throughput::Elements(PODS as u64));
    g.bench_function(
        BenchmarkId::new("json_serde_to_k8s_openapi", d.json_body.len()),
        |b| {
            on_cpu(b, || {
                black_box(
                    serde_json::from_slice::<JsonList>(&d.json_body)
                        .unwrap()
                        .items
                        .len(),
                )
            })
        },
    );
    g.bench_function(
        BenchmarkId::new("protobuf_to_k8s_openapi", d.pb_body.len()),
        |b| {
            on_cpu(b, || {
                black_box(
                    decode_list::<K8sPod>(Envelope::decode(d.pb_body.clone()).unwrap())
                        .unwrap()
                        .1
                        .len(),
                )
            })
        },
    );
    g.bench_function(
        BenchmarkId::new("protobuf_to_k8s_openapi_stripped", d.pb_body.len()),
        |b| {
            on_cpu(b, || {
                let opts = DecodeConfig::default().strip_managed_fields(true);
                black_box(
                    decode_list_with::<K8sPod>(Envelope::decode(d.pb_body.clone()).unwrap(), opts)
                        .unwrap()
                        .1
                        .len(),
                )
            })
        },
    );
    g.bench_function(
        BenchmarkId::new("protobuf_via_prost_and_conversion", d.pb_body.len()),
        |b| {
            on_cpu(b, || {
                let env = Envelope::decode(d.pb_body.clone()).unwrap();
                let list = pb::PodList::decode(env.raw).unwrap();
                black_box(
                    list.items
                        .into_iter()
                        .map(|p| K8sPod::from_proto(p).unwrap())
                        .collect::<Vec<_>>()
                        .len(),
                )
            })
        },
    );
    g.bench_function(
        BenchmarkId::new("protobuf_to_prost_only", d.pb_body.len()),
        |b| {
            on_cpu(b, || {
                let env = Envelope::decode(d.pb_body.clone()).unwrap();
                black_box(pb::PodList::decode(env.raw).unwrap().items.len())
            })
        },
    );
    g.bench_function(
        BenchmarkId::new("protobuf_to_compact", d.pb_body.len()),
        |b| {
            on_cpu(b, || {
                black_box(
                    CompactObject::from_list(&Envelope::decode(d.pb_body.clone()).unwrap())
                        .unwrap()
                        .len(),
                )
            })
        },
    );
    g.finish();

    let mut g = c.benchmark_group("convert_10k_pods");
    g.sample_size(10);
    g.throughput(Throughput::Elements(PODS as u64));
    g.bench_function("direct_field_by_field", |b| {
        b.iter_batched(
            || d.pods.clone(),
            |pods| {
                black_box(
                    pods.into_iter()
                        .map(|p| K8sPod::from_proto(p).unwrap())
                        .collect::<Vec<_>>(),
                )
            },
            criterion::BatchSize::PerIteration,
        )
    });
    #[cfg(feature = "serde")]
    g.bench_function("generic_via_serde_json_value", |b| {
        b.iter_batched(
            || d.pods.clone(),
            |pods| {
                black_box(
                    pods.into_iter()
                        .map(|p| {
                            serde_json::from_value::<K8sPod>(serde_json::to_value(&p).unwrap())
                                .unwrap()
                        })
                        .collect::<Vec<_>>(),
                )
            },
            criterion::BatchSize::PerIteration,
        )
    });
    g.finish();

    // Sanity: both paths agree (not timed).
    #[cfg(feature = "serde")]
    {
        let direct = K8sPod::from_proto(d.pods[1].clone()).unwrap();
        let generic: K8sPod =
            serde_json::from_value(serde_json::to_value(&d.pods[1]).unwrap()).unwrap();
        assert!(direct == generic, "generic and direct conversions disagree");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
