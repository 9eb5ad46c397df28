//! [`WireStats`]: the counters of the wire formats (protobuf or JSON) a lister-watcher's
//! responses came in, and of the list bytes received.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

/// How many list and watch responses a [`HttpListerWatcher`](super::HttpListerWatcher) (and its
/// clones) decoded in each wire format: which format the server really answered in, whatever
/// was asked for.
///
/// A cheap handle: clones share the counters, so it can be kept while the lister-watcher is
/// handed to a reflector.
#[derive(Clone, Debug, Default)]
pub struct WireStats(pub(super) Arc<WireCounters>);

#[derive(Debug, Default)]
pub(super) struct WireCounters {
    pub(super) protobuf: AtomicU64,
    pub(super) json: AtomicU64,
    pub(super) list_bytes: AtomicU64,
}

impl WireStats {
    /// Responses (list pages and watch streams) decoded from protobuf.
    pub fn protobuf(&self) -> u64 {
        self.0.protobuf.load(Ordering::Relaxed)
    }

    /// Responses (list pages and watch streams) decoded from JSON.
    pub fn json(&self) -> u64 {
        self.0.json.load(Ordering::Relaxed)
    }

    /// Bytes of list response bodies received (after content decoding).
    pub fn list_bytes(&self) -> u64 {
        self.0.list_bytes.load(Ordering::Relaxed)
    }

    pub(super) fn record(&self, protobuf: bool) {
        let c = if protobuf {
            &self.0.protobuf
        } else {
            &self.0.json
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}
