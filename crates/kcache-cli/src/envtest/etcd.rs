//! `etcd` as envtest starts it: kcache's server keeps its own objects, so this etcd holds
//! nothing — it listens where `--listen-client-urls` says (plain HTTP) and answers envtest's
//! readiness probe, `GET /health`, with etcd's `{"health":"true","reason":""}` until SIGTERM.
//! Every etcd flag is accepted and ignored but the listen URLs; an unknown one is refused in
//! the words of Go's flag package.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::flags::{self, Kind, Refusal};

/// etcd's (v3.5/v3.6) boolean flags.
const BOOL_FLAGS: &[&str] = &[
    "client-cert-auth",
    "enable-grpc-gateway",
    "enable-pprof",
    "enable-v2",
    "force-new-cluster",
    "help",
    "peer-client-cert-auth",
    "strict-reconfig-check",
    "unsafe-no-fsync",
    "version",
];

/// etcd's flags taking a value.
const VALUE_FLAGS: &[&str] = &[
    "advertise-client-urls",
    "auto-compaction-mode",
    "auto-compaction-retention",
    "cert-file",
    "data-dir",
    "election-timeout",
    "heartbeat-interval",
    "initial-advertise-peer-urls",
    "initial-cluster",
    "initial-cluster-state",
    "initial-cluster-token",
    "key-file",
    "listen-client-http-urls",
    "listen-client-urls",
    "listen-metrics-urls",
    "listen-peer-urls",
    "log-level",
    "log-outputs",
    "logger",
    "max-request-bytes",
    "max-txn-ops",
    "name",
    "peer-cert-file",
    "peer-key-file",
    "peer-trusted-ca-file",
    "quota-backend-bytes",
    "snapshot-count",
    "trusted-ca-file",
    "wal-dir",
];

fn kind(name: &str) -> Option<Kind> {
    Kind::of(name, BOOL_FLAGS, VALUE_FLAGS)
}

/// Runs `etcd ARGS` until SIGTERM or SIGINT.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let flags = match flags::parse(args, &kind) {
        Ok(f) => f,
        Err(Refusal::Unknown(name)) => {
            eprintln!("flag provided but not defined: -{name}");
            return ExitCode::from(2);
        }
        Err(Refusal::NeedsArgument(name)) => {
            eprintln!("flag needs an argument: -{name}");
            return ExitCode::from(2);
        }
    };
    if flags.has("help") {
        let mut names: Vec<&str> = BOOL_FLAGS.iter().chain(VALUE_FLAGS).copied().collect();
        names.sort_unstable();
        println!(
            "Usage:\n\n  etcd [flags]\n    Start an etcd server (kcache: one holding nothing).\n"
        );
        for n in names {
            println!("  --{n}");
        }
        return ExitCode::SUCCESS;
    }
    if flags.has("version") {
        println!("etcd Version: 3.6.0 (kcache {})", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let urls = flags
        .get("listen-client-urls")
        .unwrap_or("http://localhost:2379");
    let addrs = match listen_addrs(urls) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(1);
        }
    };
    super::run(false, "error", serve(addrs))
}

/// The socket addresses of comma-separated `http://host:port` URLs (`localhost` is
/// 127.0.0.1).
fn listen_addrs(urls: &str) -> anyhow::Result<Vec<SocketAddr>> {
    urls.split(',')
        .filter(|u| !u.trim().is_empty())
        .map(|u| {
            let u = u.trim();
            let hostport = u
                .strip_prefix("http://")
                .with_context(|| {
                    format!("unsupported listen URL {u:?} (kcache's etcd serves http only)")
                })?
                .trim_end_matches('/');
            let hostport = hostport.replace("localhost:", "127.0.0.1:");
            hostport
                .parse::<SocketAddr>()
                .with_context(|| format!("invalid listen URL {u:?}"))
        })
        .collect()
}

async fn serve(addrs: Vec<SocketAddr>) -> anyhow::Result<()> {
    let stop = super::terminated()?;
    let mut listeners = Vec::new();
    for addr in addrs {
        let l = TcpListener::bind(addr)
            .await
            .with_context(|| format!("listen tcp {addr}"))?;
        listeners.push(l);
    }
    for l in listeners {
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut n = 0;
                    // Read the request head (bodies of envtest's probe: none).
                    while n < buf.len() {
                        match conn.read(&mut buf[n..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => n += k,
                        }
                        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                    let head = String::from_utf8_lossy(&buf[..n]);
                    let path = head.split_whitespace().nth(1).unwrap_or("");
                    let (status, body) = if path == "/health" || path.starts_with("/health?") {
                        ("200 OK", "{\"health\":\"true\",\"reason\":\"\"}")
                    } else {
                        ("404 Not Found", "404 page not found\n")
                    };
                    let resp = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(resp.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
    }
    stop.await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_urls_become_addresses() {
        assert_eq!(
            listen_addrs("http://127.0.0.1:2379,http://localhost:4001").unwrap(),
            vec![
                "127.0.0.1:2379".parse().unwrap(),
                "127.0.0.1:4001".parse().unwrap()
            ]
        );
        assert!(listen_addrs("https://127.0.0.1:2379").is_err());
    }
}
