//! Fuzzes the protobuf watch stream decoder: arbitrary bytes, fed in chunks whose sizes come
//! from the input, through frames, events, envelopes and the typed Pod conversion; also the
//! same bytes as a list body. Any panic is a bug.
#![no_main]

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let chunk = usize::from(split).max(1);
    let mut dec = kcache_proto::WatchDecoder::new(1 << 20);
    for c in rest.chunks(chunk) {
        dec.push(c);
        loop {
            match dec.next_event() {
                Ok(Some(ev)) => {
                    let _ = kcache_proto::decode_object::<Pod>(ev.object.clone());
                    let _ = kcache_proto::compact::CompactObject::from_envelope(&ev.object);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    let _ = dec.finish();
    if let Ok(env) = kcache_proto::Envelope::decode(Bytes::copy_from_slice(rest)) {
        let _ = kcache_proto::decode_list::<Pod>(env);
    }
});
