//! Which wire format the server really answered in.
//!
//! The peer's client (kcache-client's own stack) is given an observer that looks at every
//! successful response's `Content-Type` (as soon as the headers arrive, before the body is read) and
//! counts it as protobuf, JSON or other. The peer's line then states the format from these
//! counts, not from what it asked for.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::Context as _;
use kube_client::{
    Config,
    config::{KubeConfigOptions, Kubeconfig},
};

/// The protobuf media type of kube-apiserver (`;stream=watch` for watches).
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// The JSON media type (with parameters such as `;as=PartialObjectMetadataList` for metadata).
const JSON: &str = "application/json";

/// Successful responses, by the base media type of their `Content-Type`.
#[derive(Debug, Default)]
pub(crate) struct WireCounts {
    protobuf: AtomicU64,
    json: AtomicU64,
    other: AtomicU64,
}

/// A snapshot of [`WireCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Responses in `application/vnd.kubernetes.protobuf`.
    pub protobuf: u64,
    /// Responses in `application/json`.
    pub json: u64,
    /// Responses with any other or no `Content-Type`.
    pub other: u64,
}

impl Counts {
    /// Whether every response was protobuf (and there was at least one).
    pub(crate) fn all_protobuf(self) -> bool {
        self.protobuf > 0 && self.json == 0 && self.other == 0
    }
}

impl WireCounts {
    /// Counts one response with this `Content-Type` header value (`None`: absent).
    pub(crate) fn record(&self, content_type: Option<&str>) {
        let base = content_type
            .and_then(|v| v.split(';').next())
            .map(|b| b.trim().to_ascii_lowercase());
        let counter = match base.as_deref() {
            Some(PROTOBUF) => &self.protobuf,
            Some(JSON) => &self.json,
            _ => &self.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub(crate) fn get(&self) -> Counts {
        Counts {
            protobuf: self.protobuf.load(Ordering::Relaxed),
            json: self.json.load(Ordering::Relaxed),
            other: self.other.load(Ordering::Relaxed),
        }
    }
}

/// A kcache-client [`Client`](kcache_client::Client) for the kubeconfig at `path` whose
/// successful responses are counted in `counts`: `Client::from_kubeconfig`'s stack (HTTP/2
/// over TLS, kube-client's retry layer off for reads: the reflector owns retries), built
/// through [`Client::from_config_observed`](kcache_client::Client::from_config_observed).
///
/// # Errors
/// An unreadable or invalid kubeconfig, or TLS settings that cannot be used.
pub(crate) async fn counting_client(
    path: &Path,
    counts: Arc<WireCounts>,
) -> anyhow::Result<kcache_client::Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading the kubeconfig {}", path.display()))?;
    let observer = Arc::new(move |status: http::StatusCode, headers: &http::HeaderMap| {
        if status.is_success() {
            let content_type = headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            counts.record(content_type);
        }
    });
    kcache_client::Client::from_config_observed(config, observer)
        .context("building the HTTP client")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_counted_by_base_media_type() {
        let c = WireCounts::default();
        c.record(Some("application/vnd.kubernetes.protobuf"));
        c.record(Some("application/vnd.kubernetes.protobuf;stream=watch"));
        c.record(Some("application/json"));
        c.record(Some(
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        ));
        c.record(Some("text/plain"));
        c.record(None);
        let counts = c.get();
        assert_eq!(
            counts,
            Counts {
                protobuf: 2,
                json: 2,
                other: 2
            }
        );
        assert!(!counts.all_protobuf());
    }

    #[test]
    fn only_protobuf_responses_make_a_protobuf_run() {
        let c = WireCounts::default();
        assert!(
            !c.get().all_protobuf(),
            "no response at all is not protobuf"
        );
        c.record(Some("Application/Vnd.Kubernetes.Protobuf ; stream=watch"));
        assert!(c.get().all_protobuf());
        c.record(Some("application/json"));
        assert!(!c.get().all_protobuf());
    }
}
