//! # kcache
//!
//! Kubernetes' informer machinery (client-go `tools/cache` and `util/workqueue`) in Rust:
//! an indexed, in-memory cache kept in sync with the API server by a reflector, FIFOs that
//! carry every change in order, shared informers that hand changes to event handlers, and
//! rate-limited work queues that drive controllers.
//!
//! This crate has no network code: the API server is reached through a [`ListerWatcher`]
//! (implemented over HTTP by `kcache-client`, and in memory by [`testing`]).
//!
//! # The map, in data-path order
//!
//! | module | what it holds |
//! |---|---|
//! | [`lister_watcher`] | the source: list + watch, the only thing the reflector knows of the server |
//! | [`reflector`] | list-and-watch with client-go's recovery table; feeds a `ReflectorStore` |
//! | [`fifo`] | `RealFifo` (the informers' ordered log) and `DeltaFifo` |
//! | [`store`] | `ThreadSafeStore`, indexes, keys, listers: the cache readers read |
//! | [`informer`] | `SharedIndexInformer`: FIFO → store → per-handler listeners |
//! | [`factory`] | `SharedInformerFactory`: one informer per type, started and synced together |
//! | [`workqueue`] | rate-limited, delaying and priority work queues |
//! | [`controller`] | reconcile workers over a work queue, policies, leader-gated runs |
//! | [`leaderelection`] | Lease-based leader election, warm standby |
//! | [`sharding`] | KEP-5866 shard selectors and per-shard Leases |
//! | [`memory`] | cache byte accounting |
//! | [`testing`] | in-memory doubles (feature `testing`) |
//!
//! ```
//! use kcache::store::ObjectKey;
//! let key = ObjectKey::new(Some("default"), "web-0");
//! assert_eq!(key.to_string(), "default/web-0");
//! ```
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Along the data path, in order: the source,
pub mod lister_watcher;
// list-and-watch,
pub mod reflector;
// the ordered log of changes,
pub mod fifo;
// the cache,
pub mod store;
// shared informers,
pub mod informer;
// one informer per type,
pub mod factory;
// work queues,
pub mod workqueue;
// the controllers that drain them,
pub mod controller;
// leader election,
pub mod leaderelection;
// and sharding across replicas.
pub mod sharding;
// Beside the path.
mod histogram;
pub mod memory;
#[cfg(any(test, feature = "testing", doc))]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use factory::{InformerFrom, SharedInformerFactory};
pub use histogram::HistogramSnapshot;
pub use informer::{EventHandler, HandlerFns, HandlerRegistration, SharedIndexInformer};
pub use lister_watcher::ListerWatcher;

#[cfg(test)]
mod test_support;
