//! Sharding across replicas on Kubernetes' own mechanisms: KEP-5866 shard selectors and one
//! Lease per shard.
//!
//! When one replica is not enough (too many objects for one cache, too many reconciles for one
//! process), `N` replicas share the objects by the 64-bit FNV-1a hash of `metadata.uid` (or
//! `metadata.namespace`), cut into a fixed number of equal [`Layout`] shards:
//!
//! - **Which objects a replica caches** — a [`Selection`] on its informers' lister-watchers:
//!   kube-apiserver ≥ v1.36 with the `ShardedListAndWatch` feature gate filters lists and
//!   watches by the [`Selector`] (`shardSelector=shardRange(object.metadata.uid, …)`) and
//!   echoes it in the list's `metadata.shardInfo`; without the gate (or on older servers)
//!   [`ShardFilter`] filters on the client, so the cache holds the same objects either way —
//!   only the bytes transferred differ.
//! - **Which shards a replica holds** — a [`ShardManager`]: one Lease per shard and one
//!   membership Lease per replica; each replica takes up to its fair share ⌈N / live
//!   replicas⌉, gives up surplus shards when a replica joins and takes over the shards of
//!   one whose Leases expired.
//! - **What a replica reconciles** — the [`ShardGate`]: workers reconcile only keys of open
//!   shards, and a shard is closed (its reconciles in flight drained) before its Lease is
//!   released, so no key is reconciled by two replicas at once.
//!   [`Controller::run_sharded`](crate::controller::Controller::run_sharded) puts the three
//!   together.
//!
//! No coordination service of our own: everything is Leases and list/watch parameters.
//!
//! ```
//! use std::collections::BTreeSet;
//! use kcache::sharding::{Field, Layout, Selector};
//! let layout = Layout::new(2, Field::Uid);
//! let second = layout.selector(&BTreeSet::from([1]));
//! assert_eq!(
//!     second.to_wire(),
//!     "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
//! );
//! assert_eq!(Selector::parse(&second.to_wire()).unwrap(), second);
//! ```

mod config;
#[cfg(any(test, feature = "testing", doc))]
mod fake;
mod gate;
mod layout;
mod leases;
mod manager;
mod selection;
mod selector;
#[cfg(test)]
mod tests;

pub use config::{Config, Error};
#[cfg(any(test, feature = "testing", doc))]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use fake::FakeLeases;
pub use gate::{GateGuard, ShardGate};
pub use layout::Layout;
pub use leases::{GROUP_LABEL, NamedRecord, ShardLeases};
pub use manager::ShardManager;
pub use selection::{Current, Selection, ShardFilter};
pub use selector::{Field, HASH_SPACE, ParseError, Range, Selector, fnv1a64};
