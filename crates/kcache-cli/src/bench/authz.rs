//! `kcache bench-authz`: the embedded server's cost of authorization per request.
//!
//! Two embedded servers, one with RBAC on (the default, as kube-apiserver's
//! `--authorization-mode=RBAC`) and one with authorization off, each holding one ConfigMap and
//! a RoleBinding of the bootstrap `view` ClusterRole to the group `dev` (among the ~60
//! bootstrap bindings). Three callers GET the ConfigMap, one HTTP/1.1 connection per request
//! so that nothing is cached between requests: the admin (`system:masters`: allowed before any
//! rule is evaluated), `alice` in `dev` with RBAC on (the rules are evaluated on every
//! request), and `alice` with authorization off. The three alternate for `--runs` rounds; the
//! report gives each one's median requests/s with the range, and the median cost of
//! authorization per request (1/rate with RBAC − 1/rate without).

use std::{net::SocketAddr, time::Instant};

use anyhow::{Context, bail, ensure};
use kcache_apiserver::{ApiServer, RunningServer, auth::UserInfo};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Arguments of `kcache bench-authz`.
#[derive(Debug, clap::Args)]
pub(crate) struct AuthzArgs {
    /// GET requests per caller and round.
    #[arg(long, default_value_t = 3000)]
    pub requests: usize,
    /// Rounds (each caller measured once per round, alternating).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
}

const PATH: &str = "/api/v1/namespaces/default/configmaps/cm";

/// One GET on a fresh connection; the status code.
async fn get(addr: SocketAddr, token: &str) -> anyhow::Result<u16> {
    let mut conn = tokio::net::TcpStream::connect(addr).await?;
    let request = format!(
        "GET {PATH} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await?;
    let mut answer = Vec::with_capacity(1024);
    conn.read_to_end(&mut answer).await?;
    let head = answer.get(..12).unwrap_or(&answer);
    let status = std::str::from_utf8(head)
        .ok()
        .and_then(|h| h.strip_prefix("HTTP/1.1 "))
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse().ok());
    status.context("the server answered something that is not HTTP/1.1")
}

/// Requests per second for `n` GETs as `token`; every answer must be 200.
async fn rate(addr: SocketAddr, token: &str, n: usize) -> anyhow::Result<f64> {
    let start = Instant::now();
    for _ in 0..n {
        let status = get(addr, token).await?;
        ensure!(status == 200, "GET {PATH} answered {status}, not 200");
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

async fn server(authorization: bool) -> anyhow::Result<RunningServer> {
    Ok(ApiServer::builder()
        .token("admin-token")
        .user_token("alice-token", UserInfo::new("alice", ["dev"]))
        .authorization(authorization)
        .seed(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "cm"}}),
        )
        .seed(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            json!({"metadata": {"name": "dev-view"},
                "subjects": [{"kind": "Group", "name": "dev", "apiGroup": "rbac.authorization.k8s.io"}],
                "roleRef": {"kind": "ClusterRole", "name": "view", "apiGroup": "rbac.authorization.k8s.io"}}),
        )
        .build().start()
        .await?)
}

/// The median of `v` (sorted here), and its range.
fn median(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let m = if v.len().is_multiple_of(2) {
        f64::midpoint(v[mid - 1], v[mid])
    } else {
        v[mid]
    };
    (m, v[0], v[v.len() - 1])
}

/// Runs the measurement and prints its report on stdout.
pub(crate) async fn run(args: AuthzArgs) -> anyhow::Result<()> {
    if args.requests == 0 || args.runs == 0 {
        bail!("--requests and --runs must be at least 1");
    }
    let on = server(true).await?;
    let off = server(false).await?;
    // Warm up: connections, the RBAC snapshot, the allocator.
    rate(on.addr(), "alice-token", args.requests.min(500)).await?;
    rate(off.addr(), "alice-token", args.requests.min(500)).await?;
    let (mut admin, mut rbac, mut unauthorized, mut cost) = (vec![], vec![], vec![], vec![]);
    for round in 1..=args.runs {
        let a = rate(on.addr(), "admin-token", args.requests).await?;
        let r = rate(on.addr(), "alice-token", args.requests).await?;
        let o = rate(off.addr(), "alice-token", args.requests).await?;
        eprintln!(
            "bench-authz: round {round}/{}: admin {a:.0}/s, alice with RBAC {r:.0}/s, alice with authorization off {o:.0}/s",
            args.runs
        );
        admin.push(a);
        rbac.push(r);
        unauthorized.push(o);
        cost.push((1.0 / r - 1.0 / o) * 1e6);
    }
    on.shutdown().await;
    off.shutdown().await;
    println!(
        "GET one ConfigMap, one connection per request, {} requests × {} rounds (median, min–max):",
        args.requests, args.runs
    );
    for (label, v) in [
        ("admin (system:masters)", &mut admin),
        ("alice, RBAC on", &mut rbac),
        ("alice, authorization off", &mut unauthorized),
    ] {
        let (m, lo, hi) = median(v);
        println!("  {label:<26} {m:>8.0} requests/s ({lo:.0}–{hi:.0})");
    }
    let (m, lo, hi) = median(&mut cost);
    let (r, _, _) = median(&mut rbac);
    let (o, _, _) = median(&mut unauthorized);
    println!(
        "  authorization: {m:.1} µs per request ({lo:.1}–{hi:.1}); RBAC on / off = {:.2}× the rate",
        r / o
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_midpoint() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0, 10.0]), (2.5, 1.0, 10.0));
        assert_eq!(median(&mut [5.0]), (5.0, 5.0, 5.0));
    }
}
