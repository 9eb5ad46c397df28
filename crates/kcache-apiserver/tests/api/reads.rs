//! Namespace deletion, lists (pages, snapshots, selectors, resourceVersions) and watches.

use super::*;

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
