//! Tokens, body limits, the in-process handle, custom resources, the history window, and requests
//! that must never crash the server.

use super::*;

#[tokio::test]
async fn bearer_token_is_required_when_configured() {
    let s = ApiServer::builder()
        .token("s3cret")
        .build()
        .start()
        .await
        .unwrap();
    // Without credentials: anonymous (kube-apiserver's default), which RBAC refuses.
    let r = get(s.addr(), "/api/v1/namespaces").await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    // An unknown token: 401, as with anonymous auth off.
    let bad = common::request(
        s.addr(),
        http::Method::GET,
        "/api/v1/namespaces",
        &[("authorization", "Bearer wrong")],
        None,
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 401);
    assert_eq!(bad.json()["reason"], "Unauthorized");
    let closed = ApiServer::builder()
        .token("s3cret")
        .anonymous_auth(false)
        .build()
        .start()
        .await
        .unwrap();
    assert_eq!(get(closed.addr(), "/api/v1/namespaces").await.status, 401);
    let ok = common::request(
        s.addr(),
        http::Method::GET,
        "/api/v1/namespaces",
        &[("authorization", "Bearer s3cret")],
        None,
    )
    .await
    .unwrap();
    assert_eq!(ok.status, 200);
}

#[tokio::test]
async fn oversized_body_is_413() {
    let s = ApiServer::builder()
        .body_limit(1024)
        .build()
        .start()
        .await
        .unwrap();
    let big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(4096)}});
    let r = post(s.addr(), CMS, &big).await;
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["reason"], "RequestEntityTooLarge");
}

#[tokio::test]
async fn rust_handle_reads_and_writes_without_http() {
    let s = server().await;
    let h = s.handle();
    let created = h.create(CMS, cm("h", json!({}))).unwrap();
    assert_eq!(created["kind"], "ConfigMap");
    assert_eq!(get(s.addr(), &format!("{CMS}/h")).await.json(), created);
    let mut next = created.clone();
    next["data"]["k"] = json!("2");
    let updated = h.update(&format!("{CMS}/h"), next.clone()).unwrap();
    assert_eq!(h.update(&format!("{CMS}/h"), next).unwrap_err().code, 409);
    let (items, list_rv) = h.list("/api/v1/configmaps").unwrap();
    assert_eq!(items, vec![updated]);
    assert_eq!(list_rv, h.resource_version());
    h.delete(&format!("{CMS}/h")).unwrap();
    assert_eq!(h.get(&format!("{CMS}/h")).unwrap_err().code, 404);
    assert_eq!(h.create("/api/v1/nosuch", json!({})).unwrap_err().code, 404);
}

#[tokio::test]
async fn registered_custom_resource_is_served_and_discovered() {
    let s = ApiServer::builder()
        .resource(kcache_apiserver::ResourceInfo::namespaced(
            "example.com",
            "v1",
            "widgets",
            "Widget",
        ))
        .build()
        .start()
        .await
        .unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let r = post(
        s.addr(),
        path,
        &json!({"metadata": {"name": "w"}, "spec": {"size": 1}}),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["metadata"]["generation"], 1);
    let disc = get(s.addr(), "/apis/example.com/v1").await.json();
    assert_eq!(disc["resources"][0]["name"], "widgets");
    s.handle().register(kcache_apiserver::ResourceInfo::cluster(
        "example.com",
        "v1",
        "gadgets",
        "Gadget",
    ));
    assert_eq!(
        post(
            s.addr(),
            "/apis/example.com/v1/gadgets",
            &json!({"metadata": {"name": "g"}})
        )
        .await
        .status,
        201
    );
}

#[tokio::test]
async fn garbage_paths_and_bodies_never_panic() {
    let s = server().await;
    for path in [
        "/",
        "/api/v1/namespaces/default/configmaps/a/b/c/d",
        "/apis/%ff/v1",
        "/api/v1/watch",
        "/api/v1/namespaces//configmaps",
        "/api/v1/namespaces/default/configmaps?limit=abc",
        "/api/v1/namespaces/default/configmaps?continue=%00%01",
    ] {
        let r = get(s.addr(), path).await;
        assert!(r.status >= 200 && r.status < 500, "{path} → {}", r.status);
    }
    for body in [
        &b"\xff\xfe"[..],
        b"[]",
        b"null",
        b"{\"metadata\": 5}",
        b"{\"metadata\": {\"name\": 5}}",
    ] {
        let r = common::request(
            s.addr(),
            http::Method::POST,
            CMS,
            &[("content-type", "application/json")],
            Some(body.to_vec()),
        )
        .await
        .unwrap();
        assert!(
            r.status >= 400 && r.status < 500,
            "{:?} → {}",
            body,
            r.status
        );
    }
}

#[tokio::test(start_paused = true)]
async fn history_window_by_age_expires_old_resource_versions() {
    let s = ApiServer::builder()
        .history_age(std::time::Duration::from_secs(10))
        .build()
        .start()
        .await
        .unwrap();
    let first = post(s.addr(), CMS, &cm("a", json!({}))).await.json();
    post(s.addr(), CMS, &cm("b", json!({}))).await;
    let fresh = get(
        s.addr(),
        &format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&first)
        ),
    )
    .await;
    assert_eq!(fresh.status, 200);
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    let old = get(
        s.addr(),
        &format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&first)
        ),
    )
    .await;
    assert_eq!(old.status, 410);
}

#[tokio::test]
async fn random_requests_never_crash_the_server() {
    use rand::Rng;
    let s = server().await;
    let mut rng = rand::rng();
    let segments = [
        "api",
        "apis",
        "v1",
        "namespaces",
        "default",
        "configmaps",
        "pods",
        "watch",
        "x",
        "%00",
        "..",
        "status",
        "coordination.k8s.io",
        "leases",
    ];
    let methods = [
        http::Method::GET,
        http::Method::POST,
        http::Method::PUT,
        http::Method::PATCH,
        http::Method::DELETE,
    ];
    let types = [
        "application/json",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "application/vnd.kubernetes.protobuf",
        "text/plain",
    ];
    for _ in 0..300 {
        let n = rng.random_range(1..7);
        let path: Vec<&str> = (0..n)
            .map(|_| segments[rng.random_range(0..segments.len())])
            .collect();
        let mut path = format!("/{}", path.join("/"));
        // Every request carries a short timeout so that watch paths end quickly.
        if rng.random_bool(0.3) {
            path.push_str(
                "?limit=2&labelSelector=a%20in%20(b&continue=zz&resourceVersion=1&timeoutSeconds=1",
            );
        } else {
            path.push_str("?timeoutSeconds=1");
        }
        let body: Vec<u8> = if rng.random_bool(0.5) {
            (0..rng.random_range(0..64)).map(|_| rng.random()).collect()
        } else {
            br#"{"metadata":{"name":"r","finalizers":["x"]},"data":{"a":"b"}}"#.to_vec()
        };
        let method = methods[rng.random_range(0..methods.len())].clone();
        let ct = types[rng.random_range(0..types.len())];
        let r = common::request(
            s.addr(),
            method.clone(),
            &path,
            &[("content-type", ct)],
            Some(body),
        )
        .await;
        let r = r.unwrap_or_else(|e| panic!("{method} {path}: connection failed: {e}"));
        assert!(
            r.status < 500,
            "{method} {path} ({ct}) → {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    assert_eq!(
        get(s.addr(), "/api/v1/namespaces/default").await.status,
        200,
        "still serving"
    );
}
