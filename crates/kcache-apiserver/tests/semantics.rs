//! Write semantics a controller test suite relies on, as kube-apiserver v1.36 has them: what a
//! status write keeps of the metadata, the resourceVersion of a dry-run update, a JSON patch
//! `test` of a missing path against null (kube-rs's finalizer helper), dry-run collection
//! deletes, and namespace deletion waiting for the finalizers of the objects inside.

mod common;

use std::time::Duration;

use common::{delete, get, patch, post, put, request};
use http::Method;
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::json;

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";

#[tokio::test]
async fn a_status_merge_patch_keeps_metadata_changes_as_each_kind_strategy_does() {
    let s = server().await;
    let pods = "/api/v1/namespaces/default/pods";
    let p = json!({"metadata": {"name": "p", "labels": {"a": "1"}},
                   "spec": {"containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(post(s.addr(), pods, &p).await.status, 201);
    let change = json!({"metadata": {"labels": {"b": "2"}, "annotations": {"x": "y"},
                                     "finalizers": ["example.com/f"]},
                        "status": {"message": "hi"}});
    let r = patch(s.addr(), &format!("{pods}/p/status"), MERGE, &change).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let p = r.json();
    assert_eq!(p["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    assert_eq!(p["metadata"]["annotations"], json!({"x": "y"}));
    assert_eq!(p["metadata"]["finalizers"], json!(["example.com/f"]));
    assert_eq!(p["status"]["message"], "hi");
    // A Deployment's status strategy keeps the old labels, not the old annotations.
    let deploys = "/apis/apps/v1/namespaces/default/deployments";
    let d = json!({"metadata": {"name": "d", "labels": {"a": "1"}},
                   "spec": {"selector": {"matchLabels": {"app": "w"}},
                            "template": {"metadata": {"labels": {"app": "w"}},
                                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    assert_eq!(post(s.addr(), deploys, &d).await.status, 201);
    let change = json!({"metadata": {"labels": {"b": "2"}, "annotations": {"x": "y"}},
                        "status": {"replicas": 2}});
    let r = patch(s.addr(), &format!("{deploys}/d/status"), MERGE, &change).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let d = r.json();
    assert_eq!(d["metadata"]["labels"], json!({"a": "1"}));
    assert_eq!(d["metadata"]["annotations"], json!({"x": "y"}));
    assert_eq!(d["status"]["replicas"], 2);
}

#[tokio::test]
async fn a_dry_run_update_answers_the_current_resource_version() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let r = post(s.addr(), cms, &json!({"metadata": {"name": "a"}})).await;
    let rv = r.json()["metadata"]["resourceVersion"].clone();
    let r = put(
        s.addr(),
        &format!("{cms}/a?dryRun=All"),
        &json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["metadata"]["resourceVersion"], rv);
    assert_eq!(r.json()["data"]["k"], "v");
    let r = patch(
        s.addr(),
        &format!("{cms}/a?dryRun=All"),
        MERGE,
        &json!({"data": {"k": "w"}}),
    )
    .await;
    assert_eq!(r.json()["metadata"]["resourceVersion"], rv);
    assert!(
        get(s.addr(), &format!("{cms}/a"))
            .await
            .json()
            .get("data")
            .is_none()
    );
}

#[tokio::test]
async fn a_json_patch_test_of_a_missing_path_against_null_passes() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_eq!(
        post(s.addr(), cms, &json!({"metadata": {"name": "a"}}))
            .await
            .status,
        201
    );
    // What kube-rs's finalizer() sends to add the first finalizer.
    let ops = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]},
    ]);
    let r = patch(s.addr(), &format!("{cms}/a"), JSON_PATCH, &ops).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["example.com/f"]));
    // A test that does not hold still fails the whole patch.
    let ops = json!([
        {"op": "test", "path": "/metadata/labels", "value": {"a": "b"}},
        {"op": "add", "path": "/metadata/labels", "value": {"c": "d"}},
    ]);
    let r = patch(s.addr(), &format!("{cms}/a"), JSON_PATCH, &ops).await;
    assert_eq!(r.status, 422);
    let ops = json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]);
    let r = patch(s.addr(), &format!("{cms}/a"), JSON_PATCH, &ops).await;
    assert_eq!(r.status, 422, "the path exists: not null");
}

#[tokio::test]
async fn a_dry_run_collection_delete_deletes_nothing() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    for n in ["a", "b"] {
        assert_eq!(
            post(s.addr(), cms, &json!({"metadata": {"name": n}}))
                .await
                .status,
            201
        );
    }
    let opts = json!({"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]});
    let r = request(
        s.addr(),
        Method::DELETE,
        cms,
        &[("content-type", "application/json")],
        Some(serde_json::to_vec(&opts).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 2);
    let r = delete(s.addr(), &format!("{cms}?dryRun=All")).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        get(s.addr(), cms).await.json()["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn namespace_deletion_waits_for_the_finalizers_of_its_objects() {
    let s = server().await;
    let r = post(
        s.addr(),
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "held"}}),
    )
    .await;
    assert_eq!(r.status, 201);
    let cms = "/api/v1/namespaces/held/configmaps";
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/f"]}});
    assert_eq!(post(s.addr(), cms, &held).await.status, 201);
    assert_eq!(
        post(s.addr(), cms, &json!({"metadata": {"name": "free"}}))
            .await
            .status,
        201
    );
    assert_eq!(
        delete(s.addr(), "/api/v1/namespaces/held").await.status,
        200
    );
    // Past the namespace's termination delay: the held object is only marked, the free one
    // gone, the namespace still Terminating.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let cm = get(s.addr(), &format!("{cms}/held")).await;
    assert_eq!(cm.status, 200, "an object with finalizers stays");
    assert!(cm.json()["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(get(s.addr(), &format!("{cms}/free")).await.status, 404);
    let ns = get(s.addr(), "/api/v1/namespaces/held").await;
    assert_eq!(ns.status, 200);
    assert_eq!(ns.json()["status"]["phase"], "Terminating");
    // Releasing the finalizer lets the namespace go.
    let r = patch(
        s.addr(),
        &format!("{cms}/held"),
        MERGE,
        &json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert_eq!(r.status, 200);
    let mut gone = false;
    for _ in 0..40 {
        if get(s.addr(), "/api/v1/namespaces/held").await.status == 404 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the namespace is removed once it is empty");
}

#[tokio::test]
async fn invalid_objects_of_common_kinds_are_refused_in_kube_apiserver_words() {
    let s = server().await;
    let cases = [
        (
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
            "Pod \"p\" is invalid: spec.containers[0].image: Required value",
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "c", "labels": {"a": "not valid!"}}}),
            "ConfigMap \"c\" is invalid: metadata.labels: Invalid value: \"not valid!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            json!({"metadata": {"name": "rb"}}),
            "RoleBinding.rbac.authorization.k8s.io \"rb\" is invalid: [roleRef.kind: Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\", roleRef.name: Required value]",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": []}}}}),
            // kube-apiserver v1.36.5 also asks for the template's restartPolicy.
            "Job.batch \"j\" is invalid: [spec.template.spec.containers: Required value, \
             spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"]",
        ),
    ];
    for (path, body, message) in cases {
        let r = post(s.addr(), path, &body).await;
        assert_eq!(r.status, 422, "{path}: {}", r.json());
        assert_eq!(r.json()["message"], message);
    }
}

#[tokio::test]
async fn server_side_apply_releases_what_a_manager_stops_applying_and_keeps_others_fields() {
    let s = server().await;
    let cm = "/api/v1/namespaces/default/configmaps/cfg";
    let apply = |labels: serde_json::Value, data: serde_json::Value| {
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "labels": labels}, "data": data}))
        .unwrap()
    };
    let ct = [("content-type", "application/apply-patch+yaml")];
    let r = request(
        s.addr(),
        Method::PATCH,
        &format!("{cm}?fieldManager=one"),
        &ct,
        Some(apply(
            json!({"a": "1", "b": "2"}),
            json!({"x": "1", "y": "2"}),
        )),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201);
    let r = patch(
        s.addr(),
        &format!("{cm}?fieldManager=two"),
        MERGE,
        &json!({"metadata": {"labels": {"c": "3"}}, "data": {"z": "3"}}),
    )
    .await;
    assert_eq!(r.status, 200);
    let r = request(
        s.addr(),
        Method::PATCH,
        &format!("{cm}?fieldManager=one"),
        &ct,
        Some(apply(json!({"a": "1"}), json!({"x": "1"}))),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    let cm = r.json();
    assert_eq!(cm["metadata"]["labels"], json!({"a": "1", "c": "3"}));
    assert_eq!(cm["data"], json!({"x": "1", "z": "3"}));
}

/// Server-side apply keys list items as the schema's `x-kubernetes-list-map-keys` do: a
/// Service's ports by port and protocol, so 53/TCP and 53/UDP are two fields, and a manager
/// that stops applying one releases that one only (kube-apiserver removes it).
#[tokio::test]
async fn server_side_apply_keys_service_ports_by_port_and_protocol() {
    let s = server().await;
    let svc = "/api/v1/namespaces/default/services/dns";
    let apply = |ports: serde_json::Value| {
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "dns"}, "spec": {"selector": {"app": "dns"}, "ports": ports}}))
        .unwrap()
    };
    let ct = [("content-type", "application/apply-patch+yaml")];
    let both = json!([{"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                      {"name": "dns", "port": 53, "protocol": "UDP"}]);
    let r = request(
        s.addr(),
        Method::PATCH,
        &format!("{svc}?fieldManager=one"),
        &ct,
        Some(apply(both)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.json());
    let fields = &r.json()["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:ports"];
    let keys: Vec<&String> = fields.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            r#"k:{"port":53,"protocol":"TCP"}"#,
            r#"k:{"port":53,"protocol":"UDP"}"#
        ]
    );
    let udp = json!([{"name": "dns", "port": 53, "protocol": "UDP"}]);
    let r = request(
        s.addr(),
        Method::PATCH,
        &format!("{svc}?fieldManager=one"),
        &ct,
        Some(apply(udp)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.json());
    let ports = r.json()["spec"]["ports"].clone();
    assert_eq!(ports.as_array().unwrap().len(), 1, "{ports}");
    assert_eq!(ports[0]["protocol"], "UDP");
}
