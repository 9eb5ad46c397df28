//! A tiny HTTP/1.1 client for the tests: one connection per request, like the fixture
//! recorder, with streaming access to watch bodies.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::net::SocketAddr;
use std::path::PathBuf;

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

/// The fixtures recorded from kube-apiserver v1.36, in the repository's
/// `testdata/kube-apiserver-v1.36/`. Missing, they fail the test (never a skip).
pub(crate) fn fixtures_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/kube-apiserver-v1.36"
    ));
    assert!(
        dir.join("README.md").is_file(),
        "the recorded kube-apiserver fixtures are missing: expected them in {} \
         (testdata/kube-apiserver-v1.36/ at the repository root)",
        dir.display()
    );
    dir
}

/// A complete response.
#[derive(Debug)]
pub(crate) struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    /// The body as JSON (Null when it is not JSON).
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> anyhow::Result<hyper::Response<Incoming>> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    if !has("user-agent") {
        req = req.header("user-agent", "kcache-tests/1.0");
    }
    if !has("accept") {
        req = req.header("accept", "application/json");
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    Ok(sender.send_request(req).await?)
}

/// Sends a request and reads the whole response.
pub(crate) async fn request(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> anyhow::Result<Resp> {
    let resp = send(addr, method, path, headers, body).await?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok(Resp {
        status,
        headers,
        body,
    })
}

pub(crate) async fn get(addr: SocketAddr, path: &str) -> Resp {
    request(addr, Method::GET, path, &[], None)
        .await
        .expect("GET")
}

pub(crate) async fn post(addr: SocketAddr, path: &str, body: &Value) -> Resp {
    request(
        addr,
        Method::POST,
        path,
        &[("content-type", "application/json")],
        Some(serde_json::to_vec(body).unwrap()),
    )
    .await
    .expect("POST")
}

pub(crate) async fn put(addr: SocketAddr, path: &str, body: &Value) -> Resp {
    request(
        addr,
        Method::PUT,
        path,
        &[("content-type", "application/json")],
        Some(serde_json::to_vec(body).unwrap()),
    )
    .await
    .expect("PUT")
}

pub(crate) async fn patch(addr: SocketAddr, path: &str, content_type: &str, body: &Value) -> Resp {
    request(
        addr,
        Method::PATCH,
        path,
        &[("content-type", content_type)],
        Some(serde_json::to_vec(body).unwrap()),
    )
    .await
    .expect("PATCH")
}

pub(crate) async fn delete(addr: SocketAddr, path: &str) -> Resp {
    request(addr, Method::DELETE, path, &[], None)
        .await
        .expect("DELETE")
}

/// An open watch: status, headers and a line reader over the chunked body.
pub(crate) struct Watch {
    pub status: u16,
    pub headers: HeaderMap,
    body: Incoming,
    buf: Vec<u8>,
    /// Set when the body ended with an error (aborted connection).
    pub aborted: bool,
    /// Bytes left over when the stream ended mid-line.
    pub partial: Vec<u8>,
}

impl Watch {
    /// Opens a watch (or any streaming GET).
    pub(crate) async fn open(
        addr: SocketAddr,
        path: &str,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let resp = send(addr, Method::GET, path, headers, None).await?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        Ok(Self {
            status,
            headers,
            body: resp.into_body(),
            buf: Vec::new(),
            aborted: false,
            partial: Vec::new(),
        })
    }

    /// The next event, or None at the end of the stream.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Some(serde_json::from_slice(&line).expect("watch line is JSON"));
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(_)) => {
                    self.aborted = true;
                    self.partial = std::mem::take(&mut self.buf);
                    return None;
                }
                None => {
                    self.partial = std::mem::take(&mut self.buf);
                    return None;
                }
            }
        }
    }

    /// Every remaining event until the stream ends.
    pub(crate) async fn collect(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

/// `type` and `metadata.name` of each event (bookmarks as `BOOKMARK`).
pub(crate) fn outline(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let t = e["type"].as_str().unwrap_or("?");
            match e["object"]["metadata"]["name"].as_str() {
                Some(n) => format!("{t} {n}"),
                None => t.to_owned(),
            }
        })
        .collect()
}

impl Watch {
    /// Every remaining byte until the stream ends (protobuf watches).
    pub(crate) async fn collect_bytes(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        loop {
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        out.extend_from_slice(&data);
                    }
                }
                Some(Err(_)) => {
                    self.aborted = true;
                    return out;
                }
                None => return out,
            }
        }
    }
}

/// Outlines of Kubernetes protobuf bodies, for comparing ours with kube-apiserver's.
pub(crate) mod pb {
    use bytes::Bytes;
    use kcache_proto::Envelope;
    use kcache_proto::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message;

    /// Any top-level object: `metadata` is field 1 of every kind.
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct AnyObject {
        #[prost(message, optional, tag = "1")]
        pub(crate) metadata: Option<meta::ObjectMeta>,
    }

    /// Any list: `metadata` (1), `items` (2).
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct AnyList {
        #[prost(message, optional, tag = "1")]
        pub(crate) metadata: Option<meta::ListMeta>,
        #[prost(message, repeated, tag = "2")]
        pub(crate) items: Vec<AnyObject>,
    }

    /// `apiVersion/kind` of an enveloped body, and for objects their name, for lists the item
    /// names, for `Status` its code, reason and message.
    pub(crate) fn outline(body: &[u8]) -> String {
        let env = match Envelope::decode(Bytes::copy_from_slice(body)) {
            Ok(e) => e,
            Err(e) => return format!("not an envelope: {e}"),
        };
        let head = format!("{}/{}", env.api_version, env.kind);
        if env.kind == "Status" {
            let s = meta::Status::decode(env.raw).unwrap_or_default();
            return format!(
                "{head} {} {} {:?}",
                s.code.unwrap_or_default(),
                s.reason.unwrap_or_default(),
                s.message.unwrap_or_default()
            );
        }
        if env.kind.ends_with("List") {
            let l = AnyList::decode(env.raw).unwrap_or_default();
            let names: Vec<String> = l.items.iter().map(|i| name(i.metadata.as_ref())).collect();
            return format!("{head} [{}]", names.join(","));
        }
        let o = AnyObject::decode(env.raw).unwrap_or_default();
        format!("{head} {}", name(o.metadata.as_ref()))
    }

    fn name(m: Option<&meta::ObjectMeta>) -> String {
        m.and_then(|m| m.name.clone()).unwrap_or_default()
    }

    /// The frames of a protobuf watch stream: `type` and the object's outline each.
    pub(crate) fn watch_outline(stream: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = stream;
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            if rest.len() < 4 + len {
                out.push(format!("truncated frame of {len} bytes"));
                break;
            }
            let ev = meta::WatchEvent::decode(&rest[4..4 + len]).unwrap_or_default();
            let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
            out.push(format!(
                "{} {}",
                ev.r#type.unwrap_or_default(),
                outline(&raw)
            ));
            rest = &rest[4 + len..];
        }
        if !rest.is_empty() && rest.len() < 4 {
            out.push(format!("{} trailing bytes", rest.len()));
        }
        out
    }
}

/// `field reason` of each cause of a Status body, in the body's order.
pub(crate) fn cause_lines(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{} {}",
                c["field"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or("")
            )
        })
        .collect()
}
