//! Owner references that do not resolve to a live owner, scopes, and DeleteOptions checks.

use serde_json::json;

use super::common::{delete, get};
use super::{
    CMS, collector_has_run, config_map, create, delete_with, gone, must_get, owner_ref, server,
};

#[tokio::test]
async fn a_dependent_whose_owner_never_existed_or_has_another_uid_is_deleted() {
    let s = server().await;
    let a = s.addr();
    let missing = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                         "uid": "5f0c6a52-0000-4000-8000-000000000001"});
    create(a, CMS, &config_map("orphaned", &[missing], &[])).await;
    gone(a, &format!("{CMS}/orphaned")).await;
    // The name exists, the uid is another object's (deleted and recreated owner).
    let owner = create(a, CMS, &config_map("owner", &[], &[])).await;
    let mut stale = owner_ref(&owner, true);
    stale["uid"] = json!("5f0c6a52-0000-4000-8000-000000000002");
    create(a, CMS, &config_map("stale", &[stale], &[])).await;
    gone(a, &format!("{CMS}/stale")).await;
    must_get(a, &format!("{CMS}/owner")).await;
}

#[tokio::test]
async fn a_dependent_with_a_live_owner_only_loses_the_dangling_reference() {
    let s = server().await;
    let a = s.addr();
    let alive = create(a, CMS, &config_map("alive", &[], &[])).await;
    let missing = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                         "uid": "5f0c6a52-0000-4000-8000-000000000003"});
    create(
        a,
        CMS,
        &config_map("dep", &[owner_ref(&alive, false), missing], &[]),
    )
    .await;
    collector_has_run(a).await;
    let dep = must_get(a, &format!("{CMS}/dep")).await;
    assert_eq!(
        dep["metadata"]["ownerReferences"],
        json!([owner_ref(&alive, false)])
    );
    // Once the last owner goes too, the dependent goes.
    assert_eq!(delete(a, &format!("{CMS}/alive")).await.status, 200);
    gone(a, &format!("{CMS}/dep")).await;
}

#[tokio::test]
async fn namespaced_dependents_may_have_cluster_scoped_owners() {
    let s = server().await;
    let a = s.addr();
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let role = create(
        a,
        roles,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "owner-role"}, "rules": []}),
    )
    .await;
    create(
        a,
        CMS,
        &config_map("of-role", &[owner_ref(&role, false)], &[]),
    )
    .await;
    // A cluster-scoped dependent of a cluster-scoped owner too.
    let dep_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "dep-role", "ownerReferences": [owner_ref(&role, false)]},
        "rules": []});
    create(a, roles, &dep_role).await;
    collector_has_run(a).await;
    must_get(a, &format!("{CMS}/of-role")).await;
    assert_eq!(delete(a, &format!("{roles}/owner-role")).await.status, 200);
    gone(a, &format!("{CMS}/of-role")).await;
    gone(a, &format!("{roles}/dep-role")).await;
}

#[tokio::test]
async fn a_cluster_scoped_dependent_naming_a_namespaced_owner_is_never_collected() {
    let s = server().await;
    let a = s.addr();
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let cm_owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                          "uid": "5f0c6a52-0000-4000-8000-000000000004"});
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "invalid-ref", "ownerReferences": [cm_owner]}, "rules": []});
    create(a, roles, &role).await;
    // An owner of a kind no server serves: uncollectable as well.
    let unknown = json!({"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                         "uid": "5f0c6a52-0000-4000-8000-000000000005"});
    create(a, CMS, &config_map("unknown-kind", &[unknown], &[])).await;
    collector_has_run(a).await;
    must_get(a, &format!("{roles}/invalid-ref")).await;
    must_get(a, &format!("{CMS}/unknown-kind")).await;
}

#[tokio::test]
async fn namespaced_owners_resolve_in_the_dependents_namespace() {
    let s = server().await;
    let a = s.addr();
    create(
        a,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}),
    )
    .await;
    let owner = create(a, CMS, &config_map("owner", &[], &[])).await;
    let other_cms = "/api/v1/namespaces/other/configmaps";
    // Same name and uid as a live owner, but in another namespace: treated as absent.
    create(
        a,
        other_cms,
        &config_map("across", &[owner_ref(&owner, false)], &[]),
    )
    .await;
    gone(a, &format!("{other_cms}/across")).await;
    must_get(a, &format!("{CMS}/owner")).await;
}

#[tokio::test]
async fn delete_options_are_checked_as_kube_apiserver_does() {
    let s = server().await;
    let a = s.addr();
    create(a, CMS, &config_map("x", &[], &[])).await;
    let both = json!({"propagationPolicy": "Orphan", "orphanDependents": true});
    let r = delete_with(a, &format!("{CMS}/x"), &both).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        r.json()["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Orphan\": \
         orphanDependents and deletionPropagation cannot be both set"
    );
    let r = delete(a, &format!("{CMS}/x?propagationPolicy=Sideways")).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        r.json()["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
    // The options are judged before the object is looked up (kube-apiserver's handler).
    let r = delete_with(a, &format!("{CMS}/missing"), &both).await;
    assert_eq!(r.status, 422);
    // A dry run with a policy leaves the object as it was.
    let r = delete_with(
        a,
        &format!("{CMS}/x?dryRun=All"),
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    let x = must_get(a, &format!("{CMS}/x")).await;
    assert!(x["metadata"].get("deletionTimestamp").is_none(), "{x}");
    assert_eq!(get(a, &format!("{CMS}/x")).await.status, 200);
}

#[tokio::test]
async fn a_second_delete_may_change_the_policy_of_a_pending_deletion() {
    let s = kcache_apiserver::ApiServer::builder()
        .garbage_collector(false)
        .build()
        .start()
        .await
        .expect("server starts");
    let a = s.addr();
    create(a, CMS, &config_map("held", &[], &["example.com/hold"])).await;
    let path = format!("{CMS}/held");
    let r = delete_with(a, &path, &json!({"propagationPolicy": "Orphan"})).await;
    assert_eq!(
        r.json()["metadata"]["finalizers"],
        json!(["example.com/hold", "orphan"])
    );
    let r = delete_with(a, &path, &json!({"propagationPolicy": "Foreground"})).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(
        r.json()["metadata"]["finalizers"],
        json!(["example.com/hold", "foregroundDeletion"])
    );
    // Without options, the finalizers already there decide: nothing changes.
    let r = delete(a, &path).await;
    assert_eq!(
        r.json()["metadata"]["finalizers"],
        json!(["example.com/hold", "foregroundDeletion"])
    );
    let r = delete_with(a, &path, &json!({"propagationPolicy": "Background"})).await;
    assert_eq!(
        r.json()["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );
}

#[tokio::test]
async fn namespace_deletion_deletes_its_contents_in_the_background() {
    // Without a collector, an orphaning default (ReplicationControllers) would leave the
    // `orphan` finalizer on the contents and the namespace Terminating for ever; the namespace
    // controller deletes them with propagationPolicy Background.
    let s = kcache_apiserver::ApiServer::builder()
        .garbage_collector(false)
        .build()
        .start()
        .await
        .expect("server starts");
    let a = s.addr();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}});
    create(a, "/api/v1/namespaces", &ns).await;
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "rc"},
        "spec": {"replicas": 0, "selector": {"app": "x"},
                 "template": {"metadata": {"labels": {"app": "x"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    create(a, "/api/v1/namespaces/doomed/replicationcontrollers", &rc).await;
    assert_eq!(delete(a, "/api/v1/namespaces/doomed").await.status, 200);
    gone(a, "/api/v1/namespaces/doomed/replicationcontrollers/rc").await;
    gone(a, "/api/v1/namespaces/doomed").await;
}
