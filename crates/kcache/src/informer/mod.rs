//! Shared informers: one reflector and one indexed cache per resource, shared by many event
//! handlers (client-go's `SharedIndexInformer`).
//!
//! ```text
//! ListerWatcher ─▶ Reflector ─▶ RealFifo ─▶ handle_deltas ─┬▶ Indexer (Lister reads here)
//!                                                          └▶ processor ─▶ one listener per handler
//! ```
//!
//! The FIFO is drained on the reflector's own task as soon as it is written (`run.rs`), and a
//! handler is called where its [`Delivery`] says: by that same task ([`Delivery::Inline`]), on
//! its listener's task once it has shown itself quick ([`Delivery::Adaptive`], the default),
//! or on tokio's blocking pool.
//!
//! `handle_deltas` updates the indexer first, then notifies: for an added/updated/replaced/synced
//! object, `on_update(old, new)` if the key was cached, else `on_add`; for a deleted one,
//! `on_delete` with the final state or a [`DeletedObject::FinalStateUnknown`] tombstone. An
//! update whose resourceVersion did not change is a *resync* notification: only handlers whose
//! resync is due receive it.

mod builder;
mod config;
mod deltas;
mod error;
mod handler;
mod listener;
mod memory;
mod processor;
mod registration;
mod run;
mod shared_informer;
mod starter;

pub use builder::{Builder, FromListerWatcher};
pub(crate) use builder::{Extras, Index, stripping};
pub use config::{Config, HandlerConfig, MINIMUM_RESYNC_PERIOD};
pub use error::Error;
pub use handler::{DeletedObject, EventHandler, HandlerFns};
pub use listener::{BufferMode, Delivery, QUICK_CALLS_TO_MOVE, SLOW_CALL};
pub use registration::HandlerRegistration;
pub use shared_informer::SharedIndexInformer;

#[cfg(test)]
mod tests;
