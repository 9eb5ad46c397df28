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
//! ```
//! use kcache::store::ObjectKey;
//! let key = ObjectKey::new(Some("default"), "web-0");
//! assert_eq!(key.to_string(), "default/web-0");
//! ```
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod controller;
pub mod factory;
pub mod fifo;
pub mod histogram;
pub mod informer;
pub mod leaderelection;
pub mod lister_watcher;
pub mod memory;
pub mod reflector;
pub mod sharding;
pub mod store;
#[cfg(any(test, feature = "testing", doc))]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod workqueue;

pub use factory::{InformerFrom, SharedInformerFactory};
pub use informer::{EventHandler, HandlerFns, HandlerRegistration, SharedIndexInformer};
pub use lister_watcher::ListerWatcher;

#[cfg(test)]
mod test_support;
