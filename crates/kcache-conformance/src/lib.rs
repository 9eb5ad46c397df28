//! Differential conformance between `kcache-apiserver` and the upstream kube-apiserver.
//!
//! [`Target`] sends raw HTTP requests through kube-client's transport (kubeconfig, TLS with
//! verification, bearer tokens) and returns status and body untouched; [`normalise`] strips
//! what legitimately differs between two servers (resourceVersions, uids, timestamps,
//! generated names) so that transcripts of the same scenario can be compared line by line.
//! The scenario itself is `tests/differential.rs`.
#![doc(test(attr(deny(warnings))))]

pub mod skew;

use std::path::{Path, PathBuf};

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
    /// The `Warning` headers' texts (`299 - "text"` gives `text`), in order.
    pub warnings: Vec<String>,
    /// The `Content-Type` header, when sent.
    pub content_type: Option<String>,
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

    /// Sends one request; any status is returned, only transport failures are errors. A
    /// body is sent as `application/json`, or as `application/merge-patch+json` for `PATCH`.
    ///
    /// # Errors
    /// On a transport failure.
    pub async fn send(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Response> {
        let (content_type, bytes) = match body {
            Some(v) => {
                let ct = if method == "PATCH" {
                    "application/merge-patch+json"
                } else {
                    "application/json"
                };
                (Some(ct), Some(serde_json::to_vec(&v)?))
            }
            None => (None, None),
        };
        self.send_raw(method, path_and_query, content_type, bytes)
            .await
    }

    /// Sends one request with a body of the given content type (`None`: no body).
    ///
    /// # Errors
    /// On a transport failure.
    pub async fn send_raw(
        &self,
        method: &str,
        path_and_query: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<Response> {
        self.send_with_headers(method, path_and_query, &[], content_type, body)
            .await
    }

    /// Sends one request with extra headers (e.g. `Impersonate-User`) and a body of the given
    /// content type (`None`: no body).
    ///
    /// # Errors
    /// On a transport failure.
    pub async fn send_with_headers(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<Response> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path_and_query)
            .header("Accept", "application/json");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(ct) = content_type {
            req = req.header("Content-Type", ct);
        }
        let resp = self
            .client
            .send(req.body(body.unwrap_or_default().into())?)
            .await?;
        let status = resp.status().as_u16();
        let warnings = resp
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(warning_text)
            .collect();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
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
            warnings,
            content_type,
        })
    }
}

impl Target {
    /// Sends a request without a body, accepting `accept`; returns the status and the raw
    /// body (for protobuf answers).
    ///
    /// # Errors
    /// On a transport failure.
    pub async fn send_raw_accept(
        &self,
        method: &str,
        path_and_query: &str,
        accept: &str,
    ) -> anyhow::Result<(u16, Vec<u8>)> {
        let req = http::Request::builder()
            .method(method)
            .uri(path_and_query)
            .header("Accept", accept)
            .body(Vec::new().into())?;
        let resp = self.client.send(req).await?;
        let status = resp.status().as_u16();
        let raw = resp.into_body().collect().await?.to_bytes();
        Ok((status, raw.to_vec()))
    }
}

/// The text of a `Warning` header value: `299 - "text"` gives `text` (escaped quotes
/// unescaped); anything else is returned whole.
pub fn warning_text(value: &str) -> String {
    value
        .strip_prefix("299 - \"")
        .and_then(|rest| rest.strip_suffix('"'))
        .map_or_else(|| value.to_owned(), |t| t.replace("\\\"", "\""))
}

/// The upstream server's kubeconfig (`KCACHE_UPSTREAM_KUBECONFIG`, exported by
/// `scripts/test.sh`); `None` (skipped, said on stderr past the output capture) only under
/// `KCACHE_UPSTREAM=skip`.
///
/// # Panics
/// When the variable is not set (a missing server is a failure, never a silent skip) or
/// `KCACHE_UPSTREAM` has another value.
pub fn upstream_kubeconfig(what: &str) -> Option<PathBuf> {
    match std::env::var("KCACHE_UPSTREAM") {
        Ok(v) if v == "skip" => {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {what} (upstream-only), because KCACHE_UPSTREAM=skip"
            );
            return None;
        }
        Ok(v) if !v.is_empty() => panic!("KCACHE_UPSTREAM={v:?}: the only value is `skip`"),
        _ => {}
    }
    let path = std::env::var_os("KCACHE_UPSTREAM_KUBECONFIG").expect(
        "KCACHE_UPSTREAM_KUBECONFIG is not set: start the upstream kube-apiserver with scripts/kube-up.sh \
         (scripts/test.sh does) — this test never skips silently (KCACHE_UPSTREAM=skip skips it)",
    );
    Some(PathBuf::from(path))
}

/// Replaces every UUID in `s` with `UID`, then every free-standing run of ASCII digits with
/// `N` (uids, resourceVersions and counters in messages differ between servers); digits
/// inside words (`k8s`) stay.
pub fn normalise(s: &str) -> String {
    let s = &mask_uuids(s);
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

fn mask_uuids(s: &str) -> String {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let is_uuid = |b: &[u8]| {
        let mut i = 0;
        for (g, len) in GROUPS.iter().enumerate() {
            if g > 0 {
                if b.get(i) != Some(&b'-') {
                    return false;
                }
                i += 1;
            }
            for _ in 0..*len {
                if !b
                    .get(i)
                    .is_some_and(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
                {
                    return false;
                }
                i += 1;
            }
        }
        true
    };
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        if s.is_char_boundary(i) && is_uuid(&bytes[i..]) {
            out.push_str("UID");
            i += 36;
        } else {
            let c = s[i..].chars().next().unwrap_or_default();
            out.push(c);
            i += c.len_utf8().max(1);
        }
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
    fn uuids_are_masked() {
        assert_eq!(
            super::normalise("uid (0f6ad3e1-5c4b-4a5e-9ab3-ca93da4b7c3f) rv 12"),
            "uid (UID) rv N"
        );
    }

    #[test]
    fn warning_text_unwraps_the_agent_and_quotes() {
        assert_eq!(
            super::warning_text(r#"299 - "unknown field \"spec.x\"""#),
            r#"unknown field "spec.x""#
        );
        assert_eq!(super::warning_text("odd"), "odd");
    }

    #[test]
    fn normalise_replaces_numbers_but_not_digits_in_words() {
        assert_eq!(
            super::normalise("too old resource version: 12 (345) k8s.io v1"),
            "too old resource version: N (N) k8s.io v1"
        );
    }
}
