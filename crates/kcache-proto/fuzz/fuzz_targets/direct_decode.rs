//! Fuzzes the direct decoders (wire bytes → k8s-openapi) with arbitrary object bytes for a few
//! kinds, with and without managedFields skipped. Any panic is a bug.
#![no_main]

use bytes::Bytes;
use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease, core::v1::Pod};
use kcache_proto::{DecodeConfig, Envelope, decode_object_with};
use libfuzzer_sys::fuzz_target;

fn env(kind: &str, api_version: &str, data: &[u8]) -> Envelope {
    Envelope {
        api_version: api_version.into(),
        kind: kind.into(),
        raw: Bytes::copy_from_slice(data),
        content_type: String::new(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let opts = DecodeConfig::default().strip_managed_fields(flags & 1 == 1);
    let _ = decode_object_with::<Pod>(env("Pod", "v1", rest), opts);
    let _ = decode_object_with::<Deployment>(env("Deployment", "apps/v1", rest), opts);
    let _ = decode_object_with::<Lease>(env("Lease", "coordination.k8s.io/v1", rest), opts);
});
