//! Writes: creates, updates, generation, the status subresource, patches, finalizers and missing
//! namespaces.

use super::*;

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
