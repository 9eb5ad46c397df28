//! The HTTP stack under [`Client`](super::Client): kube-client's own layers (base URI, auth with
//! token refresh and exec plugins, impersonation headers, optional retries) over a hyper client
//! of ours that speaks HTTP/2 where the server offers it and pings its HTTP/2 connections.
//!
//! kube-client's default stack is HTTP/1.1 only. On HTTP/1.1 a connection that goes half-open
//! (a dead node, a dropped NAT entry, a frozen load balancer: the peer stops answering without
//! closing) is only noticed when the reflector's watch idle timeout fires (90 s without a frame,
//! see `reflector::Config::watch_idle_timeout`). client-go negotiates HTTP/2 over TLS (ALPN
//! `h2`, then `http/1.1`) and runs an HTTP/2 health check: a PING after 30 s without a frame
//! read, the connection closed when no answer comes within 15 s. This stack does the same, with
//! the same defaults, so a half-open connection fails every stream on it within about 45 s and
//! the reflector re-lists or re-watches on a fresh connection. Plain `http://` servers (the
//! embedded one, `kubectl proxy`) stay on HTTP/1.1, as with client-go.
//!
//! Under the TLS layer the socket is read through a 64 KiB buffer (`read_buffer.rs`): rustls
//! alone reads 4 KiB per system call.
//!
//! As in client-go, the environment variables `HTTP2_READ_IDLE_TIMEOUT_SECONDS` and
//! `HTTP2_PING_TIMEOUT_SECONDS` change the two delays; a read-idle of 0 switches the pings off.
//!
//! With a proxy in the kubeconfig (`proxy-url`) kube-client's own stack is used (HTTP/1.1, the
//! idle timeout as the only half-open detection).

use std::time::Duration;

use http::Response;
use hyper_timeout::TimeoutConnector;
use hyper_util::{
    client::legacy::{Client as HyperClient, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};
use kube_client::{
    Config,
    client::{ConfigExt, retry::RetryPolicy},
};
use tower::{ServiceBuilder, util::MapResponseLayer};

use super::ResponseObserver;

/// Without a frame read for this long, an HTTP/2 connection is pinged (client-go:
/// `ReadIdleTimeout`, 30 s).
pub(crate) const HTTP2_READ_IDLE: Duration = Duration::from_secs(30);
/// An unanswered ping closes the connection after this long (client-go: `PingTimeout`, 15 s).
pub(crate) const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(15);

/// HTTP/2 keep-alive settings of a [`Client`](super::Client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Keepalive {
    /// `None`: no pings.
    pub(crate) read_idle: Option<Duration>,
    pub(crate) ping_timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Self {
        Self {
            read_idle: Some(HTTP2_READ_IDLE),
            ping_timeout: HTTP2_PING_TIMEOUT,
        }
    }
}

impl Keepalive {
    /// The defaults, changed by client-go's `HTTP2_READ_IDLE_TIMEOUT_SECONDS` and
    /// `HTTP2_PING_TIMEOUT_SECONDS` (whole seconds; an unparsable value keeps the default).
    pub(crate) fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let secs = |name| var(name).and_then(|v| v.trim().parse::<u64>().ok());
        let mut k = Self::default();
        if let Some(s) = secs("HTTP2_READ_IDLE_TIMEOUT_SECONDS") {
            k.read_idle = (s > 0).then(|| Duration::from_secs(s));
        }
        if let Some(s) = secs("HTTP2_PING_TIMEOUT_SECONDS").filter(|s| *s > 0) {
            k.ping_timeout = Duration::from_secs(s);
        }
        k
    }
}

/// The response mapper that shows each response to `observer` and passes it on unchanged.
fn observe<B>(observer: ResponseObserver) -> impl Fn(Response<B>) -> Response<B> + Clone {
    move |response| {
        observer(response.status(), response.headers());
        response
    }
}

/// Builds a kube-client client from `config` on our hyper client (see the module docs).
/// `config.default_retry` adds kube-client's retry layer, as in kube-client's own stack;
/// `observer` sees every response's status and headers.
pub(crate) fn build(
    config: &Config,
    keepalive: Keepalive,
    observer: Option<ResponseObserver>,
) -> Result<kube_client::Client, kube_client::Error> {
    if config.proxy_url.is_some() {
        let builder = kube_client::client::ClientBuilder::try_from(config.clone())?;
        return Ok(match observer {
            Some(o) => builder
                .with_layer(&MapResponseLayer::new(observe(o)))
                .build(),
            None => builder.build(),
        });
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Dead peers on an idle pooled connection are also found by the kernel.
    http.set_keepalive(Some(keepalive.read_idle.unwrap_or(HTTP2_READ_IDLE)));
    let tls = config.rustls_client_config()?;
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let https = match &config.tls_server_name {
        Some(name) => https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(
            name.clone().try_into().map_err(|e| {
                kube_client::Error::RustlsTls(
                    kube_client::client::RustlsTlsError::InvalidServerName(e),
                )
            })?,
        )),
        None => https,
    };
    let https = https
        .enable_http1()
        .enable_http2()
        .wrap_connector(super::read_buffer::buffered(http));
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);

    let hyper = HyperClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(keepalive.read_idle)
        .http2_keep_alive_timeout(keepalive.ping_timeout)
        .http2_keep_alive_while_idle(true)
        // Go's HTTP/2 client windows: 4 MiB per stream, 1 GiB per connection, so a large list
        // is not throttled by flow control.
        .http2_initial_stream_window_size(4 << 20)
        .http2_initial_connection_window_size(1 << 30)
        .build(connector);

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| tower::retry::RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .option_layer(observer.map(|o| MapResponseLayer::new(observe(o))))
        .service(hyper);
    Ok(kube_client::Client::new(
        service,
        config.default_namespace.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Keepalive {
        Keepalive::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn keepalive_defaults_are_client_go_s() {
        assert_eq!(
            with(&[]),
            Keepalive {
                read_idle: Some(Duration::from_secs(30)),
                ping_timeout: Duration::from_secs(15)
            }
        );
    }

    #[test]
    fn keepalive_follows_client_go_s_environment_variables() {
        let k = with(&[
            ("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "5"),
            ("HTTP2_PING_TIMEOUT_SECONDS", "2"),
        ]);
        assert_eq!(k.read_idle, Some(Duration::from_secs(5)));
        assert_eq!(k.ping_timeout, Duration::from_secs(2));
        assert_eq!(
            with(&[("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "0")]).read_idle,
            None
        );
        // Garbage and a zero ping timeout keep the defaults.
        assert_eq!(
            with(&[
                ("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "soon"),
                ("HTTP2_PING_TIMEOUT_SECONDS", "0")
            ]),
            Keepalive::default()
        );
    }
}
