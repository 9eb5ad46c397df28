//! [`TestEnv`]: the running environment.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kcache_apiserver::{ApiServer, RunningServer, ServerHandle};
use serde_json::{Value, json};

use crate::{Config, Error};

/// Numbers the users' kubeconfig files.
static USERS: AtomicUsize = AtomicUsize::new(0);

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// A running test environment: the embedded server, its clients and kubeconfig. Dropping it
/// stops the server (without waiting) and removes the kubeconfig; [`stop`](TestEnv::stop)
/// waits for the server to finish.
pub struct TestEnv {
    server: Option<RunningServer>,
    kube: kube_client::Client,
    client: kcache_client::Client,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("server", &self.server)
            .field("kubeconfig", &self.kubeconfig)
            .finish_non_exhaustive()
    }
}

impl TestEnv {
    /// Starts an environment with `config` (envtest's `Environment.Start`): starts the
    /// server on a free loopback port, creates the namespaces and manifests,
    /// installs the CRDs and waits until every CRD is Established, writes a kubeconfig and
    /// builds the clients.
    ///
    /// # Errors
    /// [`Error::Server`] when the server cannot start, [`Error::Manifests`] /
    /// [`Error::Create`] when an object is refused, [`Error::NotEstablished`] after
    /// [`Config::established_timeout`], [`Error::Kube`] / [`Error::Client`] /
    /// [`Error::Io`] when the clients or the kubeconfig cannot be made.
    ///
    /// # Panics
    /// Never; must be called inside a Tokio runtime.
    pub async fn start(config: Config) -> Result<Self, Error> {
        let server = ApiServer::builder()
            .garbage_collector(config.garbage_collector)
            .https(config.https)
            .authorization(config.authorization)
            .build()
            .start()
            .await?;
        let h = server.handle();
        for ns in &config.namespaces {
            h.create("/api/v1/namespaces", json!({"metadata": {"name": ns}}))
                .map_err(|e| Error::Create {
                    what: format!("Namespace {ns:?}"),
                    source: Box::new(e),
                })?;
        }
        for dir in &config.manifest_dirs {
            kcache_apiserver::manifests::load_dir(h, dir)?;
        }
        for crd in &config.crds {
            create_crd(h, crd.clone())?;
        }
        wait_established(h, config.established_timeout).await?;
        let dir = fresh_dir()?;
        let kubeconfig = dir.join("kubeconfig");
        server.write_kubeconfig(&kubeconfig)?;
        let kc = kube_client::config::Kubeconfig::from_yaml(&server.kubeconfig())
            .map_err(|e| Error::Kube(e.to_string()))?;
        let kube_config = kube_client::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| Error::Kube(e.to_string()))?;
        let client = kcache_client::Client::from_config(kube_config)?;
        // kcache's client already holds a kube-rs client with kube's default retries (the one
        // it writes with); building a third transport would double the start time.
        let kube = client.kube_for_writes().clone();
        Ok(Self {
            server: Some(server),
            kube,
            client,
            dir,
            kubeconfig,
        })
    }

    /// Installs one more CRD and waits until it is Established.
    ///
    /// # Errors
    /// [`Error::Create`] when it is refused, [`Error::NotEstablished`] after 10 s.
    pub async fn install_crd(&self, crd: Value) -> Result<(), Error> {
        create_crd(self.handle(), crd)?;
        wait_established(self.handle(), Duration::from_secs(10)).await
    }

    /// Installs the CRD of a Rust type (`#[derive(CustomResource)]`) and waits until it is
    /// Established.
    ///
    /// # Errors
    /// As [`install_crd`](Self::install_crd).
    pub async fn install<K: kube_core::CustomResourceExt>(&self) -> Result<(), Error> {
        self.install_crd(serde_json::to_value(K::crd())?).await
    }

    /// Registers `webhook`, served by `server`; it is effective at once.
    ///
    /// # Errors
    /// [`Error::Create`] when the configuration is refused (a name without three dotted
    /// segments, an unknown operation).
    pub fn install_webhook(
        &self,
        server: &crate::WebhookServer,
        webhook: &crate::Webhook,
    ) -> Result<(), Error> {
        let (kind, plural) = if webhook.is_mutating() {
            (
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
            )
        } else {
            (
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
            )
        };
        let name = webhook.name();
        let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name},
            "webhooks": [{"name": name, "clientConfig": server.client_config(webhook.path_str()),
                "rules": [{"operations": webhook.operation_list(), "apiGroups": ["*"],
                           "apiVersions": ["*"], "resources": webhook.resource_list()}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]});
        self.handle()
            .create(
                &format!("/apis/admissionregistration.k8s.io/v1/{plural}"),
                config,
            )
            .map(|_| ())
            .map_err(|e| Error::Create {
                what: format!("{kind} {name:?}"),
                source: Box::new(e),
            })
    }

    /// A kube-rs client for the server.
    #[must_use]
    pub fn kube_client(&self) -> kube_client::Client {
        self.kube.clone()
    }

    /// A kcache client (informers, controllers) for the server.
    #[must_use]
    pub fn client(&self) -> kcache_client::Client {
        self.client.clone()
    }

    /// The running server: its URL, fault injection, kubeconfig.
    #[must_use]
    pub fn server(&self) -> &RunningServer {
        self.server
            .as_ref()
            .unwrap_or_else(|| unreachable!("the server is only taken by stop, which consumes"))
    }

    /// Direct access to the server's objects, without HTTP.
    #[must_use]
    pub fn handle(&self) -> &ServerHandle {
        self.server().handle()
    }

    /// The server's base URL.
    #[must_use]
    pub fn url(&self) -> String {
        self.server().url()
    }

    /// The kubeconfig file written at start (removed when the environment is dropped), for
    /// `kubectl` or another process.
    #[must_use]
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// What each user did so far: every distinct request the server authorized or refused,
    /// per user name (see [`kcache_apiserver::auth::permissions`]: the least-privilege RBAC
    /// from it, and a check of RBAC manifests against it).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), kcache_testenv::Error> {
    /// let env = kcache_testenv::TestEnv::start(kcache_testenv::Config::default()).await?;
    /// let alice = env.add_user("alice", ["dev"]).await?;
    /// let pods: kube_client::Api<k8s_openapi::api::core::v1::Pod> =
    ///     kube_client::Api::default_namespaced(alice.kube_client());
    /// assert!(pods.list(&Default::default()).await.is_err());
    /// let record = env.permissions();
    /// let access = &record.user("alice").expect("alice's record").accesses[0];
    /// assert_eq!((access.verb.as_str(), access.resource.as_str()), ("list", "pods"));
    /// assert!(access.denied && !access.allowed);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn permissions(&self) -> kcache_apiserver::auth::permissions::Record {
        self.server().permissions()
    }

    /// Adds a user `name` in `groups` (and `system:authenticated`), as envtest's `AddUser`:
    /// a bearer token the server accepts, a kubeconfig written next to the environment's, and
    /// a kube client. What the user may do is what the server's Roles and bindings grant it
    /// (create them with [`kube_client`](Self::kube_client), the admin).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), kcache_testenv::Error> {
    /// let env = kcache_testenv::TestEnv::start(kcache_testenv::Config::default()).await?;
    /// let alice = env.add_user("alice", ["dev"]).await?;
    /// let pods: kube_client::Api<k8s_openapi::api::core::v1::Pod> =
    ///     kube_client::Api::default_namespaced(alice.kube_client());
    /// let err = pods.list(&Default::default()).await.unwrap_err();
    /// assert!(err.to_string().contains("forbidden"), "{err}");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::Io`] when the kubeconfig cannot be written, [`Error::Kube`] when the client
    /// cannot be built.
    pub async fn add_user<I, S>(&self, name: &str, groups: I) -> Result<crate::User, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let added = self.server().add_user(name, groups);
        let n = USERS.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("user-{n}.kubeconfig"));
        std::fs::write(&path, &added.kubeconfig)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        }
        let kc = kube_client::config::Kubeconfig::from_yaml(&added.kubeconfig)
            .map_err(|e| Error::Kube(e.to_string()))?;
        let config = kube_client::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| Error::Kube(e.to_string()))?;
        let kube = kube_client::Client::try_from(config).map_err(|e| Error::Kube(e.to_string()))?;
        Ok(crate::User {
            info: added.user,
            kubeconfig: path,
            kube,
        })
    }

    /// Stops the server and waits for it; removes the kubeconfig.
    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Creates a CRD (an existing one with the same name is replaced).
fn create_crd(h: &ServerHandle, crd: Value) -> Result<(), Error> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match h.create(CRDS, crd.clone()) {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 => {
            let mut next = crd;
            let current = h.get(&format!("{CRDS}/{name}")).ok();
            next["metadata"]["resourceVersion"] =
                current.map_or(Value::Null, |c| c["metadata"]["resourceVersion"].clone());
            h.update(&format!("{CRDS}/{name}"), next)
                .map(|_| ())
                .map_err(|e| crd_error(&name, e))
        }
        Err(e) => Err(crd_error(&name, e)),
    }
}

fn crd_error(name: &str, e: kcache_apiserver::ApiError) -> Error {
    Error::Create {
        what: format!("CustomResourceDefinition {name:?}"),
        source: Box::new(e),
    }
}

/// Waits until every CRD of the server has the condition `Established: True`.
async fn wait_established(h: &ServerHandle, timeout: Duration) -> Result<(), Error> {
    let start = Instant::now();
    loop {
        let (crds, _) = h.list(CRDS).unwrap_or_default();
        let pending = crds.iter().find(|c| {
            !c.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|conds| {
                    conds
                        .iter()
                        .any(|c| c["type"] == "Established" && c["status"] == "True")
                })
        });
        let Some(p) = pending else {
            return Ok(());
        };
        if start.elapsed() > timeout {
            let name = p["metadata"]["name"].as_str().unwrap_or("").to_owned();
            return Err(Error::NotEstablished(name, timeout));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A new private directory under the system temp dir.
fn fresh_dir() -> std::io::Result<PathBuf> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "kcache-testenv-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
