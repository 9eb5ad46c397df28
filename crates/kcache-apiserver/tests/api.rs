//! Behaviour of the REST API: CRUD, lists, watches, errors. Each test starts its own
//! server on 127.0.0.1:0.

mod common;

use common::{Watch, delete, get, outline, patch, post, put};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn create_sets_server_fields_and_get_returns_the_object() {
    let s = server().await;
    let r = post(s.addr(), CMS, &cm("a", json!({}))).await;
    assert_eq!(r.status, 201);
    let created = r.json();
    assert!(created["metadata"]["uid"].as_str().unwrap().len() >= 32);
    assert!(created["metadata"]["creationTimestamp"].is_string());
    assert!(rv(&created) > 0);
    assert!(
        created["metadata"].get("generation").is_none(),
        "configmaps carry no generation"
    );
    let got = get(s.addr(), &format!("{CMS}/a")).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json(), created);
}

#[tokio::test]
async fn client_managed_fields_are_stored_as_sent() {
    let s = server().await;
    let mf = json!([{"manager": "bench", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]);
    let mut obj = cm("m", json!({}));
    obj["metadata"]["managedFields"] = mf.clone();
    let created = post(s.addr(), CMS, &obj).await.json();
    assert_eq!(created["metadata"]["managedFields"], mf);
}

#[tokio::test]
async fn duplicate_create_is_409_already_exists() {
    let s = server().await;
    post(s.addr(), CMS, &cm("a", json!({}))).await;
    let r = post(s.addr(), CMS, &cm("a", json!({}))).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["reason"], "AlreadyExists");
    assert_eq!(r.json()["message"], "configmaps \"a\" already exists");
}

#[tokio::test]
async fn update_with_stale_resource_version_is_409_conflict() {
    let s = server().await;
    let created = post(s.addr(), CMS, &cm("a", json!({}))).await.json();
    let mut next = created.clone();
    next["data"]["k"] = json!("v2");
    let ok = put(s.addr(), &format!("{CMS}/a"), &next).await;
    assert_eq!(ok.status, 200);
    assert!(rv(&ok.json()) > rv(&created));
    let stale = put(s.addr(), &format!("{CMS}/a"), &next).await;
    assert_eq!(stale.status, 409);
    assert_eq!(stale.json()["reason"], "Conflict");
}

#[tokio::test]
async fn update_that_changes_nothing_keeps_the_resource_version() {
    let s = server().await;
    let created = post(s.addr(), CMS, &cm("a", json!({}))).await.json();
    let same = put(s.addr(), &format!("{CMS}/a"), &created).await.json();
    assert_eq!(rv(&same), rv(&created));
}

#[tokio::test]
async fn pods_track_generation_only_for_spec_changes() {
    let s = server().await;
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let created = post(s.addr(), "/api/v1/namespaces/default/pods", &pod)
        .await
        .json();
    assert_eq!(created["metadata"]["generation"], 1);
    let labelled = patch(
        s.addr(),
        "/api/v1/namespaces/default/pods/p",
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await
    .json();
    assert_eq!(labelled["metadata"]["generation"], 1);
    let respec = patch(
        s.addr(),
        "/api/v1/namespaces/default/pods/p",
        "application/merge-patch+json",
        &json!({"spec": {"containers": [{"name": "c", "image": "y"}]}}),
    )
    .await
    .json();
    assert_eq!(respec["metadata"]["generation"], 2);
}

#[tokio::test]
async fn status_changes_only_through_the_status_subresource() {
    let s = server().await;
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    post(s.addr(), "/api/v1/namespaces/default/pods", &pod).await;
    let main = patch(
        s.addr(),
        "/api/v1/namespaces/default/pods/p",
        "application/merge-patch+json",
        &json!({"status": {"phase": "Running"}}),
    )
    .await
    .json();
    assert_eq!(
        main["status"]["phase"], "Pending",
        "the main resource ignores status"
    );
    let sub = patch(
        s.addr(),
        "/api/v1/namespaces/default/pods/p/status",
        "application/merge-patch+json",
        &json!({"status": {"phase": "Running"}, "metadata": {"labels": {"kept": "yes"}},
                "spec": {"containers": [{"name": "c", "image": "ignored"}]}}),
    )
    .await
    .json();
    assert_eq!(sub["status"]["phase"], "Running");
    assert_eq!(
        sub["spec"]["containers"][0]["image"], "x",
        "the status subresource ignores the spec"
    );
    // kube-apiserver's pod status strategy keeps metadata changes (labels, annotations,
    // finalizers; not ownerReferences), as checked on v1.36.5.
    assert_eq!(sub["metadata"]["labels"]["kept"], "yes");
    assert_eq!(sub["metadata"]["generation"], 1);
}

#[tokio::test]
async fn merge_patch_null_deletes_and_json_patch_failing_test_is_422() {
    let s = server().await;
    post(
        s.addr(),
        CMS,
        &json!({"metadata": {"name": "p"}, "data": {"a": "1", "b": "2"}}),
    )
    .await;
    let merged = patch(
        s.addr(),
        &format!("{CMS}/p"),
        "application/merge-patch+json",
        &json!({"data": {"b": null, "c": "3"}}),
    )
    .await;
    assert_eq!(merged.status, 200);
    assert_eq!(merged.json()["data"], json!({"a": "1", "c": "3"}));
    let jp = patch(
        s.addr(),
        &format!("{CMS}/p"),
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/data/a", "value": "9"}]),
    )
    .await;
    assert_eq!(jp.json()["data"]["a"], "9");
    let bad = patch(
        s.addr(),
        &format!("{CMS}/p"),
        "application/json-patch+json",
        &json!([{"op": "test", "path": "/data/a", "value": "nope"}]),
    )
    .await;
    assert_eq!(bad.status, 422);
    let wrong_ct = patch(
        s.addr(),
        &format!("{CMS}/p"),
        "application/json",
        &json!({}),
    )
    .await;
    assert_eq!(wrong_ct.status, 415);
}

#[tokio::test]
async fn delete_with_finalizers_sets_deletion_timestamp_and_waits_for_them() {
    let s = server().await;
    post(
        s.addr(),
        CMS,
        &json!({"metadata": {"name": "f", "finalizers": ["x/y"]}}),
    )
    .await;
    let d = delete(s.addr(), &format!("{CMS}/f")).await;
    assert_eq!(d.status, 200);
    let still = get(s.addr(), &format!("{CMS}/f")).await;
    assert_eq!(still.status, 200);
    assert!(still.json()["metadata"]["deletionTimestamp"].is_string());
    let cleared = patch(
        s.addr(),
        &format!("{CMS}/f"),
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert_eq!(cleared.status, 200);
    assert_eq!(get(s.addr(), &format!("{CMS}/f")).await.status, 404);
}

#[tokio::test]
async fn create_in_missing_namespace_is_404() {
    let s = server().await;
    let r = post(
        s.addr(),
        "/api/v1/namespaces/nope/configmaps",
        &cm("a", json!({})),
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["message"], "namespaces \"nope\" not found");
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_objects() {
    let s = server().await;
    post(
        s.addr(),
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "tmp"}}),
    )
    .await;
    post(
        s.addr(),
        "/api/v1/namespaces/tmp/configmaps",
        &cm("a", json!({})),
    )
    .await;
    let r = delete(s.addr(), "/api/v1/namespaces/tmp").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"]["phase"], "Terminating");
    assert_eq!(
        get(s.addr(), "/api/v1/namespaces/tmp/configmaps/a")
            .await
            .status,
        404
    );
    // Terminating: still there, refusing new content in kube-apiserver's words.
    let r = post(
        s.addr(),
        "/api/v1/namespaces/tmp/configmaps",
        &cm("b", json!({})),
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        "configmaps \"b\" is forbidden: unable to create new content in namespace tmp because it is being terminated"
    );
    // Then removed, as the namespace controller does (2 s, by the 1 s maintenance tick).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let status = get(s.addr(), "/api/v1/namespaces/tmp").await.status;
        if status == 404 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            std::time::Instant::now() < deadline,
            "the namespace is still there after 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn list_pages_are_a_consistent_snapshot() {
    let s = server().await;
    for i in 0..5 {
        post(s.addr(), CMS, &cm(&format!("c{i}"), json!({}))).await;
    }
    let p1 = get(s.addr(), &format!("{CMS}?limit=2")).await.json();
    assert_eq!(p1["metadata"]["remainingItemCount"], 3);
    // Writes after the first page must not show up in later pages.
    post(s.addr(), CMS, &cm("c9", json!({}))).await;
    delete(s.addr(), &format!("{CMS}/c3")).await;
    let mut names: Vec<String> = Vec::new();
    let snapshot_rv = p1["metadata"]["resourceVersion"].clone();
    let mut page = p1;
    loop {
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned()),
        );
        let Some(c) = page["metadata"]["continue"].as_str() else {
            break;
        };
        page = get(s.addr(), &format!("{CMS}?limit=2&continue={c}"))
            .await
            .json();
        assert_eq!(page["metadata"]["resourceVersion"], snapshot_rv);
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4"]);
}

#[tokio::test]
async fn list_resource_version_zero_ignores_limit_like_the_watch_cache() {
    let s = server().await;
    for i in 0..4 {
        post(s.addr(), CMS, &cm(&format!("c{i}"), json!({}))).await;
    }
    let all = get(s.addr(), &format!("{CMS}?limit=2&resourceVersion=0"))
        .await
        .json();
    assert_eq!(all["items"].as_array().unwrap().len(), 4);
    assert!(all["metadata"].get("continue").is_none());
}

#[tokio::test]
async fn list_with_label_and_field_selectors() {
    let s = server().await;
    post(s.addr(), CMS, &cm("a", json!({"app": "web", "tier": "1"}))).await;
    post(s.addr(), CMS, &cm("b", json!({"app": "db"}))).await;
    post(s.addr(), CMS, &cm("c", json!({"tier": "2"}))).await;
    let names = |v: Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let q = |sel: &str| {
        format!(
            "{CMS}?labelSelector={}",
            sel.replace(' ', "%20")
                .replace('!', "%21")
                .replace('=', "%3D")
        )
    };
    assert_eq!(
        names(get(s.addr(), &q("app in (web,db)")).await.json()),
        ["a", "b"]
    );
    assert_eq!(names(get(s.addr(), &q("!app")).await.json()), ["c"]);
    assert_eq!(
        names(get(s.addr(), &q("app!=web")).await.json()),
        ["b", "c"]
    );
    assert_eq!(
        names(get(s.addr(), &q("tier notin (2)")).await.json()),
        ["a", "b"]
    );
    assert_eq!(
        names(
            get(s.addr(), &format!("{CMS}?fieldSelector=metadata.name%3Db"))
                .await
                .json()
        ),
        ["b"]
    );
}

#[tokio::test]
async fn watch_streams_added_modified_deleted_in_order() {
    let s = server().await;
    let start = post(s.addr(), CMS, &cm("w0", json!({}))).await.json();
    let mut w = Watch::open(
        s.addr(),
        &format!(
            "{CMS}?watch=1&resourceVersion={}&timeoutSeconds=5",
            rv(&start)
        ),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(w.status, 200);
    assert_eq!(w.headers.get("transfer-encoding").unwrap(), "chunked");
    post(s.addr(), CMS, &cm("w1", json!({}))).await;
    patch(
        s.addr(),
        &format!("{CMS}/w1"),
        "application/merge-patch+json",
        &json!({"data": {"k": "2"}}),
    )
    .await;
    let deleted = delete(s.addr(), &format!("{CMS}/w1")).await;
    assert_eq!(deleted.json()["status"], "Success");
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(w.next().await.unwrap());
    }
    assert_eq!(outline(&events), ["ADDED w1", "MODIFIED w1", "DELETED w1"]);
    assert!(
        rv(&events[2]["object"]) > rv(&events[1]["object"]),
        "DELETED carries the deletion RV"
    );
}

#[tokio::test]
async fn watch_without_resource_version_starts_with_synthetic_added() {
    let s = server().await;
    post(s.addr(), CMS, &cm("a", json!({}))).await;
    post(s.addr(), CMS, &cm("b", json!({}))).await;
    let mut w = Watch::open(s.addr(), &format!("{CMS}?watch=1&timeoutSeconds=1"), &[])
        .await
        .unwrap();
    assert_eq!(outline(&w.collect().await), ["ADDED a", "ADDED b"]);
}

#[tokio::test]
async fn watch_selector_exit_is_deleted_and_entry_is_added() {
    let s = server().await;
    let a = post(s.addr(), CMS, &cm("a", json!({"app": "fx"})))
        .await
        .json();
    post(s.addr(), CMS, &cm("b", json!({}))).await;
    let mut w = Watch::open(
        s.addr(),
        &format!(
            "{CMS}?watch=1&labelSelector=app%3Dfx&resourceVersion={}&timeoutSeconds=5",
            rv(&a)
        ),
        &[],
    )
    .await
    .unwrap();
    patch(
        s.addr(),
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"app": null}}}),
    )
    .await;
    patch(
        s.addr(),
        &format!("{CMS}/b"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"app": "fx"}}}),
    )
    .await;
    let e1 = w.next().await.unwrap();
    let e2 = w.next().await.unwrap();
    assert_eq!(outline(&[e1.clone(), e2]), ["DELETED a", "ADDED b"]);
    assert_eq!(
        e1["object"]["metadata"]["labels"]["app"], "fx",
        "the DELETED carries the previous content"
    );
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_the_annotated_bookmark() {
    let s = server().await;
    post(s.addr(), CMS, &cm("a", json!({}))).await;
    let mut w = Watch::open(s.addr(), &format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"), &[]).await.unwrap();
    let events = w.collect().await;
    assert_eq!(outline(&events), ["ADDED a", "BOOKMARK"]);
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(events[1]["object"]["kind"], "ConfigMap");
}

#[tokio::test]
async fn watch_from_expired_resource_version_is_200_then_one_error_event() {
    let s = ApiServer::builder()
        .history_events(2)
        .build()
        .start()
        .await
        .unwrap();
    let first = post(s.addr(), CMS, &cm("a", json!({}))).await.json();
    for i in 0..5 {
        patch(
            s.addr(),
            &format!("{CMS}/a"),
            "application/merge-patch+json",
            &json!({"data": {"k": i.to_string()}}),
        )
        .await;
    }
    let mut w = Watch::open(
        s.addr(),
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&first)),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(w.status, 200);
    let events = w.collect().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
    assert!(
        events[0]["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("too old resource version: {} (", rv(&first)))
    );
}

#[tokio::test]
async fn list_exact_at_expired_resource_version_is_410() {
    let s = ApiServer::builder()
        .history_events(1)
        .build()
        .start()
        .await
        .unwrap();
    let first = post(s.addr(), CMS, &cm("a", json!({}))).await.json();
    post(s.addr(), CMS, &cm("b", json!({}))).await;
    post(s.addr(), CMS, &cm("c", json!({}))).await;
    let r = get(
        s.addr(),
        &format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&first)
        ),
    )
    .await;
    assert_eq!(r.status, 410);
    assert_eq!(
        r.json()["message"],
        "The resourceVersion for the provided list is too old."
    );
}

#[tokio::test(start_paused = true)]
async fn list_at_too_large_resource_version_is_504_with_retry_after() {
    let s = server().await;
    let r = get(s.addr(), &format!("{CMS}?resourceVersion=99999999")).await;
    assert_eq!(r.status, 504);
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    assert_eq!(
        r.json()["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}

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
