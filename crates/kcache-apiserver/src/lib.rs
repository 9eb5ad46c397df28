//! An embedded, in-process Kubernetes-compatible API server.
//!
//! `kcache-apiserver` speaks the real Kubernetes REST protocol (as recorded from
//! kube-apiserver v1.36.5) for any resource, stored as schemaless JSON: lists with
//! pagination and resourceVersion semantics, chunked watches with bookmarks and streaming
//! initial lists, CRUD with merge and JSON patches, discovery so that `kubectl` works,
//! and fault injection for tests. Of the kcache crates it needs kcache, kcache-proto (the core's label
//! selectors, protobuf), so it can be used on its own in a controller's tests.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use kcache_apiserver::ApiServer;
//!
//! let server = ApiServer::builder().build().start().await?;
//! println!("serving on {}", server.url());
//! server.handle().create(
//!     "/api/v1/namespaces/default/configmaps",
//!     serde_json::json!({"metadata": {"name": "cm1"}, "data": {"k": "v"}}),
//! )?;
//! server.faults().drop_watches();
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! What it serves:
//!
//! - storage: schemaless JSON per group/version/resource ([`ResourceInfo`]; the built-ins
//!   are every resource kube-apiserver v1.36.5's discovery lists — 68 in 21 groups,
//!   generated from its discovery documents in this crate's `data/` — with their verbs,
//!   names and the registry strategies' generation and update rules; more with
//!   [`ApiServerBuilder::resource`] or [`ServerHandle::register`]), one global
//!   resourceVersion, a bounded per-type history ([`ApiServerBuilder::history_events`],
//!   [`ApiServerBuilder::history_age`]);
//! - subresources: `status`, `scale`, `finalize`, `pods/eviction` (PodDisruptionBudgets
//!   honoured), `pods/binding`, `pods/ephemeralcontainers`, `pods/resize`,
//!   `serviceaccounts/token` (a token the server accepts),
//!   CertificateSigningRequests' `approval`; the review kinds answered by the authorizer;
//! - who may do what ([`auth`]): the admin token (`system:masters`), a static token table and
//!   [`RunningServer::add_user`], service account tokens, client certificates, anonymous
//!   requests, impersonation, and RBAC over the server's own Roles and bindings with the
//!   bootstrap roles of kube-apiserver v1.36.5 ([`ApiServerBuilder::authorization`] turns
//!   it off); beyond kube-apiserver, a record of what each user did
//!   ([`RunningServer::permissions`]), the least-privilege Roles written from it and a check
//!   of RBAC manifests against it ([`auth::permissions`]);
//! - the objects of a fresh cluster: the system namespaces, the `default/kubernetes`
//!   Service and a `default` ServiceAccount in every namespace;
//! - list: `limit`/`continue` (kube-apiserver's token format), `remainingItemCount`,
//!   `resourceVersion` + `resourceVersionMatch`, label and field selectors, 410/504 as
//!   recorded;
//! - protobuf (`application/vnd.kubernetes.protobuf`) for the built-in kinds: objects, lists,
//!   `Status` errors and watch frames, negotiated from `Accept` as kube-apiserver does; custom
//!   resources answer JSON (or 406 when `Accept` allows nothing else);
//! - watch: chunked NDJSON (or length-prefixed protobuf frames), `timeoutSeconds`, bookmarks,
//!   `sendInitialEvents`, selector entry/exit as ADDED/DELETED, expired RVs as one ERROR
//!   event;
//! - writes: create/update/delete, merge, JSON and strategic merge patches, a simple
//!   server-side apply, finalizers, generation, managedFields, dry runs;
//! - a garbage collector like kube-controller-manager's over `ownerReferences`: background,
//!   foreground (`foregroundDeletion`, `blockOwnerDeletion`) and orphan propagation, dangling
//!   owners ([`ApiServerBuilder::garbage_collector`] turns it off, as in envtest);
//! - discovery (plain and aggregated), Tables, a minimal OpenAPI v3, so `kubectl` works;
//! - faults ([`FaultHandle`], and `/debug/kcache/` when enabled);
//! - HTTPS on request ([`ApiServerBuilder::https`]; `kcache serve` defaults to it): a CA and
//!   serving certificate generated at start and an admin bearer token, both in the written
//!   kubeconfig ([`RunningServer::kubeconfig`], [`RunningServer::ca_pem`]). The builder's
//!   default is plain HTTP on 127.0.0.1.
//!
//! Deliberate differences from kube-apiserver are listed in `DIFFERENCES.md`.
#![doc(test(attr(deny(warnings))))]

pub(crate) mod admission;
pub mod auth;
mod config;
pub mod fault;
pub(crate) mod gc;
mod handle;
mod http;
mod jsonpatch;
pub mod manifests;
pub(crate) mod object;
pub(crate) mod registry;
pub mod resource;
mod schema;
pub(crate) mod selector;
pub mod server;
pub mod status;
pub(crate) mod store;
pub mod tls;

pub use fault::{FaultHandle, InjectedFailure};
pub use handle::ServerHandle;
pub use resource::{ResourceId, ResourceInfo};
pub use server::{
    ApiServer, ApiServerBuilder, RunningServer, ServerConfig, ServerError, kubeconfig_document,
    kubeconfig_yaml,
};
pub use status::ApiError;
pub use store::HistoryConfig;
