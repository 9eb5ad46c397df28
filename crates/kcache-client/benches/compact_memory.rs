//! Bytes held per `Compact<Pod>`, protobuf against JSON, managedFields kept or stripped,
//! measured exactly with a counting global allocator (next to the typed Pod for scale).
//!
//! `cargo bench -p kcache-client --bench compact_memory`. Env: `KCACHE_BENCH_PODS` (10000).
//! Same Pods as the `compact` benchmark (`kcache-proto/benches/support/pb_pods.rs`).

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kcache_client::{
    compact::{Compact, CompactDecoder, Format},
    decode::{Typed, decode_object},
};
use kcache_proto::{Envelope, convert::FromProto};

#[path = "../../kcache-proto/benches/support/pb_pods.rs"]
mod pb_pods;

#[path = "support/held.rs"]
mod held;
use held::held_by;

fn main() {
    let n: usize = std::env::var("KCACHE_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    // Each object's own protobuf message and JSON, as a list item carries it.
    let (raws, jsons): (Vec<Bytes>, Vec<Vec<u8>>) = (0..n)
        .map(|i| {
            let p = pb_pods::pod(i);
            let raw = Envelope::for_message("v1", "Pod", &p).raw;
            let json = serde_json::to_vec(&Pod::from_proto(p).unwrap()).unwrap();
            (raw, json)
        })
        .unzip();
    let avg = |total: usize| total as f64 / n as f64;
    let avg_json = avg(jsons.iter().map(Vec::len).sum());
    let avg_pb = avg(raws.iter().map(Bytes::len).sum());
    println!(
        "{n} pods: JSON {avg_json:.0} B/pod, protobuf {avg_pb:.0} B/pod ({:.2}× JSON)",
        avg_pb / avg_json
    );
    println!("\n-- bytes held per object (live heap + inline, exact) --");
    let show = |what: &str, bytes: usize| {
        // Inline size of each element in the Vec is part of the live heap measured.
        let per = avg(bytes);
        println!(
            "{what:<46} {per:>8.0} B/object  {:>5.2}× JSON",
            per / avg_json
        );
    };
    let (v, bytes) = held_by(|| {
        jsons
            .iter()
            .map(|j| decode_object::<Pod, _>(j, &Typed::new()).unwrap())
            .collect()
    });
    show("typed Pod (for scale)", bytes);
    drop(v);
    for strip in [false, true] {
        let decoder = CompactDecoder::new().strip_managed_fields(strip);
        let label = if strip { "stripped" } else { "kept" };
        let (v, bytes) = held_by(|| {
            jsons
                .iter()
                .map(|j| decode_object::<Compact<Pod>, _>(j, &decoder).unwrap())
                .collect()
        });
        assert!(v.iter().all(|c| c.format() == Format::Json));
        show(&format!("compact JSON, managedFields {label}"), bytes);
        drop(v);
        let (v, bytes) = held_by(|| {
            // What the decoder's protobuf path builds, without cloning the input `Bytes` (its
            // shared header would count as held).
            raws.iter()
                .map(|raw| Compact::<Pod>::from_protobuf(raw, strip).unwrap())
                .collect()
        });
        assert!(v.iter().all(|c| c.format() == Format::Protobuf));
        show(&format!("compact protobuf, managedFields {label}"), bytes);
        drop(v);
    }
}
