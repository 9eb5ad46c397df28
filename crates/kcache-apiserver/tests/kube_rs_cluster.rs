//! What kube-rs's own cluster tests (scripts/kube-rs-cluster-tests.sh) found different from
//! kube-apiserver v1.36, pinned over HTTP: a boolean field selector (`spec.unschedulable`) of a
//! Node that does not set the field, and the `componentstatuses` a cluster answers.

mod common;

use common::{get, patch, post};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::json;

async fn server() -> RunningServer {
    ApiServer::builder().start().await.expect("server starts")
}

fn names(list: &serde_json::Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// kube-client's `node_cordon_and_uncordon_works`: kube-apiserver formats a missing boolean
/// field as `false` (`spec.unschedulable` of nodes, `spec.hostNetwork` of pods).
#[tokio::test]
async fn a_missing_boolean_field_is_false_for_field_selectors() {
    let s = server().await;
    let r = post(
        s.addr(),
        "/api/v1/nodes",
        &json!({"metadata": {"name": "n"}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json());
    let schedulable = "/api/v1/nodes?fieldSelector=spec.unschedulable%3D%3Dfalse";
    let unschedulable = "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue";
    assert_eq!(names(&get(s.addr(), schedulable).await.json()), ["n"]);
    assert!(names(&get(s.addr(), unschedulable).await.json()).is_empty());
    let cordon = json!({"spec": {"unschedulable": true}});
    let r = patch(
        s.addr(),
        "/api/v1/nodes/n",
        "application/merge-patch+json",
        &cordon,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert!(names(&get(s.addr(), schedulable).await.json()).is_empty());
    assert_eq!(names(&get(s.addr(), unschedulable).await.json()), ["n"]);

    let pods = "/api/v1/namespaces/default/pods";
    let p = json!({"metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(post(s.addr(), pods, &p).await.status, 201);
    let host = format!("{pods}?fieldSelector=spec.hostNetwork%3Dfalse");
    assert_eq!(names(&get(s.addr(), &host).await.json()), ["p"]);
}

/// kube-runtime's `event_recorder_attaches_events_without_namespace` gets the `scheduler`
/// ComponentStatus; kube-apiserver answers `scheduler`, `controller-manager` and `etcd-0`.
#[tokio::test]
async fn componentstatuses_answer_the_control_plane_components() {
    let s = server().await;
    let list = get(s.addr(), "/api/v1/componentstatuses").await;
    assert_eq!(list.status, 200, "{}", list.json());
    let mut got = names(&list.json());
    got.sort();
    assert_eq!(got, ["controller-manager", "etcd-0", "scheduler"]);
    let r = get(s.addr(), "/api/v1/componentstatuses/scheduler").await;
    assert_eq!(r.status, 200, "{}", r.json());
    let cs = r.json();
    assert_eq!(cs["kind"], "ComponentStatus");
    assert_eq!(cs["conditions"][0]["type"], "Healthy");
    let etcd = get(s.addr(), "/api/v1/componentstatuses/etcd-0")
        .await
        .json();
    assert_eq!(etcd["conditions"][0]["status"], "True");
}
