//! Shared code of `kcache bench`, the side-by-side benchmark of kcache, client-go and kube-rs.
//!
//! - [`line`](mod@line): the one JSON line every peer prints (the format of `harness/client-go-peer`);
//! - [`metrics`]: the process's CPU time and memory high-water mark, read the same way by
//!   every Rust peer;
//! - [`peer`]: the command-line flags every peer shares and the sync / update timers;
//! - [`server_cost`]: what a client costs the API server (its CPU, memory and bytes written,
//!   read from `/proc/<pid>` of the server process);
//! - [`dataset`]: the realistic pods the benchmark loads and the updater that changes each
//!   of them once;
//! - [`widgets`]: the custom-resource dataset (a CRD and its `Widget`s).
#![doc(test(attr(deny(warnings))))]

pub mod dataset;
pub mod labels;
pub mod line;
pub mod metrics;
pub mod peer;
pub mod server_cost;
pub mod widgets;

pub use line::PeerLine;
