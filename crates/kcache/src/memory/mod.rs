//! Cache memory accounting: how many bytes an informer's cache holds, kept up to date as
//! objects come and go, and the deep-size estimate it is built on.
//!
//! Accounting is opt-in. A [`ThreadSafeStore`](crate::store::ThreadSafeStore) given a
//! [`Sizer`] ([`ThreadSafeStore::set_sizer`](crate::store::ThreadSafeStore::set_sizer);
//! [`informer::Builder::account_memory`](crate::informer::Builder::account_memory), on an
//! informer of its own or a factory's) adds each stored object's size to a running
//! total when it is inserted and subtracts it when the object is replaced or removed, under
//! the store's write lock: the total is never computed by walking the cache. Without a sizer
//! the store does no accounting work at all.
//!
//! The sizer is a pure function of an immutable object, so a replaced or removed object's size
//! is recomputed rather than kept beside the entry: an entry costs no extra memory, and what is
//! subtracted is exactly what was added (deleting everything brings the total back to zero).
//! The cost is one more estimate per update or delete. New objects are sized before the write
//! lock is taken; only the objects that leave the cache are sized under it.
//!
//! # What [`estimate`] counts
//!
//! [`estimate`] walks any `T: serde::Serialize` with a serializer that writes nothing and adds
//! up heap bytes, assuming the usual owned representation (k8s-openapi types, `serde_json`
//! values):
//!
//! - `size_of_val(value)` for the value itself (the struct's inline size: its `Option`s,
//!   numbers, booleans and the `String`/`Vec`/map headers are inline, so a field adds nothing
//!   of its own unless it owns heap);
//! - a string's length (its buffer; `String`s decoded from JSON or protobuf have no spare
//!   capacity); bytes serialized as bytes, their length;
//! - for a sequence, its buffer — the element's inline size times the capacity that pushing
//!   the elements one by one gives (the next power of two, and at least 4 for elements of up
//!   to 1 KiB: what serde's and kcache-proto's decoders build) — plus each element's own heap.
//!   serde hands elements over by reference, so `size_of_val` of what it gives is a
//!   pointer's: a struct element's size is the stride between two elements' same field (safe
//!   address arithmetic, no dereference); a one-element sequence takes the size learned for
//!   that struct name, seeded with `size_of` the k8s-openapi structs that sit in the `Vec`s of
//!   common objects (`Container`, `EnvVar`, `Volume`, `ManagedFieldsEntry`, …), else the span
//!   of its present fields (a lower bound); any other element is sized by its first
//!   serializer call (24 bytes for a string, sequence or map, a number's width);
//! - for a map, `BTreeMap` nodes: one leaf of 11 key/value slots (plus its parent pointer,
//!   index and length) for up to 11 entries, and beyond that one leaf per 7 entries (sorted
//!   insertion leaves each split leaf 6 entries, one going up) plus internal nodes of 12 edges
//!   each — then each key's and value's own heap (a key's or value's inline size is taken from
//!   its first serializer call, as for non-struct elements);
//! - k8s-openapi's `Time` and `MicroTime`, which serialize as strings but hold an inline
//!   timestamp, count no heap; neither do the `&'static str` fields k8s-openapi serializes
//!   for a top-level object's `apiVersion` and `kind`.
//!
//! It does not count: allocator overhead (size classes, headers, fragmentation), spare
//! capacity in `String`s, a `Vec` built with a capacity other than pushing gives (a clone or a
//! `vec![…]` holds less than counted), a `serde_json::Value`'s full 32 bytes inside a map or
//! array (counted as what it serializes as), `Box`ed values' inline size (rare in k8s-openapi: `JSONSchemaProps`), `HashMap`s' own
//! layout (every map is taken for a `BTreeMap`), a base64 `ByteString`'s decoded size (its
//! encoded length is counted, a third more), and anything shared (`Arc`'d) counted once per
//! holder.
//!
//! # What the store adds per entry
//!
//! [`entry_overhead`](crate::store::entry_overhead): the object's `Arc` header (two counts), the key's shared allocation
//! (two counts and the `ns/name` bytes, rounded up to 8) and the key→object slot of the
//! store's hash table (the key and the `Arc` pointer, plus one control byte). The hash table's
//! spare slots (up to half of it after it grows), the index entries (the namespace index and
//! any other) and the informer's FIFO are not counted.
//!
//! Against a counting allocator, realistic typed pods decoded from JSON and stored are
//! estimated at 0.98× the bytes the store grows by (1.00× with `managedFields` stripped):
//! `crates/kcache/tests/memory_accounting.rs` requires ±10%; the figures at 10,000 and 100,000
//! pods, with process RSS, are in BENCHMARKS.md.
//!
//! For compact storage (`kcache_client::compact::Compact<K>`) the sizer is
//! `Compact::heap_size`: the held wire bytes exactly, plus the parsed metadata estimated as
//! above.

mod estimate;
mod seed;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use estimate::{estimate, heap_size};

/// A function that tells how many bytes an object holds (inline and on the heap): given to a
/// store or informer to turn memory accounting on. [`estimator`] is the one for any
/// `serde::Serialize` type.
pub type Sizer<K> = Arc<dyn Fn(&K) -> usize + Send + Sync>;

/// [`estimate`] as a [`Sizer`].
pub fn estimator<K: serde::Serialize>() -> Sizer<K> {
    Arc::new(|obj: &K| estimate(obj))
}

/// What an accounted cache holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Objects in the cache.
    pub objects: usize,
    /// Bytes they hold: each object's size by the store's [`Sizer`], plus
    /// [`entry_overhead`](crate::store::entry_overhead) per entry.
    pub bytes: usize,
}
