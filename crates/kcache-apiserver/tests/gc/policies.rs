//! The three propagation policies, a kind's default one, and the collector turned off.

use serde_json::json;

use super::common::{delete, get, patch};
use super::{
    CMS, SECRETS, collector_has_run, config_map, create, delete_with, gone, must_get, owner_ref,
    server, until,
};

#[tokio::test]
async fn background_deletion_collects_dependents_and_their_dependents() {
    let s = server().await;
    let a = s.addr();
    let owner = create(a, CMS, &config_map("owner", &[], &[])).await;
    let child = create(
        a,
        CMS,
        &config_map("child", &[owner_ref(&owner, false)], &[]),
    )
    .await;
    create(
        a,
        CMS,
        &config_map("grandchild", &[owner_ref(&child, true)], &[]),
    )
    .await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "owned-secret", "ownerReferences": [owner_ref(&owner, false)]}});
    create(a, SECRETS, &secret).await;
    // A plain DELETE of the owner answers the Status at once: the owner is gone, then its
    // dependents of any kind, then theirs.
    let r = delete(a, &format!("{CMS}/owner")).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["kind"], "Status");
    assert_eq!(get(a, &format!("{CMS}/owner")).await.status, 404);
    gone(a, &format!("{CMS}/child")).await;
    gone(a, &format!("{SECRETS}/owned-secret")).await;
    gone(a, &format!("{CMS}/grandchild")).await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents_then_deletes_the_owner() {
    let s = server().await;
    let a = s.addr();
    let owner = create(a, CMS, &config_map("owner", &[], &[])).await;
    let held = config_map("held", &[owner_ref(&owner, true)], &["example.com/hold"]);
    create(a, CMS, &held).await;
    create(
        a,
        CMS,
        &config_map("loose", &[owner_ref(&owner, false)], &[]),
    )
    .await;
    let r = delete_with(
        a,
        &format!("{CMS}/owner"),
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    // The answer is the owner, kept with the foregroundDeletion finalizer.
    let answer = r.json();
    assert_eq!(answer["kind"], "ConfigMap");
    assert_eq!(
        answer["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert!(answer["metadata"]["deletionTimestamp"].is_string());
    // Every dependent is deleted; "held" stays marked for its own finalizer and, as it
    // blocks the owner's deletion, so does the owner.
    gone(a, &format!("{CMS}/loose")).await;
    until(a, &format!("{CMS}/held"), "marked for deletion", |v| {
        v["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    collector_has_run(a).await;
    let still = must_get(a, &format!("{CMS}/owner")).await;
    assert_eq!(
        still["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    // Releasing the blocking dependent lets the owner go.
    let release = json!({"metadata": {"finalizers": null}});
    let r = patch(
        a,
        &format!("{CMS}/held"),
        "application/merge-patch+json",
        &release,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    gone(a, &format!("{CMS}/held")).await;
    gone(a, &format!("{CMS}/owner")).await;
}

#[tokio::test]
async fn foreground_deletion_without_blocking_dependents_deletes_the_owner_first() {
    let s = server().await;
    let a = s.addr();
    let owner = create(a, CMS, &config_map("owner", &[], &[])).await;
    let loose = config_map("loose", &[owner_ref(&owner, false)], &["example.com/hold"]);
    create(a, CMS, &loose).await;
    let opts = json!({"propagationPolicy": "Foreground"});
    assert_eq!(
        delete_with(a, &format!("{CMS}/owner"), &opts).await.status,
        200
    );
    // Nothing blocks: the owner goes though its dependent is still held by its finalizer.
    gone(a, &format!("{CMS}/owner")).await;
    let dep = until(a, &format!("{CMS}/loose"), "marked for deletion", |v| {
        v["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    assert_eq!(dep["metadata"]["finalizers"], json!(["example.com/hold"]));
}

#[tokio::test]
async fn foreground_deletion_goes_down_a_chain_of_blocking_dependents() {
    let s = server().await;
    let a = s.addr();
    let top = create(a, CMS, &config_map("top", &[], &[])).await;
    let mid = create(a, CMS, &config_map("mid", &[owner_ref(&top, true)], &[])).await;
    let leaf = config_map("leaf", &[owner_ref(&mid, true)], &["example.com/hold"]);
    create(a, CMS, &leaf).await;
    let opts = json!({"propagationPolicy": "Foreground"});
    assert_eq!(
        delete_with(a, &format!("{CMS}/top"), &opts).await.status,
        200
    );
    // "mid" has a dependent of its own: it is deleted in the foreground too, and waits for
    // "leaf", which waits for its finalizer; "top" waits for "mid".
    let mid_now = until(a, &format!("{CMS}/mid"), "deleted in the foreground", |v| {
        v["metadata"]["finalizers"] == json!(["foregroundDeletion"])
    })
    .await;
    assert!(mid_now["metadata"]["deletionTimestamp"].is_string());
    until(a, &format!("{CMS}/leaf"), "marked for deletion", |v| {
        v["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    collector_has_run(a).await;
    must_get(a, &format!("{CMS}/top")).await;
    let release = json!({"metadata": {"finalizers": null}});
    let r = patch(
        a,
        &format!("{CMS}/leaf"),
        "application/merge-patch+json",
        &release,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    gone(a, &format!("{CMS}/leaf")).await;
    gone(a, &format!("{CMS}/mid")).await;
    gone(a, &format!("{CMS}/top")).await;
}

#[tokio::test]
async fn orphan_deletion_strips_the_references_then_deletes_the_owner() {
    let s = server().await;
    let a = s.addr();
    let owner = create(a, CMS, &config_map("owner", &[], &[])).await;
    let other = create(a, CMS, &config_map("other", &[], &[])).await;
    create(a, CMS, &config_map("only", &[owner_ref(&owner, true)], &[])).await;
    let shared = config_map(
        "shared",
        &[owner_ref(&owner, false), owner_ref(&other, false)],
        &[],
    );
    create(a, CMS, &shared).await;
    let r = delete_with(
        a,
        &format!("{CMS}/owner"),
        &json!({"propagationPolicy": "Orphan"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["orphan"]));
    gone(a, &format!("{CMS}/owner")).await;
    let only = must_get(a, &format!("{CMS}/only")).await;
    assert!(only["metadata"].get("ownerReferences").is_none(), "{only}");
    let shared = must_get(a, &format!("{CMS}/shared")).await;
    assert_eq!(
        shared["metadata"]["ownerReferences"],
        json!([owner_ref(&other, false)])
    );
    // The collector's write is recorded under its own manager.
    let managers: Vec<&str> = shared["metadata"]["managedFields"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["manager"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        managers.contains(&"kube-controller-manager"),
        "{managers:?}"
    );
    collector_has_run(a).await;
    must_get(a, &format!("{CMS}/only")).await;
}

#[tokio::test]
async fn orphan_dependents_and_the_query_parameter_orphan_too() {
    let s = server().await;
    let a = s.addr();
    for (name, how) in [("by-body", "body"), ("by-query", "query")] {
        let owner = create(a, CMS, &config_map(name, &[], &[])).await;
        let dep = format!("{name}-dep");
        create(a, CMS, &config_map(&dep, &[owner_ref(&owner, false)], &[])).await;
        let r = if how == "body" {
            delete_with(
                a,
                &format!("{CMS}/{name}"),
                &json!({"orphanDependents": true}),
            )
            .await
        } else {
            delete(a, &format!("{CMS}/{name}?propagationPolicy=Orphan")).await
        };
        assert_eq!(r.status, 200, "{}", r.json());
        assert_eq!(
            r.json()["metadata"]["finalizers"],
            json!(["orphan"]),
            "{how}"
        );
        gone(a, &format!("{CMS}/{name}")).await;
        let kept = must_get(a, &format!("{CMS}/{dep}")).await;
        assert!(
            kept["metadata"].get("ownerReferences").is_none(),
            "{how}: {kept}"
        );
    }
}

#[tokio::test]
async fn replication_controllers_orphan_their_pods_by_default() {
    let s = server().await;
    let a = s.addr();
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "rc"},
        "spec": {"replicas": 1, "selector": {"app": "x"},
                 "template": {"metadata": {"labels": {"app": "x"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let rc = create(a, rcs, &rc).await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x"},
                     "ownerReferences": [owner_ref(&rc, true)]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    create(a, pods, &pod).await;
    let r = delete(a, &format!("{rcs}/rc")).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["orphan"]));
    gone(a, &format!("{rcs}/rc")).await;
    let p = must_get(a, &format!("{pods}/p")).await;
    assert!(p["metadata"].get("ownerReferences").is_none(), "{p}");
    // A Deployment (apps/v1) deletes its dependents by default.
    let deploys = "/apis/apps/v1/namespaces/default/deployments";
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "y"}},
                 "template": {"metadata": {"labels": {"app": "y"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let d = create(a, deploys, &d).await;
    create(a, CMS, &config_map("of-d", &[owner_ref(&d, true)], &[])).await;
    let r = delete(a, &format!("{deploys}/d")).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["kind"], "Status");
    gone(a, &format!("{CMS}/of-d")).await;
}

#[tokio::test]
async fn with_the_collector_off_nothing_is_collected_and_gc_finalizers_stay() {
    let s = kcache_apiserver::ApiServer::builder()
        .garbage_collector(false)
        .build()
        .start()
        .await
        .expect("server starts");
    let a = s.addr();
    let owner = create(a, CMS, &config_map("owner", &[], &[])).await;
    create(a, CMS, &config_map("dep", &[owner_ref(&owner, true)], &[])).await;
    let fg = create(a, CMS, &config_map("fg", &[], &[])).await;
    create(a, CMS, &config_map("fg-dep", &[owner_ref(&fg, true)], &[])).await;
    assert_eq!(delete(a, &format!("{CMS}/owner")).await.status, 200);
    let opts = json!({"propagationPolicy": "Foreground"});
    assert_eq!(
        delete_with(a, &format!("{CMS}/fg"), &opts).await.status,
        200
    );
    // Give a collector, were one running, ample time.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let dep = must_get(a, &format!("{CMS}/dep")).await;
    assert_eq!(dep["metadata"]["ownerReferences"][0]["name"], "owner");
    let fg = must_get(a, &format!("{CMS}/fg")).await;
    assert_eq!(fg["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    must_get(a, &format!("{CMS}/fg-dep")).await;
}
