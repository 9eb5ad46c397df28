//! A test environment for Rust controllers, like controller-runtime's envtest but in-process:
//! kcache's embedded API server ([`kcache_apiserver`]) started on a free loopback port in
//! milliseconds, CustomResourceDefinitions installed (from Rust types or manifest
//! directories) and Established, a kube [`kube_client::Client`] and a kcache
//! [`kcache_client::Client`] handed out, a kubeconfig written for other processes, and a
//! clean stop (on [`TestEnv::stop`], or on drop).
//!
//! Unlike envtest's bare kube-apiserver, the server garbage-collects owned objects and
//! finishes namespace deletions; [`Config::garbage_collector`] turns the collector off for
//! tests that want envtest's behaviour. [`WebhookServer`] serves an admission webhook from a
//! Rust function; [`TestEnv::install_webhook`] registers it as a [`Webhook`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kcache_testenv::Error> {
//! use kcache_testenv::TestEnv;
//!
//! let crd = serde_json::json!({
//!     "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
//!     "metadata": {"name": "widgets.example.com"},
//!     "spec": {"group": "example.com", "scope": "Namespaced",
//!              "names": {"plural": "widgets", "kind": "Widget"},
//!              "versions": [{"name": "v1", "served": true, "storage": true,
//!                            "schema": {"openAPIV3Schema": {"type": "object",
//!                                "x-kubernetes-preserve-unknown-fields": true}}}]}});
//! let env = TestEnv::start(kcache_testenv::Config::default().crd_value(crd)).await?;
//! let pods: kube_client::Api<k8s_openapi::api::core::v1::Pod> =
//!     kube_client::Api::default_namespaced(env.kube_client());
//! assert!(pods.list(&Default::default()).await.is_ok());
//! println!("other processes can use {}", env.kubeconfig_path().display());
//! env.stop().await;
//! # Ok(())
//! # }
//! ```
//!
//! For Go tests (envtest's existing-cluster mode), start the same server as a process:
//! `kcache serve --listen 127.0.0.1:0 --write-kubeconfig /tmp/kc --manifests config/crd` and run
//! the tests with `USE_EXISTING_CLUSTER=true KUBECONFIG=/tmp/kc` (see the README).

mod config;
mod env;
mod registration;
mod user;
mod webhook;

pub use config::Config;
pub use env::TestEnv;
pub use registration::Webhook;
pub use user::User;
pub use webhook::{Handler, WebhookServer};

/// Errors starting or using a [`TestEnv`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server could not start.
    #[error("starting the API server: {0}")]
    Server(#[from] kcache_apiserver::ServerError),
    /// A manifest directory could not be loaded.
    #[error("loading manifests: {0}")]
    Manifests(#[from] kcache_apiserver::manifests::Error),
    /// An object given to the environment (a CRD, a namespace) was refused.
    #[error("creating {what}: {source}")]
    Create {
        /// What was created (`CustomResourceDefinition "widgets.example.com"`).
        what: String,
        /// The server's answer.
        #[source]
        source: Box<kcache_apiserver::ApiError>,
    },
    /// A CustomResourceDefinition was not Established in time.
    #[error("CustomResourceDefinition {0:?} was not Established within {1:?}")]
    NotEstablished(String, std::time::Duration),
    /// A value could not be serialised (a Rust type's CRD).
    #[error("serialising: {0}")]
    Serialise(#[from] serde_json::Error),
    /// The kubeconfig could not be read back or a kube client built.
    #[error("building the kube client: {0}")]
    Kube(String),
    /// The kcache client could not be built.
    #[error("building the kcache client: {0}")]
    Client(#[from] kcache_client::Error),
    /// A webhook server could not be set up (its certificate).
    #[error("starting the webhook server: {0}")]
    Webhook(String),
    /// The kubeconfig directory could not be made.
    #[error("writing the kubeconfig: {0}")]
    Io(#[from] std::io::Error),
}
