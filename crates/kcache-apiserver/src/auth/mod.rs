//! Who may do what: authentication (the admin token, a static token table, service account
//! tokens, client certificates, anonymous requests), impersonation, and authorization by RBAC
//! over the server's own Roles, ClusterRoles and bindings, as kube-apiserver v1.36.5 enforces
//! them (`--authorization-mode=RBAC`, anonymous auth on).
//!
//! The pieces: `authn` turns a request's credentials into a [`UserInfo`]; `impersonate`
//! applies `Impersonate-*` headers; `attrs` reads the request's attributes from its path (as
//! kube-apiserver's RequestInfoFactory) and words the 403; `rbac` decides; `escalation`
//! refuses writes of roles and bindings that grant more than the writer holds; `aggregate`
//! keeps aggregated ClusterRoles' rules up to date; `bootstrap` seeds the roles and bindings
//! kube-apiserver creates at start; `review` answers the access and identity reviews;
//! [`permissions`] records what each user did and writes the least-privilege RBAC from it
//! (beyond kube-apiserver).

pub(crate) mod aggregate;
pub(crate) mod attrs;
pub(crate) mod bootstrap;
pub(crate) mod escalation;
pub(crate) mod impersonate;
pub mod permissions;
pub(crate) mod rbac;
pub(crate) mod review;

use std::collections::{BTreeMap, HashMap};

use parking_lot::RwLock;

use crate::store::Store;

/// The group whose members may do everything (kube-apiserver's privileged group).
pub(crate) const MASTERS: &str = "system:masters";
/// The group every authenticated user is in.
pub(crate) const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub(crate) const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of anonymous requests.
pub(crate) const ANONYMOUS: &str = "system:anonymous";

/// The identity every request of this server acts as (it has no authorization): the
/// `admin` of kube-apiserver's test harness, in `system:masters`.
pub(crate) const ADMIN_USER: &str = "admin";
/// The admin identity's uid.
pub(crate) const ADMIN_UID: &str = "admin-uid";
/// The admin identity's groups.
pub(crate) const ADMIN_GROUPS: [&str; 2] = ["system:masters", "system:authenticated"];

/// Who a request acts as, after authentication and impersonation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user name (`system:serviceaccount:<ns>:<name>` for a service account).
    pub name: String,
    /// The uid (may be empty).
    pub uid: String,
    /// The groups, `system:authenticated` included for an authenticated user.
    pub groups: Vec<String>,
    /// Extra attributes (from impersonation headers).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with `name` and `groups` (no uid, no extra).
    ///
    /// ```
    /// let u = kcache_apiserver::auth::UserInfo::new("alice", ["dev"]);
    /// assert_eq!(u.groups, vec!["dev".to_owned()]);
    /// ```
    #[must_use]
    pub fn new<I, S>(name: impl Into<String>, groups: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            name: name.into(),
            uid: String::new(),
            groups: groups.into_iter().map(Into::into).collect(),
            extra: BTreeMap::new(),
        }
    }

    /// Whether the user is in `group`.
    #[must_use]
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The admin of this server: `admin`, in `system:masters` (as kube-up.sh's token table).
    pub(crate) fn admin() -> Self {
        Self {
            name: ADMIN_USER.to_owned(),
            uid: ADMIN_UID.to_owned(),
            groups: ADMIN_GROUPS.iter().map(|g| (*g).to_owned()).collect(),
            extra: BTreeMap::new(),
        }
    }

    /// The anonymous user.
    pub(crate) fn anonymous() -> Self {
        Self::new(ANONYMOUS, [UNAUTHENTICATED])
    }

    /// `system:authenticated` added when missing (kube-apiserver's group adder).
    pub(crate) fn with_authenticated(mut self) -> Self {
        if !self.in_group(AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.to_owned());
        }
        self
    }

    /// The user as kube-apiserver's `UserInfo` JSON (reviews, admission).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = serde_json::json!(self.uid);
        }
        if !self.extra.is_empty() {
            v["extra"] = serde_json::json!(self.extra);
        }
        v
    }
}

/// One line of a static token table (kube-apiserver's `--token-auth-file`:
/// `token,user,uid,"group1,group2"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticToken {
    /// The bearer token.
    pub token: String,
    /// Who presenting it authenticates as (`system:authenticated` is added).
    pub user: UserInfo,
}

impl StaticToken {
    /// A token for `user`.
    #[must_use]
    pub fn new(token: impl Into<String>, user: UserInfo) -> Self {
        Self {
            token: token.into(),
            user,
        }
    }
}

/// A user added to a running server ([`RunningServer::add_user`](crate::RunningServer::add_user)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AddedUser {
    /// Who it is (its groups include `system:authenticated`).
    pub user: UserInfo,
    /// Its bearer token.
    pub token: String,
    /// A kubeconfig (YAML) for the server with that token.
    pub kubeconfig: String,
}

/// The authentication state of a running server: the token table, grown by
/// [`RunningServer::add_user`](crate::RunningServer::add_user).
#[derive(Debug, Default)]
pub(crate) struct AuthState {
    pub(crate) tokens: RwLock<HashMap<String, UserInfo>>,
    /// Per requestor, the impersonation mode that last succeeded (tried first next time).
    pub(crate) impersonation_modes: parking_lot::Mutex<HashMap<String, usize>>,
    pub(crate) rbac: rbac::Cache,
    /// What each user did.
    pub(crate) recorder: permissions::Recorder,
}

impl AuthState {
    /// The state for a static token table (`ServerConfig::users`).
    pub(crate) fn new(users: &[StaticToken]) -> Self {
        let state = Self::default();
        {
            let mut t = state.tokens.write();
            for s in users {
                t.insert(s.token.clone(), s.user.clone());
            }
        }
        state
    }
}

/// What authorization reads of a running server: the store that holds its Roles, ClusterRoles
/// and bindings, its [`AuthState`], and whether RBAC is on
/// ([`ServerConfig::authorization`](crate::ServerConfig::authorization)). The registry's state
/// lends it out, so that this module needs nothing above the store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Authz<'a> {
    pub(crate) store: &'a Store,
    pub(crate) auth: &'a AuthState,
    pub(crate) enabled: bool,
}

/// A fresh random token (64 hex digits).
pub(crate) fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
