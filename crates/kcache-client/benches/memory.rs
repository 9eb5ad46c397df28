//! Bytes held per decoded Pod in each storage mode, measured exactly with a counting global
//! allocator: full typed, managedFields stripped, metadata only, compact.
//!
//! `cargo bench -p kcache-client --bench memory`. Env: `KCACHE_BENCH_PODS` (2000 held).

use k8s_openapi::api::core::v1::Pod;
use kcache_client::{compact::Compact, decode::Typed};
use kube_core::PartialObjectMeta;

#[path = "support/pods.rs"]
mod pods;
use pods::pod;

#[path = "support/held.rs"]
mod held;
use held::held_by;

fn main() {
    let n: usize = std::env::var("KCACHE_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let pods: Vec<String> = (0..n).map(|i| pod(i).to_string()).collect();
    let strip = Typed::new().strip_managed_fields(true);
    println!("\n-- bytes held per object (live heap, exact) --");
    let held = n;
    let sample: Vec<Vec<u8>> = pods[..held].iter().map(|p| p.as_bytes().to_vec()).collect();
    let avg_json = sample.iter().map(Vec::len).sum::<usize>() as f64 / held as f64;
    println!("JSON per object: {avg_json:.0} B (a page's body is dropped once decoded)");
    let show = |what: &str, bytes: usize| {
        let per = bytes as f64 / held as f64;
        println!(
            "{what:<44} {per:>8.0} B/object  {:>5.2}× JSON",
            per / avg_json
        );
    };
    let obj =
        |b: &Vec<u8>, d: &Typed| -> Pod { kcache_client::decode::decode_object(b, d).unwrap() };
    let (full, bytes) = held_by(|| sample.iter().map(|b| obj(b, &Typed::new())).collect());
    show("full typed Pod", bytes);
    drop(full);
    let (stripped, bytes) = held_by(|| sample.iter().map(|b| obj(b, &strip)).collect());
    show("typed Pod, managedFields stripped", bytes);
    drop(stripped);
    let (meta, bytes) = held_by(|| {
        sample
            .iter()
            .map(|b| {
                kcache_client::decode::decode_object::<PartialObjectMeta<Pod>, _>(b, &strip)
                    .unwrap()
            })
            .collect()
    });
    show("metadata only (PartialObjectMeta)", bytes);
    drop(meta);
    let (compact, bytes) = held_by(|| {
        sample
            .iter()
            .map(|b| Compact::<Pod>::from_json(b, false).unwrap())
            .collect()
    });
    show("compact (JSON bytes + metadata)", bytes);
    drop(compact);
    let (compact, bytes) = held_by(|| {
        sample
            .iter()
            .map(|b| Compact::<Pod>::from_json(b, true).unwrap())
            .collect()
    });
    show("compact, managedFields stripped", bytes);
    drop(compact);
}
