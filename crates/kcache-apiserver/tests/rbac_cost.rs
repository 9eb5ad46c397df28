//! The cost of authorization per request (a measurement, not a test; run with
//! `cargo test -p kcache-apiserver --release --test rbac_cost -- --ignored --nocapture`):
//! GETs of one ConfigMap per second as the admin (`system:masters`, no rule evaluated), as a
//! user whose RoleBinding sits among the ~60 bootstrap bindings (RBAC evaluated on every
//! request), and as the same user with authorization off.

mod common;

use std::net::SocketAddr;
use std::time::Instant;

use common::request;
use http::Method;
use kcache_apiserver::ApiServer;
use kcache_apiserver::auth::UserInfo;
use serde_json::json;

const N: usize = 3000;

async fn rate(addr: SocketAddr, token: &str) -> f64 {
    let bearer = format!("Bearer {token}");
    let headers = [("authorization", bearer.as_str())];
    let path = "/api/v1/namespaces/default/configmaps/cm";
    let start = Instant::now();
    for _ in 0..N {
        let r = request(addr, Method::GET, path, &headers, None)
            .await
            .expect("request");
        assert_eq!(r.status, 200);
    }
    N as f64 / start.elapsed().as_secs_f64()
}

async fn server(authorization: bool) -> kcache_apiserver::RunningServer {
    ApiServer::builder()
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
        .start()
        .await
        .expect("server starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run with --ignored --nocapture"]
async fn authorization_cost_per_request() {
    let on = server(true).await;
    let off = server(false).await;
    // Warm up (connections, the RBAC snapshot).
    rate(on.addr(), "alice-token").await;
    let admin = rate(on.addr(), "admin-token").await;
    let alice_rbac = rate(on.addr(), "alice-token").await;
    let alice_off = rate(off.addr(), "alice-token").await;
    println!(
        "GET configmap, {N} requests each, one connection per request: admin {admin:.0}/s, \
         alice with RBAC {alice_rbac:.0}/s, alice with authorization off {alice_off:.0}/s \
         ({:.1} µs of authorization per request)",
        (1.0 / alice_rbac - 1.0 / alice_off) * 1e6
    );
}
