//! Errors of this crate outside the list/watch contract: configuration, discovery, leases.
//!
//! Every message is one sentence a user can act on. Credentials never appear in a message:
//! messages from kube-client's auth and kubeconfig layers are rewritten (quoted text, which can
//! carry a token or a key, is elided) and their sources are not chained.

pub(crate) mod body;
pub(crate) mod transport;

use std::path::PathBuf;

use kube_client::config::KubeconfigError;

/// A configuration, discovery or request failure of the [`Client`](crate::Client), the
/// [`LeaseClient`](crate::LeaseClient) or the dynamic helpers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No kubeconfig was found and the process does not run inside a cluster.
    #[error(
        "no Kubernetes configuration found: set KUBECONFIG or create ~/.kube/config \
         (or run inside a cluster with a service account)"
    )]
    NoConfig,
    /// The kubeconfig file could not be read.
    #[error("cannot read kubeconfig {path}: {cause}")]
    UnreadableKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why (an I/O error, without file contents).
        cause: String,
    },
    /// The kubeconfig exists but is unusable.
    #[error("invalid kubeconfig: {0}; fix the file or point KUBECONFIG at a valid one")]
    InvalidKubeconfig(String),
    /// The HTTP client could not be built from the configuration (TLS settings, proxy, …).
    #[error("cannot build a Kubernetes client from the configuration: {0}")]
    Client(String),
    /// The request failed: transport or API error, already worded for the user.
    #[error(transparent)]
    Request(#[from] kcache::lister_watcher::Error),
    /// The resource is not served by the API server (discovery found no such kind).
    #[error(
        "the API server does not serve {0}: check the group, version and kind \
         (is the CRD installed?)"
    )]
    UnknownResource(String),
    /// A namespace was given for a cluster-scoped resource, or none where one is required.
    #[error("{0}")]
    Scope(String),
    /// A response body could not be decoded.
    #[error("cannot decode the API server's response: {0}")]
    Decode(#[source] serde_json::Error),
    /// A request body could not be encoded.
    #[error("cannot encode the request: {0}")]
    Encode(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Words a kubeconfig failure without leaking file contents.
    pub(crate) fn from_kubeconfig(e: &KubeconfigError) -> Self {
        match e {
            KubeconfigError::FindPath => Error::NoConfig,
            KubeconfigError::ReadConfig(io, path) => {
                let cause = if io.kind() == std::io::ErrorKind::NotFound {
                    "the file does not exist (set KUBECONFIG to an existing kubeconfig)".to_owned()
                } else {
                    io.to_string()
                };
                Error::UnreadableKubeconfig {
                    path: path.clone(),
                    cause,
                }
            }
            KubeconfigError::CurrentContextNotSet => Error::InvalidKubeconfig(
                "it has no current-context (run `kubectl config use-context NAME`)".to_owned(),
            ),
            other => Error::InvalidKubeconfig(redact_quoted(&other.to_string())),
        }
    }

    /// The HTTP status code, for an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Request(e) => e.code(),
            _ => None,
        }
    }

    /// Whether the API server answered, but with something that cannot be used: a body that
    /// is not the expected JSON (or not text at all), a redirect (never followed), a malformed
    /// HTTP response, a watch event outside the protocol. `false` for a server that cannot be
    /// reached and for an error status (see [`Error::code`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let client = kcache_client::Client::from_url("http://127.0.0.1:1").unwrap();
    /// let err = client.get_json::<serde_json::Value>("/api").await.unwrap_err();
    /// assert!(!err.is_unusable_answer(), "nothing listens there: {err}");
    /// # }
    /// ```
    pub fn is_unusable_answer(&self) -> bool {
        match self {
            Error::Request(e) => transport::is_unusable_answer(e),
            Error::Decode(_) => true,
            _ => false,
        }
    }

    /// Whether the request was not sent because the credentials of the kubeconfig user could
    /// not be obtained (an exec plugin failed, a token file is missing, …).
    pub fn is_credentials_unavailable(&self) -> bool {
        match self {
            Error::Request(e) => transport::is_credentials_unavailable(e),
            _ => false,
        }
    }
}

/// Replaces the contents of quoted spans (`"…"`, `'…'`, `` `…` ``) with `…`: parser and
/// credential-plugin messages quote the offending value, which may be a token or a key.
pub(crate) fn redact_quoted(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut open: Option<char> = None;
    for c in msg.chars() {
        match open {
            Some(q) if c == q => {
                out.push('…');
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None if matches!(c, '"' | '\'' | '`') => {
                out.push(c);
                open = Some(c);
            }
            None => out.push(c),
        }
    }
    if open.is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_quoted_hides_quoted_values() {
        assert_eq!(
            redact_quoted(r#"invalid type: string "s3cr3t-token", expected a map at line 3"#),
            r#"invalid type: string "…", expected a map at line 3"#
        );
        assert_eq!(redact_quoted("unterminated 'abc"), "unterminated '…");
        assert_eq!(redact_quoted("no quotes"), "no quotes");
    }

    #[test]
    fn missing_kubeconfig_file_names_the_path_and_the_fix() {
        let e = Error::from_kubeconfig(&KubeconfigError::ReadConfig(
            std::io::Error::from(std::io::ErrorKind::NotFound),
            PathBuf::from("/nope/config"),
        ));
        let msg = e.to_string();
        assert!(msg.contains("/nope/config"), "{msg}");
        assert!(msg.contains("KUBECONFIG"), "{msg}");
    }
}
