//! [`ServerConfig`]: the settings of a server, read by every layer (re-exported as
//! `kcache_apiserver::server::ServerConfig`).

use std::net::SocketAddr;
use std::time::Duration;

use crate::store::HistoryConfig;

/// Server settings; every field has a default matching kube-apiserver where one exists.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Listen address; default `127.0.0.1:0` (loopback, any free port).
    pub listen: SocketAddr,
    /// Require `Authorization: Bearer <token>` (401 otherwise); default none.
    pub token: Option<String>,
    /// Maximum request body size in bytes (413 above); default 3 MiB as kube-apiserver.
    pub body_limit: usize,
    /// Interval between periodic watch bookmarks; default 60 s. A bookmark is also sent
    /// 2 s before a watch's timeout.
    pub bookmark_interval: Duration,
    /// Event history kept per resource type.
    pub history: HistoryConfig,
    /// Serve the `/debug/kcache/` fault endpoints; default off.
    pub enable_faults_http: bool,
    /// How long a list at a future resourceVersion waits before the 504; default 3 s.
    pub too_large_rv_wait: Duration,
    /// Watch timeout when the client sends no `timeoutSeconds`; default 30 min.
    pub default_watch_timeout: Duration,
    /// Create a namespace on first use instead of answering 404; default off.
    pub auto_create_namespaces: bool,
    /// Serve HTTPS with a CA and serving certificate generated at start (valid for
    /// 127.0.0.1, ::1, localhost and the listen address), and require a bearer token (one is
    /// generated when [`token`](Self::token) is unset). Default off for the Rust builder, whose
    /// in-process users mostly talk plain HTTP; `kcache serve` turns it on.
    pub https: bool,
    /// Run a garbage collector like kube-controller-manager's over `metadata.ownerReferences`
    /// (background, foreground and orphan propagation); default on. Off, nothing collects owned
    /// objects and the `foregroundDeletion` / `orphan` finalizers a DELETE adds stay, as with a
    /// bare kube-apiserver (envtest).
    pub garbage_collector: bool,
    /// CA certificates (PEM) whose client certificates authenticate, as kube-apiserver's
    /// `--client-ca-file`: the subject's CN is the user, its O the groups. A client presenting
    /// no certificate still connects. Needs HTTPS (setting it turns [`https`](Self::https) on).
    pub client_ca_pem: Option<String>,
    /// Serve this certificate instead of a generated one (kube-apiserver's `--tls-cert-file`
    /// / `--tls-private-key-file`); turns [`https`](Self::https) on. The server then has no
    /// CA of its own to put into its kubeconfig.
    pub serving_certificate: Option<crate::tls::ServingCertificate>,
    /// Create a `default` ServiceAccount in every new namespace, as kube-controller-manager's
    /// service account controller does in a cluster; default on. Off, as envtest's bare
    /// kube-apiserver: namespaces get none.
    pub default_service_accounts: bool,
    /// Authorize requests by RBAC over the server's own Roles, ClusterRoles and bindings, as
    /// kube-apiserver with `--authorization-mode=RBAC` (and envtest) do; default on. The admin
    /// (the [`token`](Self::token)'s user, in `system:masters`) may do everything either way;
    /// off, every authenticated request is allowed.
    pub authorization: bool,
    /// Treat requests without credentials as `system:anonymous` (group
    /// `system:unauthenticated`), as kube-apiserver's default `--anonymous-auth=true`; off,
    /// they get 401. Only when an admin [`token`](Self::token) is set: without one, a request
    /// without credentials is the admin.
    pub anonymous_auth: bool,
    /// More bearer tokens and the users they authenticate (kube-apiserver's
    /// `--token-auth-file`); default none.
    pub users: Vec<crate::auth::StaticToken>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            body_limit: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(60),
            history: HistoryConfig::default(),
            enable_faults_http: false,
            too_large_rv_wait: Duration::from_secs(3),
            default_watch_timeout: Duration::from_secs(1800),
            auto_create_namespaces: false,
            https: false,
            garbage_collector: true,
            client_ca_pem: None,
            serving_certificate: None,
            default_service_accounts: true,
            authorization: true,
            anonymous_auth: true,
            users: Vec::new(),
        }
    }
}
