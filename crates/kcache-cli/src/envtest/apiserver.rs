//! `kube-apiserver` as envtest starts it: kcache's embedded server behind kube-apiserver's
//! flags.
//!
//! Honoured: `--secure-port` and `--bind-address` (where it listens), `--tls-cert-file` /
//! `--tls-private-key-file` or `apiserver.crt` / `apiserver.key` of `--cert-dir` (what it
//! serves; a generated certificate, kept in memory, when neither exists), `--client-ca-file`
//! (client-certificate users), `--etcd-servers` (required, as kube-apiserver requires it; never
//! contacted: kcache is its own storage), `--service-account-key-file` /
//! `--service-account-signing-key-file` (must be readable, as kube-apiserver checks; kcache
//! signs its own tokens). Every other kube-apiserver flag is accepted and ignored; a flag
//! kube-apiserver does not define is refused in its words. As a bare kube-apiserver (no
//! kube-controller-manager), the server runs no garbage collector and creates no `default`
//! ServiceAccounts.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use kcache_apiserver::tls::ServingCertificate;
use kcache_apiserver::{ApiServer, ServerConfig};

use super::flags::{self, Kind, Refusal};

/// kube-apiserver's boolean flags (a bare `--name` means true).
const BOOL_FLAGS: &[&str] = &[
    "aggregator-reject-forwarding-redirect",
    "allow-privileged",
    "anonymous-auth",
    "audit-log-compress",
    "authentication-skip-lookup",
    "authentication-tolerate-lookup-failure",
    "contention-profiling",
    "disable-http2-serving",
    "emulation-forward-compatible",
    "enable-aggregator-routing",
    "enable-bootstrap-token-auth",
    "enable-garbage-collector",
    "enable-logs-handler",
    "enable-priority-and-fairness",
    "encryption-provider-config-automatic-reload",
    "help",
    "log-json-split-stream",
    "log-text-split-stream",
    "permit-address-sharing",
    "permit-port-sharing",
    "profiling",
    "runtime-config-emulation-forward-compatible",
    "service-account-extend-token-expiration",
    "service-account-lookup",
    "version",
    "watch-cache",
];

/// kube-apiserver's (v1.36) flags that take a value.
const VALUE_FLAGS: &[&str] = &[
    "admission-control",
    "admission-control-config-file",
    "advertise-address",
    "allow-metric-labels",
    "allow-metric-labels-manifest",
    "api-audiences",
    "apiserver-count",
    "audit-log-batch-buffer-size",
    "audit-log-batch-max-size",
    "audit-log-batch-max-wait",
    "audit-log-format",
    "audit-log-maxage",
    "audit-log-maxbackup",
    "audit-log-maxsize",
    "audit-log-mode",
    "audit-log-path",
    "audit-log-truncate-enabled",
    "audit-log-version",
    "audit-policy-file",
    "audit-webhook-batch-buffer-size",
    "audit-webhook-batch-initial-backoff",
    "audit-webhook-batch-max-size",
    "audit-webhook-batch-max-wait",
    "audit-webhook-config-file",
    "audit-webhook-initial-backoff",
    "audit-webhook-mode",
    "audit-webhook-version",
    "authentication-config",
    "authentication-kubeconfig",
    "authentication-token-webhook-cache-ttl",
    "authentication-token-webhook-config-file",
    "authentication-token-webhook-version",
    "authorization-always-allow-paths",
    "authorization-config",
    "authorization-kubeconfig",
    "authorization-mode",
    "authorization-policy-file",
    "authorization-webhook-cache-authorized-ttl",
    "authorization-webhook-cache-unauthorized-ttl",
    "authorization-webhook-config-file",
    "authorization-webhook-version",
    "bind-address",
    "cert-dir",
    "client-ca-file",
    "cloud-config",
    "cloud-provider",
    "coordinated-leadership-lease-duration",
    "coordinated-leadership-renew-deadline",
    "coordinated-leadership-retry-period",
    "cors-allowed-origins",
    "debug-socket-path",
    "default-not-ready-toleration-seconds",
    "default-unreachable-toleration-seconds",
    "default-watch-cache-size",
    "delete-collection-workers",
    "disable-admission-plugins",
    "disabled-metrics",
    "egress-selector-config-file",
    "emulated-version",
    "enable-admission-plugins",
    "encryption-provider-config",
    "endpoint-reconciler-type",
    "etcd-cafile",
    "etcd-certfile",
    "etcd-compaction-interval",
    "etcd-count-metric-poll-period",
    "etcd-db-metric-poll-interval",
    "etcd-healthcheck-timeout",
    "etcd-keyfile",
    "etcd-prefix",
    "etcd-readycheck-timeout",
    "etcd-servers",
    "etcd-servers-overrides",
    "event-ttl",
    "external-hostname",
    "feature-gates",
    "goaway-chance",
    "http2-max-streams-per-connection",
    "kubelet-certificate-authority",
    "kubelet-client-certificate",
    "kubelet-client-key",
    "kubelet-preferred-address-types",
    "kubelet-timeout",
    "kubernetes-service-node-port",
    "lease-reuse-duration-seconds",
    "livez-grace-period",
    "log-flush-frequency",
    "log-json-info-buffer-size",
    "log-text-info-buffer-size",
    "logging-format",
    "max-connection-bytes-per-sec",
    "max-mutating-requests-inflight",
    "max-requests-inflight",
    "min-compatibility-version",
    "min-request-timeout",
    "oidc-ca-file",
    "oidc-client-id",
    "oidc-groups-claim",
    "oidc-groups-prefix",
    "oidc-issuer-url",
    "oidc-required-claim",
    "oidc-signing-algs",
    "oidc-username-claim",
    "oidc-username-prefix",
    "peer-advertise-ip",
    "peer-advertise-port",
    "peer-ca-file",
    "proxy-client-cert-file",
    "proxy-client-key-file",
    "request-timeout",
    "requestheader-allowed-names",
    "requestheader-client-ca-file",
    "requestheader-extra-headers-prefix",
    "requestheader-group-headers",
    "requestheader-uid-headers",
    "requestheader-username-headers",
    "runtime-config",
    "secure-port",
    "service-account-issuer",
    "service-account-jwks-uri",
    "service-account-key-file",
    "service-account-max-token-expiration",
    "service-account-signing-endpoint",
    "service-account-signing-key-file",
    "service-cluster-ip-range",
    "service-node-port-range",
    "show-hidden-metrics-for-version",
    "shutdown-delay-duration",
    "shutdown-send-retry-after",
    "shutdown-watch-termination-grace-period",
    "storage-backend",
    "storage-initialization-timeout",
    "storage-media-type",
    "strict-transport-security-directives",
    "tls-cert-file",
    "tls-cipher-suites",
    "tls-min-version",
    "tls-private-key-file",
    "tls-sni-cert-key",
    "token-auth-file",
    "tracing-config-file",
    "v",
    "vmodule",
    "watch-cache-sizes",
];

fn kind(name: &str) -> Option<Kind> {
    Kind::of(name, BOOL_FLAGS, VALUE_FLAGS)
}

/// The flags kcache acts on; every other known flag is accepted and ignored.
pub(crate) const HONOURED: &[&str] = &[
    "anonymous-auth",
    "authorization-mode",
    "bind-address",
    "cert-dir",
    "client-ca-file",
    "etcd-servers",
    "secure-port",
    "service-account-key-file",
    "service-account-signing-key-file",
    "tls-cert-file",
    "tls-private-key-file",
];

/// Runs `kube-apiserver ARGS` until SIGTERM or SIGINT.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let flags = match flags::parse(args, &kind) {
        Ok(f) => f,
        Err(Refusal::Unknown(name)) => {
            eprintln!("Error: unknown flag: --{name}");
            return ExitCode::from(1);
        }
        Err(Refusal::NeedsArgument(name)) => {
            eprintln!("Error: flag needs an argument: --{name}");
            return ExitCode::from(1);
        }
    };
    if flags.has("help") {
        print!("{}", help());
        return ExitCode::SUCCESS;
    }
    if flags.has("version") {
        println!("Kubernetes v1.36.5 (kcache {})", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    if !flags.positional.is_empty() {
        eprintln!(
            "Error: \"kube-apiserver\" does not take any arguments, got {:?}",
            flags.positional
        );
        return ExitCode::from(1);
    }
    let config = match config(&flags) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("Error: {e:#}");
            return ExitCode::from(1);
        }
    };
    super::run(true, "Error", serve(config))
}

/// `--help`: the flags, one per line as kube-apiserver prints them (envtest reads this to
/// learn which flags exist).
fn help() -> String {
    let mut names: Vec<&str> = BOOL_FLAGS.iter().chain(VALUE_FLAGS).copied().collect();
    names.sort_unstable();
    let mut out = String::from(
        "The Kubernetes API server (kcache's embedded server under kube-apiserver's flags).\n\n\
         Usage:\n  kube-apiserver [flags]\n\nFlags:\n",
    );
    for n in names {
        let value = if BOOL_FLAGS.contains(&n) {
            ""
        } else {
            " string"
        };
        out.push_str(&format!("      --{n}{value}\n"));
    }
    out
}

fn read(path: &Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("{what}: unable to read {}", path.display()))
}

/// The server's configuration from the flags.
fn config(flags: &flags::Flags) -> anyhow::Result<ServerConfig> {
    if flags.get("etcd-servers").is_none_or(str::is_empty) {
        anyhow::bail!("[--etcd-servers must be specified]");
    }
    let bind: IpAddr = flags
        .get("bind-address")
        .unwrap_or("0.0.0.0")
        .parse()
        .context("invalid --bind-address")?;
    let port: u16 = flags
        .get("secure-port")
        .unwrap_or("6443")
        .parse()
        .context("invalid --secure-port")?;
    if port == 0 {
        anyhow::bail!("--secure-port 0 (no secure serving) is not supported by kcache");
    }
    let serving = match (
        flags.get("tls-cert-file"),
        flags.get("tls-private-key-file"),
    ) {
        (Some(c), Some(k)) => Some((PathBuf::from(c), PathBuf::from(k))),
        (Some(_), None) | (None, Some(_)) => {
            anyhow::bail!("--tls-cert-file and --tls-private-key-file go together")
        }
        (None, None) => flags.get("cert-dir").and_then(|dir| {
            let (c, k) = (
                Path::new(dir).join("apiserver.crt"),
                Path::new(dir).join("apiserver.key"),
            );
            (c.exists() && k.exists()).then_some((c, k))
        }),
    };
    for f in [
        "service-account-key-file",
        "service-account-signing-key-file",
    ] {
        if let Some(path) = flags.get(f) {
            read(Path::new(path), &format!("--{f}"))?;
        }
    }
    for f in ["allow-privileged", "enable-garbage-collector"] {
        flags.bool(f, true).map_err(anyhow::Error::msg)?;
    }
    let anonymous = flags
        .bool("anonymous-auth", true)
        .map_err(anyhow::Error::msg)?;
    let mut config = ServerConfig::default();
    config.anonymous_auth = anonymous;
    // kube-apiserver's modes, in order; RBAC is the one kcache enforces. Without the flag
    // kube-apiserver allows everything (AlwaysAllow), as does a list without RBAC (Node,
    // ABAC and Webhook have nothing to consult here).
    let modes: Vec<&str> = flags
        .get("authorization-mode")
        .map(|m| m.split(',').map(str::trim).collect())
        .unwrap_or_default();
    if let Some(bad) = modes.iter().find(|m| {
        !matches!(
            **m,
            "AlwaysAllow" | "AlwaysDeny" | "ABAC" | "Webhook" | "RBAC" | "Node"
        )
    }) {
        anyhow::bail!("authorization-mode \"{bad}\" is not a valid mode")
    }
    config.authorization = modes.contains(&"RBAC") && !modes.starts_with(&["AlwaysAllow"]);
    config.listen = SocketAddr::new(bind, port);
    config.https = true;
    // A bare kube-apiserver: no kube-controller-manager collects garbage or creates the
    // `default` ServiceAccounts.
    config.garbage_collector = false;
    config.default_service_accounts = false;
    if let Some((cert, key)) = serving {
        config.serving_certificate = Some(ServingCertificate {
            cert_pem: read(&cert, "serving certificate")?,
            key_pem: read(&key, "serving key")?,
        });
    }
    if let Some(ca) = flags.get("client-ca-file") {
        config.client_ca_pem = Some(read(Path::new(ca), "--client-ca-file")?);
    }
    let ignored: Vec<&str> = flags.names().filter(|n| !HONOURED.contains(n)).collect();
    if !ignored.is_empty() {
        tracing::info!(flags = ?ignored, "accepted, without effect in kcache");
    }
    Ok(config)
}

async fn serve(config: ServerConfig) -> anyhow::Result<()> {
    let stop = super::terminated()?;
    let listen = config.listen;
    let server = ApiServer::builder()
        .config(config)
        .build()
        .start()
        .await
        .with_context(|| format!("serving securely on {listen}"))?;
    eprintln!(
        "kcache kube-apiserver: serving securely on {}",
        server.url()
    );
    stop.await;
    // Open watches end at once; a stuck connection does not hold the exit up.
    let _ = tokio::time::timeout(Duration::from_secs(5), server.shutdown()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> flags::Flags {
        let a: Vec<String> = a.iter().map(|s| (*s).to_owned()).collect();
        flags::parse(&a, &kind).unwrap()
    }

    #[test]
    fn the_help_lists_no_insecure_port_so_envtest_passes_none() {
        let h = help();
        assert!(h.contains("\n      --secure-port string\n"), "{h}");
        assert!(h.contains("\n      --allow-privileged\n"), "{h}");
        assert!(!h.contains("--insecure-port"), "{h}");
    }

    #[test]
    fn etcd_servers_are_required_and_no_gc_nor_default_service_accounts_run() {
        let e = config(&parse(&["--secure-port=1234"])).unwrap_err();
        assert!(
            format!("{e}").contains("--etcd-servers must be specified"),
            "{e}"
        );
        let c = config(&parse(&[
            "--etcd-servers=http://127.0.0.1:2379",
            "--secure-port=1234",
            "--bind-address=127.0.0.1",
            "--authorization-mode=RBAC",
        ]))
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:1234".parse().unwrap());
        assert!(c.https && !c.garbage_collector && !c.default_service_accounts);
        assert!(c.serving_certificate.is_none() && c.client_ca_pem.is_none());
        assert!(c.authorization && c.anonymous_auth);
    }

    #[test]
    fn the_authorization_mode_and_anonymous_auth_flags_are_honoured() {
        let with = |extra: &[&str]| {
            let mut args = vec!["--etcd-servers=http://127.0.0.1:2379", "--secure-port=1234"];
            args.extend_from_slice(extra);
            config(&parse(&args))
        };
        assert!(!with(&[]).unwrap().authorization, "no flag: AlwaysAllow");
        assert!(
            with(&["--authorization-mode=Node,RBAC"])
                .unwrap()
                .authorization
        );
        assert!(
            !with(&["--authorization-mode=AlwaysAllow"])
                .unwrap()
                .authorization
        );
        assert!(!with(&["--anonymous-auth=false"]).unwrap().anonymous_auth);
        let e = with(&["--authorization-mode=Magic"]).unwrap_err();
        assert!(
            format!("{e}").contains("\"Magic\" is not a valid mode"),
            "{e}"
        );
    }
}
