//! [`User`]: a user added to a [`TestEnv`](crate::TestEnv), with its own credentials.

use std::path::{Path, PathBuf};

/// A user of the environment ([`TestEnv::add_user`](crate::TestEnv::add_user)): who it is, a
/// kubeconfig with its bearer token, and a kube client acting as it.
#[derive(Clone)]
pub struct User {
    pub(crate) info: kcache_apiserver::auth::UserInfo,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) kube: kube_client::Client,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.info.name)
            .field("groups", &self.info.groups)
            .finish_non_exhaustive()
    }
}

impl User {
    /// The user name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The groups (`system:authenticated` included).
    #[must_use]
    pub fn groups(&self) -> &[String] {
        &self.info.groups
    }

    /// A kubeconfig file for this user (removed with the environment), for `kubectl` or
    /// another process.
    #[must_use]
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kube-rs client acting as this user.
    #[must_use]
    pub fn kube_client(&self) -> kube_client::Client {
        self.kube.clone()
    }
}
