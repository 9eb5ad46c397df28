//! Starting and stopping the server: [`ApiServer::builder`] → [`RunningServer`].

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use crate::config::ServerConfig;
use crate::fault::{FaultHandle, FaultState};
use crate::handle::ServerHandle;
use crate::http;
use crate::registry::AppState;
use crate::resource::{Registry, ResourceInfo, builtin_resources};
use crate::store::Store;

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A seed object was rejected.
    #[error("seed object rejected: {0}")]
    Seed(#[source] crate::status::ApiError),
    /// The TLS certificates could not be made.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// Writing the kubeconfig failed.
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A configured kube-apiserver, not serving yet: `ApiServer::builder()…build()`, then
/// [`start`](Self::start)`.await`.
#[derive(Debug)]
#[must_use = "a server serves nothing until `start`"]
pub struct ApiServer {
    config: ServerConfig,
    resources: Vec<ResourceInfo>,
    seed: Vec<(String, Value)>,
}

impl ApiServer {
    /// A builder with the default configuration and the built-in resources.
    pub fn builder() -> ApiServerBuilder {
        ApiServerBuilder {
            config: ServerConfig::default(),
            resources: builtin_resources(),
            seed: Vec::new(),
        }
    }

    /// Binds the listener, creates the default namespaces and the seed objects, and
    /// serves on a spawned task.
    ///
    /// # Errors
    /// [`ServerError::Bind`] when the address cannot be bound, [`ServerError::Seed`] when
    /// a seed object is rejected.
    ///
    /// # Panics
    /// Never; must be called inside a Tokio runtime.
    pub async fn start(mut self) -> Result<RunningServer, ServerError> {
        let addr = self.config.listen;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { addr, source })?;
        if self.config.client_ca_pem.is_some() || self.config.serving_certificate.is_some() {
            self.config.https = true;
        }
        let tls = if self.config.https {
            if self.config.token.is_none() {
                let bytes: [u8; 32] = rand::random();
                self.config.token = Some(bytes.iter().map(|b| format!("{b:02x}")).collect());
            }
            Some(crate::tls::material(
                local,
                self.config.serving_certificate.as_ref(),
                self.config.client_ca_pem.as_deref(),
            )?)
        } else {
            None
        };
        let https = tls.is_some();
        let store = Store::new(self.config.history);
        let registry = Registry::new(self.resources);
        let shutdown = CancellationToken::new();
        let faults = Arc::new(FaultState::new());
        let state = Arc::new(AppState {
            store: store.clone(),
            registry: registry.clone(),
            config: self.config.clone(),
            faults: faults.clone(),
            shutdown: shutdown.clone(),
            tokens: parking_lot::Mutex::new(std::collections::HashMap::new()),
            gc: crate::registry::Trigger::default(),
            auth: crate::auth::AuthState::new(&self.config.users),
        });
        let handle = ServerHandle {
            state: state.clone(),
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            handle
                .create(
                    "/api/v1/namespaces",
                    serde_json::json!({"metadata": {"name": ns}}),
                )
                .map_err(ServerError::Seed)?;
        }
        handle
            .create(
                "/api/v1/namespaces/default/services",
                serde_json::json!({
                    "metadata": {"name": "kubernetes",
                                 "labels": {"component": "apiserver", "provider": "kubernetes"}},
                    "spec": {"clusterIP": "10.96.0.1", "type": "ClusterIP",
                             "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                        "targetPort": local.port()}]},
                }),
            )
            .map_err(ServerError::Seed)?;
        // kube-apiserver's componentstatuses (computed there by probing; kcache runs no scheduler
        // or controller manager, and is its own storage).
        for (name, healthy, message) in [
            ("scheduler", "False", "kcache runs no kube-scheduler"),
            (
                "controller-manager",
                "False",
                "kcache runs no kube-controller-manager",
            ),
            ("etcd-0", "True", "ok"),
        ] {
            handle
                .create(
                    "/api/v1/componentstatuses",
                    serde_json::json!({"metadata": {"name": name},
                        "conditions": [{"type": "Healthy", "status": healthy, "message": message}]}),
                )
                .map_err(ServerError::Seed)?;
        }
        // The RBAC roles and bindings kube-apiserver creates at start.
        handle.seed_rbac().map_err(ServerError::Seed)?;
        for (path, obj) in self.seed {
            handle.create(&path, obj).map_err(ServerError::Seed)?;
        }
        let ca_pem = tls.as_ref().and_then(|m| m.ca_pem.clone());
        if self.config.garbage_collector {
            tokio::spawn(crate::gc::run(state.clone(), shutdown.clone()));
        }
        let task = tokio::spawn(http::serve(listener, state, shutdown.clone(), tls));
        Ok(RunningServer {
            addr: local,
            https,
            token: self.config.token,
            ca_pem,
            shutdown,
            task: Some(task),
            faults: FaultHandle {
                state: faults,
                store,
            },
            handle,
        })
    }
}

/// Configures an [`ApiServer`]; [`build`](Self::build) makes it.
#[derive(Debug)]
#[must_use]
pub struct ApiServerBuilder {
    config: ServerConfig,
    resources: Vec<ResourceInfo>,
    seed: Vec<(String, Value)>,
}

impl ApiServerBuilder {
    /// Replaces the whole configuration.
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Listen address (default `127.0.0.1:0`).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.config.listen = addr;
        self
    }

    /// Requires this bearer token.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.config.token = Some(token.into());
        self
    }

    /// Maximum request body size.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.config.body_limit = bytes;
        self
    }

    /// Periodic bookmark interval.
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.config.bookmark_interval = every;
        self
    }

    /// Keep at most `events` history events per resource type.
    pub fn history_events(mut self, events: usize) -> Self {
        self.config.history.max_events = events.max(1);
        self
    }

    /// Drop history events older than `age`.
    pub fn history_age(mut self, age: Duration) -> Self {
        self.config.history.max_age = Some(age);
        self
    }

    /// Serve the `/debug/kcache/` fault endpoints.
    pub fn enable_faults_http(mut self, on: bool) -> Self {
        self.config.enable_faults_http = on;
        self
    }

    /// Create namespaces on first use.
    pub fn auto_create_namespaces(mut self, on: bool) -> Self {
        self.config.auto_create_namespaces = on;
        self
    }

    /// Serve HTTPS with a generated CA and an admin bearer token ([`ServerConfig::https`]).
    pub fn https(mut self, on: bool) -> Self {
        self.config.https = on;
        self
    }

    /// Run the garbage collector ([`ServerConfig::garbage_collector`]; default on). Off, the
    /// server behaves as a bare kube-apiserver (envtest): owned objects stay when their owner
    /// is deleted, and the `foregroundDeletion` / `orphan` finalizers are never removed.
    pub fn garbage_collector(mut self, on: bool) -> Self {
        self.config.garbage_collector = on;
        self
    }

    /// Authenticate client certificates signed by this CA (PEM), as kube-apiserver's
    /// `--client-ca-file` ([`ServerConfig::client_ca_pem`]); turns HTTPS on.
    pub fn client_ca_pem(mut self, pem: impl Into<String>) -> Self {
        self.config.client_ca_pem = Some(pem.into());
        self
    }

    /// Serve this certificate instead of a generated one
    /// ([`ServerConfig::serving_certificate`]); turns HTTPS on.
    pub fn serving_certificate(mut self, cert: crate::tls::ServingCertificate) -> Self {
        self.config.serving_certificate = Some(cert);
        self
    }

    /// Create a `default` ServiceAccount in every new namespace
    /// ([`ServerConfig::default_service_accounts`]; default on, off for envtest's bare
    /// kube-apiserver).
    pub fn default_service_accounts(mut self, on: bool) -> Self {
        self.config.default_service_accounts = on;
        self
    }

    /// Authorize requests by RBAC ([`ServerConfig::authorization`]; default on). Off, every
    /// authenticated request is allowed.
    pub fn authorization(mut self, on: bool) -> Self {
        self.config.authorization = on;
        self
    }

    /// Anonymous requests as `system:anonymous` ([`ServerConfig::anonymous_auth`]; default on).
    pub fn anonymous_auth(mut self, on: bool) -> Self {
        self.config.anonymous_auth = on;
        self
    }

    /// One more bearer token, authenticating as `user` (a line of kube-apiserver's
    /// `--token-auth-file`).
    pub fn user_token(mut self, token: impl Into<String>, user: crate::auth::UserInfo) -> Self {
        self.config
            .users
            .push(crate::auth::StaticToken::new(token, user));
        self
    }

    /// Serves one more resource type.
    pub fn resource(mut self, info: ResourceInfo) -> Self {
        self.resources.push(info);
        self
    }

    /// Creates `object` at start under the collection path `path`
    /// (e.g. `/api/v1/namespaces/default/configmaps`).
    pub fn seed(mut self, path: impl Into<String>, object: Value) -> Self {
        self.seed.push((path.into(), object));
        self
    }

    /// The server, configured; it serves nothing until [`ApiServer::start`].
    pub fn build(self) -> ApiServer {
        ApiServer {
            config: self.config,
            resources: self.resources,
            seed: self.seed,
        }
    }
}

/// A started server. Dropping it stops the server (without waiting).
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    https: bool,
    token: Option<String>,
    ca_pem: Option<String>,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
    faults: FaultHandle,
    handle: ServerHandle,
}

impl RunningServer {
    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, e.g. `http://127.0.0.1:40123` (`https://` when serving HTTPS).
    #[must_use]
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The generated CA certificate (PEM) that signed the serving certificate, when serving
    /// HTTPS with a generated one (none with [`ServerConfig::serving_certificate`]); clients
    /// trust it to verify the server.
    #[must_use]
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The bearer token the server requires (set, or generated for HTTPS), if any.
    #[must_use]
    pub fn admin_token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Adds a user `name` in `groups` (and `system:authenticated`) with a fresh bearer token,
    /// as envtest's `AddUser`: what it may do is what RBAC objects grant it.
    ///
    /// ```no_run
    /// # async fn f(server: kcache_apiserver::RunningServer) {
    /// let alice = server.add_user("alice", ["dev"]);
    /// std::fs::write("alice.kubeconfig", &alice.kubeconfig).unwrap();
    /// # }
    /// # let _ = f;
    /// ```
    pub fn add_user<I, S>(&self, name: &str, groups: I) -> crate::auth::AddedUser
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let token = crate::auth::random_token();
        let user = crate::auth::UserInfo::new(name, groups);
        self.handle
            .state
            .auth
            .tokens
            .write()
            .insert(token.clone(), user.clone());
        crate::auth::AddedUser {
            kubeconfig: kubeconfig_document(&self.url(), Some(&token), self.ca_pem.as_deref()),
            token,
            user: user.with_authenticated(),
        }
    }

    /// What each user did so far: every distinct request the server authorized or refused,
    /// per user (see [`auth::permissions`](crate::auth::permissions), beyond kube-apiserver).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = kcache_apiserver::ApiServer::builder().build().start().await?;
    /// assert!(server.permissions().users.is_empty());
    /// server.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn permissions(&self) -> crate::auth::permissions::Record {
        self.handle.state.auth.recorder.snapshot()
    }

    /// Fault injection for this server.
    #[must_use]
    pub fn faults(&self) -> &FaultHandle {
        &self.faults
    }

    /// Direct access to objects and resource registration, without HTTP.
    #[must_use]
    pub fn handle(&self) -> &ServerHandle {
        &self.handle
    }

    /// A kubeconfig document (YAML) pointing at this server.
    #[must_use]
    pub fn kubeconfig(&self) -> String {
        kubeconfig_document(&self.url(), self.token.as_deref(), self.ca_pem.as_deref())
    }

    /// Writes [`kubeconfig`](Self::kubeconfig) to `path` (mode 0600 on Unix).
    ///
    /// # Errors
    /// [`ServerError::Kubeconfig`] when the file cannot be written.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), ServerError> {
        let path = path.as_ref();
        let err = |source| ServerError::Kubeconfig {
            path: path.display().to_string(),
            source,
        };
        std::fs::write(path, self.kubeconfig()).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        }
        Ok(())
    }

    /// Stops accepting requests, ends open watches and waits for the server task.
    ///
    /// # Cancel safety
    /// Cancelling the wait leaves the server stopping in the background.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A kubeconfig (YAML) for `server` with an optional bearer token.
#[must_use]
pub fn kubeconfig_yaml(server: &str, token: Option<&str>) -> String {
    kubeconfig_document(server, token, None)
}

/// A kubeconfig (YAML) for `server` with an optional bearer token and, for HTTPS, the CA
/// certificate (PEM) clients verify the server with (`certificate-authority-data`).
#[must_use]
pub fn kubeconfig_document(server: &str, token: Option<&str>, ca_pem: Option<&str>) -> String {
    use base64::Engine;
    let user = match token {
        Some(t) => format!("  user:\n    token: {t}\n"),
        None => "  user: {}\n".to_owned(),
    };
    let ca = ca_pem.map_or_else(String::new, |pem| {
        format!(
            "    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(pem)
        )
    });
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kcache\n  cluster:\n    server: {server}\n{ca}\
         contexts:\n- name: kcache\n  context:\n    cluster: kcache\n    user: kcache\n    \
         namespace: default\ncurrent-context: kcache\nusers:\n- name: kcache\n{user}"
    )
}
