//! `kcache watch` failures: one sentence each, and an exit code per class.

use kcache::lister_watcher::Error as LwError;

/// Exit codes of `kcache` (documented in `--help` and the README).
pub(crate) mod exit {
    /// Any other failure.
    pub(crate) const FAILURE: u8 = 1;
    /// Bad command line (clap's own code).
    pub(crate) const USAGE: u8 = 2;
    /// No usable kubeconfig (missing file, no current context, unknown `--context`).
    pub(crate) const CONFIG: u8 = 3;
    /// The API server cannot be reached.
    pub(crate) const UNREACHABLE: u8 = 4;
    /// The API server rejected the credentials (401).
    pub(crate) const UNAUTHORIZED: u8 = 5;
    /// The user may not list or watch the resource (403).
    pub(crate) const FORBIDDEN: u8 = 6;
    /// The API server does not serve the resource.
    pub(crate) const UNKNOWN_RESOURCE: u8 = 7;
    /// `kcache demo` found the cache or a handler out of sync with the server.
    pub(crate) const DIVERGED: u8 = 8;
    /// The API server answered something unusable: not JSON, a redirect, an unexpected HTTP
    /// status, a malformed HTTP response.
    pub(crate) const UNUSABLE_ANSWER: u8 = 9;
}

/// Why `kcache watch` stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    /// No usable kubeconfig.
    #[error("{0}")]
    Config(String),
    /// The server cannot be reached.
    #[error("{0}")]
    Unreachable(String),
    /// 401.
    #[error("{0}")]
    Unauthorized(String),
    /// 403.
    #[error("{0}")]
    Forbidden(String),
    /// Discovery found no such resource.
    #[error("the server doesn't have a resource type \"{0}\"")]
    UnknownResource(String),
    /// The server answered something unusable (not JSON, a redirect, an unexpected status).
    #[error("{0}")]
    UnusableAnswer(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl WatchError {
    /// The process exit code for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            WatchError::Config(_) => exit::CONFIG,
            WatchError::Unreachable(_) => exit::UNREACHABLE,
            WatchError::Unauthorized(_) => exit::UNAUTHORIZED,
            WatchError::Forbidden(_) => exit::FORBIDDEN,
            WatchError::UnknownResource(_) => exit::UNKNOWN_RESOURCE,
            WatchError::UnusableAnswer(_) => exit::UNUSABLE_ANSWER,
            WatchError::Other(_) => exit::FAILURE,
        }
    }

    /// Classifies an HTTP status answered by `server`.
    pub(crate) fn from_status(code: u16, message: &str, server: &str) -> Self {
        let message = message.trim().trim_end_matches('.');
        match code {
            401 => WatchError::Unauthorized(format!(
                "the API server at {server} rejected the credentials (401 Unauthorized); check the token or client certificate of the kubeconfig user"
            )),
            403 => WatchError::Forbidden(format!(
                "the API server at {server} refused access (403 Forbidden): {message}"
            )),
            _ => WatchError::Other(format!(
                "the API server at {server} answered {code}: {message}"
            )),
        }
    }

    /// Classifies a failed discovery request: 401 and 403 as such, any other HTTP status, a
    /// redirect, a body that is not JSON and a malformed response as an unusable answer, the
    /// rest as an unreachable server. The messages are kcache-client's, which never quote
    /// credentials, headers or raw body bytes.
    pub(crate) fn from_discovery(e: &kcache_client::Error, server: &str) -> Self {
        let kcache_client::Error::Request(lw) = e else {
            return WatchError::Other(e.to_string());
        };
        if let Some(code) = lw.code() {
            let message = lw.status().map(|s| s.message.as_str()).unwrap_or_default();
            return match code {
                401 | 403 => Self::from_status(code, message, server),
                300..=399 => WatchError::UnusableAnswer(format!(
                    "the API server at {server} {}",
                    message.trim_end_matches('.')
                )),
                _ => WatchError::UnusableAnswer(format!(
                    "the API server at {server} answered discovery with HTTP status {code}: {}",
                    message.trim().trim_end_matches('.')
                )),
            };
        }
        // The sentence kcache-client worded, without the "transport error: " of its class.
        let sentence =
            std::error::Error::source(lw).map_or_else(|| lw.to_string(), |s| s.to_string());
        if e.is_unusable_answer() {
            WatchError::UnusableAnswer(sentence)
        } else if e.is_credentials_unavailable() {
            WatchError::Unauthorized(sentence)
        } else {
            // "cannot connect to the API server at URL: connection refused; …", "TLS
            // handshake with URL failed (…)", "… did not answer in time".
            WatchError::Unreachable(sentence)
        }
    }

    /// Classifies a list/watch error the informer reported, if it is one that retrying cannot
    /// fix: `None` for errors the reflector recovers from by itself.
    pub(crate) fn fatal_from_lister_watcher(
        e: &LwError,
        server: &str,
        resource: &str,
    ) -> Option<Self> {
        match e.code() {
            Some(401 | 403) => {
                let status = e.status().map(|s| s.message.clone()).unwrap_or_default();
                Some(Self::from_status(e.code().unwrap_or(0), &status, server))
            }
            Some(404) => Some(WatchError::UnknownResource(resource.to_owned())),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_class_has_its_own_exit_code() {
        let codes = [
            WatchError::Config(String::new()).exit_code(),
            WatchError::Unreachable(String::new()).exit_code(),
            WatchError::Unauthorized(String::new()).exit_code(),
            WatchError::Forbidden(String::new()).exit_code(),
            WatchError::UnknownResource(String::new()).exit_code(),
            WatchError::UnusableAnswer(String::new()).exit_code(),
            WatchError::Other(String::new()).exit_code(),
        ];
        let mut unique = codes.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), codes.len(), "{codes:?}");
        assert!(!codes.contains(&0) && !codes.contains(&exit::USAGE));
    }

    #[test]
    fn status_codes_map_to_unauthorized_and_forbidden() {
        assert!(matches!(
            WatchError::from_status(401, "Unauthorized", "u"),
            WatchError::Unauthorized(_)
        ));
        let e = WatchError::from_status(
            403,
            "pods is forbidden: User \"x\" cannot list",
            "https://h",
        );
        assert_eq!(e.exit_code(), exit::FORBIDDEN);
        assert!(e.to_string().contains("cannot list"), "{e}");
    }
}
