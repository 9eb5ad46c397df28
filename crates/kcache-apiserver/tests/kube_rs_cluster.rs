//! What kube-rs's own cluster tests (scripts/kube-rs-cluster-tests.sh) found different from
//! kube-apiserver v1.36, pinned over HTTP: a boolean field selector (`spec.unschedulable`) of a
//! Node that does not set the field, and the `componentstatuses` a cluster answers.

mod common;

use common::{get, patch, post};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::json;

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
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

/// kube's `derived_resource_queryable_and_has_subresources`: a custom resource's `scale`
/// subresource, at the paths its CRD names.
#[tokio::test]
async fn a_custom_resource_scale_reads_and_writes_the_paths_of_its_crd() {
    let s = server().await;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.clux.dev"},
        "spec": {"group": "clux.dev", "scope": "Namespaced",
                 "names": {"kind": "Foo", "plural": "foos", "singular": "foo"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}},
                    "subresources": {"status": {}, "scale": {
                        "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.ready",
                        "labelSelectorPath": ".status.selector"}}}]}});
    let r = post(
        s.addr(),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json());
    let foos = "/apis/clux.dev/v1/namespaces/default/foos";
    let foo = json!({"apiVersion": "clux.dev/v1", "kind": "Foo", "metadata": {"name": "baz"},
                     "spec": {"size": 2}});
    let r = post(s.addr(), foos, &foo).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let status = json!({"status": {"ready": 1, "selector": "app=baz"}});
    let merge = "application/merge-patch+json";
    let r = patch(s.addr(), &format!("{foos}/baz/status"), merge, &status).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let r = get(s.addr(), &format!("{foos}/baz/scale")).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let scale = r.json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(
        scale["status"],
        json!({"replicas": 1, "selector": "app=baz"})
    );
    let r = patch(
        s.addr(),
        &format!("{foos}/baz/scale"),
        merge,
        &json!({"spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["spec"]["replicas"], 3);
    let foo = get(s.addr(), &format!("{foos}/baz")).await.json();
    assert_eq!(foo["spec"]["size"], 3);
    assert!(foo["spec"].get("replicas").is_none(), "{foo}");
}

/// kube-client's `client_ext_list_get_pods_svcs` gets the `cluster-admin` ClusterRole that
/// kube-apiserver's RBAC bootstrap creates (with its binding to `system:masters`).
#[tokio::test]
async fn the_cluster_admin_role_and_binding_exist_from_the_start() {
    let s = server().await;
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let r = get(s.addr(), &format!("{rbac}/clusterroles/cluster-admin")).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let role = r.json();
    assert_eq!(
        role["rules"],
        json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
               {"verbs": ["*"], "nonResourceURLs": ["*"]}])
    );
    assert_eq!(
        role["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );
    let r = get(
        s.addr(),
        &format!("{rbac}/clusterrolebindings/cluster-admin"),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    let binding = r.json();
    assert_eq!(binding["subjects"][0]["name"], "system:masters");
    assert_eq!(binding["roleRef"]["name"], "cluster-admin");
}
