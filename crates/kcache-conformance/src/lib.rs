//! Differential conformance between `kcache-apiserver` and the upstream kube-apiserver.
//!
//! [`Target`] sends raw HTTP requests through kube-client's transport (kubeconfig, TLS with
//! verification, bearer tokens) and returns status and body untouched; [`normalise`] strips
//! what legitimately differs between two servers (resourceVersions, uids, timestamps,
//! generated names) so that transcripts of the same scenario can be compared line by line.
//! The scenario itself is `tests/differential.rs`.
#![doc(test(attr(deny(warnings))))]

use std::path::Path;

use http_body_util::BodyExt;
use kube_client::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::Value;

/// One server under test.
pub struct Target {
    client: Client,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").finish_non_exhaustive()
    }
}

/// A raw response.
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// The body, parsed as JSON when it is JSON (watch streams: one value per line in
    /// [`Response::events`]).
    pub body: Value,
    /// Watch events, for watch requests.
    pub events: Vec<Value>,
}

impl Target {
    /// A target described by a kubeconfig file.
    ///
    /// # Errors
    /// When the kubeconfig cannot be read or the client cannot be built.
    pub async fn from_kubeconfig(path: &Path) -> anyhow::Result<Self> {
        let kubeconfig = Kubeconfig::read_from(path)?;
        let mut config =
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        // Raw answers: kube-client would otherwise retry 429/503/504 on its own.
        config.default_retry = false;
        Ok(Self {
            client: Client::try_from(config)?,
        })
    }

    /// Sends one request; any status is returned, only transport failures are errors.
    ///
    /// # Errors
    /// On a transport failure.
    pub async fn send(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Response> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path_and_query)
            .header("Accept", "application/json");
        let bytes = match body {
            Some(v) => {
                let ct = if method == "PATCH" {
                    "application/merge-patch+json"
                } else {
                    "application/json"
                };
                req = req.header("Content-Type", ct);
                serde_json::to_vec(&v)?
            }
            None => Vec::new(),
        };
        let resp = self.client.send(req.body(bytes.into())?).await?;
        let status = resp.status().as_u16();
        let raw = resp.into_body().collect().await?.to_bytes();
        let text = String::from_utf8_lossy(&raw);
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        let events = if body.is_null() {
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        } else if path_and_query.contains("watch=true") || path_and_query.contains("watch=1") {
            vec![body.clone()]
        } else {
            Vec::new()
        };
        Ok(Response {
            status,
            body,
            events,
        })
    }
}

/// Replaces every free-standing run of ASCII digits in `s` with `N` (resourceVersions and
/// counters in messages differ between servers); digits inside words (`k8s`) stay.
pub fn normalise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev: Option<char> = None;
    let mut in_number = false;
    for c in s.chars() {
        if c.is_ascii_digit() && (in_number || !prev.is_some_and(char::is_alphanumeric)) {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
        prev = Some(c);
    }
    out
}

/// `reason: message` of a `Status` body (normalised), or the object's kind for others.
pub fn describe(body: &Value) -> String {
    if body.get("kind").and_then(Value::as_str) == Some("Status") {
        let reason = body.get("reason").and_then(Value::as_str).unwrap_or("");
        let message = body.get("message").and_then(Value::as_str).unwrap_or("");
        format!("{reason}: {}", normalise(message))
    } else {
        body.get("kind")
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_owned()
    }
}

/// The names of a list's items, in order.
pub fn item_names(body: &Value) -> Vec<String> {
    body.get("items")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| {
                    i.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `TYPE name` per watch event (`BOOKMARK` with its annotations' keys).
pub fn event_lines(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let ty = e.get("type").and_then(Value::as_str).unwrap_or("?");
            let obj = e.get("object").cloned().unwrap_or(Value::Null);
            match ty {
                "BOOKMARK" => {
                    let mut keys: Vec<String> = obj
                        .pointer("/metadata/annotations")
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                                .collect()
                        })
                        .unwrap_or_default();
                    keys.sort();
                    format!("BOOKMARK {}", keys.join(","))
                }
                "ERROR" => format!("ERROR {}", describe(&obj)),
                _ => format!(
                    "{ty} {}",
                    obj.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn normalise_replaces_numbers_but_not_digits_in_words() {
        assert_eq!(
            super::normalise("too old resource version: 12 (345) k8s.io v1"),
            "too old resource version: N (N) k8s.io v1"
        );
    }
}
