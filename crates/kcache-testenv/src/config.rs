//! [`Config`]: what a [`TestEnv`](crate::TestEnv) starts with.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::Error;

/// The settings of a [`TestEnv`](crate::TestEnv): `Config::default()` and the setters below,
/// given to [`TestEnv::start`](crate::TestEnv::start) (a configuration starts nothing itself).
#[derive(Debug, Clone)]
#[must_use]
#[non_exhaustive]
pub struct Config {
    /// CustomResourceDefinitions to install (JSON objects).
    pub crds: Vec<Value>,
    /// Directories whose JSON/YAML manifests are created at start (CRDs and Namespaces first),
    /// as `kcache serve --manifests` does.
    pub manifest_dirs: Vec<PathBuf>,
    /// Namespaces to create at start (besides `default` and the `kube-*` ones).
    pub namespaces: Vec<String>,
    /// Run the garbage collector (default on); off, owned objects stay, as with envtest.
    pub garbage_collector: bool,
    /// Serve HTTPS with a generated CA and token (default off: plain HTTP on loopback).
    pub https: bool,
    /// How long to wait for each CRD to be Established (default 10 s).
    pub established_timeout: Duration,
    /// Authorize requests by RBAC (default on, as envtest's kube-apiserver). The environment's
    /// own clients are the admin (`system:masters`) and may do everything either way; users
    /// added with [`TestEnv::add_user`](crate::TestEnv::add_user) may do what Roles and bindings grant them. Off, every
    /// authenticated request is allowed.
    pub authorization: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            crds: Vec::new(),
            manifest_dirs: Vec::new(),
            namespaces: Vec::new(),
            garbage_collector: true,
            https: false,
            established_timeout: Duration::from_secs(10),
            authorization: true,
        }
    }
}

impl Config {
    /// Installs the CRD of a Rust type (`#[derive(CustomResource)]`).
    ///
    /// # Errors
    /// [`Error::Serialise`] when the generated CRD cannot be serialised (never for kube's).
    pub fn crd<K: kube_core::CustomResourceExt>(mut self) -> Result<Self, Error> {
        self.crds.push(serde_json::to_value(K::crd())?);
        Ok(self)
    }

    /// Installs a CRD given as JSON.
    pub fn crd_value(mut self, crd: Value) -> Self {
        self.crds.push(crd);
        self
    }

    /// Creates the objects of every manifest in `dir` at start.
    pub fn manifests(mut self, dir: impl Into<PathBuf>) -> Self {
        self.manifest_dirs.push(dir.into());
        self
    }

    /// Creates namespace `name` at start.
    pub fn namespace(mut self, name: impl Into<String>) -> Self {
        self.namespaces.push(name.into());
        self
    }

    /// Runs the garbage collector or not ([`Config::garbage_collector`]).
    pub fn garbage_collector(mut self, on: bool) -> Self {
        self.garbage_collector = on;
        self
    }

    /// Serves HTTPS ([`Config::https`]).
    pub fn https(mut self, on: bool) -> Self {
        self.https = on;
        self
    }

    /// Authorizes by RBAC or not ([`Config::authorization`]).
    pub fn authorization(mut self, on: bool) -> Self {
        self.authorization = on;
        self
    }
}
