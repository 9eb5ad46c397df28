//! Cache memory accounting checked three ways: the accounted store's own running total
//! (`ThreadSafeStore::memory`, the figure `kcache_informer_cache_bytes` exports), the live
//! heap a counting global allocator saw the store grow by, and the process's RSS growth.
//!
//! `cargo bench -p kcache-client --bench memory_accounting`. Env: `KCACHE_BENCH_PODS`
//! (comma-separated counts, default `10000`). Each (storage, count) runs in a child process
//! of its own, so that RSS growth is not hidden by memory an earlier run freed. Pods are the
//! realistic ~8 KB ones of the decode and compact benchmarks
//! (`kcache-proto/benches/support/pb_pods.rs`), each generated, encoded, decoded and stored in
//! turn, so that the store is the only thing that grows.

use std::{process::Command, sync::Arc};

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kcache::{memory, store::ThreadSafeStore};
use kcache_client::{
    compact::Compact,
    decode::{Typed, decode_object},
};
use kcache_proto::{Envelope, convert::FromProto};

#[path = "../../kcache-proto/benches/support/pb_pods.rs"]
mod pb_pods;

/// Counts live heap bytes (requested minus freed).
#[global_allocator]
static ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

const STORAGES: [&str; 4] = [
    "typed (JSON)",
    "typed, managedFields stripped",
    "compact protobuf",
    "compact protobuf, managedFields stripped",
];

fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Stores `n` objects made by `make` in an accounted store: (estimate, allocator, RSS) growth.
fn run<K: kube_core::Resource + Send + Sync + 'static>(
    n: usize,
    sizer: memory::Sizer<K>,
    make: impl Fn(usize) -> K,
) -> (usize, usize, usize) {
    let store = ThreadSafeStore::<K>::for_resource();
    assert!(store.set_sizer(sizer));
    drop(make(0)); // warm up lazily built statics
    let (heap, resident) = (ALLOC.current_usage(), rss());
    for i in 0..n {
        store.add(Arc::new(make(i))).unwrap();
    }
    let grown = ALLOC.current_usage().saturating_sub(heap);
    let resident = rss().saturating_sub(resident);
    let usage = store.memory().unwrap();
    assert_eq!(usage.objects, n);
    (usage.bytes, grown, resident)
}

fn child(storage: usize, n: usize) {
    let json = |i: usize| serde_json::to_vec(&Pod::from_proto(pb_pods::pod(i)).unwrap()).unwrap();
    let raw = |i: usize| -> Bytes { Envelope::for_message("v1", "Pod", &pb_pods::pod(i)).raw };
    let (estimate, allocated, resident) = match storage {
        0 | 1 => {
            let decoder = Typed::new().strip_managed_fields(storage == 1);
            run(n, memory::estimator::<Pod>(), |i| {
                decode_object::<Pod, _>(&json(i), &decoder).unwrap()
            })
        }
        _ => {
            let strip = storage == 3;
            run(n, Arc::new(Compact::<Pod>::heap_size), |i| {
                Compact::<Pod>::from_protobuf(&raw(i), strip).unwrap()
            })
        }
    };
    let mb = |b: usize| b as f64 / 1e6;
    println!(
        "| {} | {n} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} |",
        STORAGES[storage],
        mb(estimate),
        mb(allocated),
        mb(resident),
        estimate as f64 / allocated as f64,
        resident as f64 / allocated as f64,
    );
}

fn main() {
    if let (Ok(storage), Ok(n)) = (
        std::env::var("KCACHE_BENCH_CHILD_STORAGE"),
        std::env::var("KCACHE_BENCH_CHILD_PODS"),
    ) {
        child(storage.parse().unwrap(), n.parse().unwrap());
        return;
    }
    let counts = std::env::var("KCACHE_BENCH_PODS").unwrap_or_else(|_| "10000".into());
    println!(
        "| storage | pods | estimate (MB) | allocator (MB) | RSS growth (MB) | estimate / allocator | RSS / allocator |"
    );
    println!("|---|---|---|---|---|---|---|");
    let exe = std::env::current_exe().unwrap();
    for n in counts
        .split(',')
        .map(|c| c.trim().parse::<usize>().unwrap())
    {
        for storage in 0..STORAGES.len() {
            let out = Command::new(&exe)
                .env("KCACHE_BENCH_CHILD_STORAGE", storage.to_string())
                .env("KCACHE_BENCH_CHILD_PODS", n.to_string())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            print!("{}", String::from_utf8_lossy(&out.stdout));
        }
    }
}
