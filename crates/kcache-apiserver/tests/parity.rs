//! What controller-runtime v0.25.3's pkg/client and pkg/cache suites found different from
//! kube-apiserver v1.36.5, pinned over HTTP: RBAC object names checked as path segments only,
//! the answer of a PUT that removes the last finalizer of a deleting object, CRD versions in
//! discovery in Kubernetes version priority, and a server without the `default`
//! ServiceAccount controller (a bare kube-apiserver, as envtest runs it).

mod common;

use common::{delete, get, post, put};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

fn causes(r: &common::Resp) -> Vec<String> {
    r.json()["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{}: {}", c["field"].as_str().unwrap_or(""), c["message"]))
        .collect()
}

/// kube-apiserver's `ValidateRBACName`: mixed case is fine, `.`, `..`, `/` and `%` are not.
#[tokio::test]
async fn rbac_names_are_checked_as_path_segments() {
    let s = server().await;
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let r = post(
        s.addr(),
        roles,
        &json!({"metadata": {"name": "clusterRole-10"}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json());
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let rb = json!({"metadata": {"name": "Binding_With:Colons"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "clusterRole-10"}});
    let r = post(s.addr(), bindings, &rb).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let r = post(s.addr(), roles, &json!({"metadata": {"name": "a/b%c"}})).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        causes(&r),
        [
            "metadata.name: \"Invalid value: \\\"a/b%c\\\": may not contain '/'\"",
            "metadata.name: \"Invalid value: \\\"a/b%c\\\": may not contain '%'\""
        ]
    );
    let r = post(s.addr(), roles, &json!({"metadata": {"name": ".."}})).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        causes(&r),
        ["metadata.name: \"Invalid value: \\\"..\\\": may not be '..'\""]
    );
    // Other kinds keep the DNS subdomain rule.
    let cms = "/api/v1/namespaces/default/configmaps";
    let r = post(
        s.addr(),
        cms,
        &json!({"metadata": {"name": "configMap-10"}}),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.json());
}

/// kube-apiserver answers the object of the request, with the resourceVersion it was sent,
/// when the update deletes it (its store's `deleteWithoutFinalizers`).
#[tokio::test]
async fn a_put_removing_the_last_finalizer_answers_the_object_with_its_resource_version() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    assert_eq!(post(s.addr(), cms, &cm).await.status, 201);
    let r = delete(s.addr(), &format!("{cms}/held")).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let mut held = get(s.addr(), &format!("{cms}/held")).await.json();
    let rv = held["metadata"]["resourceVersion"].clone();
    assert!(rv.is_string(), "{held}");
    held["metadata"]["finalizers"] = json!([]);
    let r = put(s.addr(), &format!("{cms}/held"), &held).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let body = r.json();
    assert_eq!(body["metadata"]["resourceVersion"], rv, "{body}");
    assert_eq!(body["metadata"]["name"], "held");
    assert!(body["metadata"]["deletionTimestamp"].is_string(), "{body}");
    assert_eq!(get(s.addr(), &format!("{cms}/held")).await.status, 404);
}

/// The discovery controller of CRDs sorts versions as apimachinery's
/// `CompareKubeAwareVersionStrings` (GA > beta > alpha, then by number; other names after,
/// by name) and prefers the first.
#[tokio::test]
async fn crd_versions_are_discovered_in_kubernetes_version_priority() {
    let s = server().await;
    let schema = json!({"openAPIV3Schema": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}});
    let versions: Vec<Value> = [
        "v1alpha1", "zeta", "v1beta1", "v2", "v1", "v1beta2", "alpha",
    ]
    .iter()
    .map(|v| json!({"name": v, "served": true, "storage": *v == "v1", "schema": schema}))
    .collect();
    let crd = json!({"metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"}, "versions": versions}});
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let r = post(s.addr(), crds, &crd).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let want = [
        "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "alpha", "zeta",
    ];
    let group = get(s.addr(), "/apis/example.com").await.json();
    let got: Vec<&str> = group["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(got, want, "{group}");
    assert_eq!(group["preferredVersion"]["version"], "v2");
    let apis = get(s.addr(), "/apis").await.json();
    let entry = apis["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["name"] == "example.com")
        .cloned()
        .expect("example.com listed");
    assert_eq!(entry["versions"][0]["version"], "v2");
    assert_eq!(entry["versions"][6]["version"], "zeta");
}

/// Off, a new namespace gets no `default` ServiceAccount (a bare kube-apiserver); on (the
/// default), it does, as kube-controller-manager's service account controller makes it.
#[tokio::test]
async fn the_default_service_account_controller_can_be_turned_off() {
    for (on, want) in [(false, 0), (true, 1)] {
        let s = ApiServer::builder()
            .default_service_accounts(on)
            .build()
            .start()
            .await
            .expect("server starts");
        let r = post(
            s.addr(),
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "n"}}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.json());
        let list = get(s.addr(), "/api/v1/namespaces/n/serviceaccounts")
            .await
            .json();
        let n = list["items"].as_array().map_or(0, Vec::len);
        assert_eq!(n, want, "default_service_accounts({on}): {list}");
    }
}

/// Checks the seeded differential fuzzer (`kcache-conformance/tests/fuzz_decoding.rs`) found
/// missing, as kube-apiserver v1.36.5 words them: a Role's rules (`ValidatePolicyRule`), a
/// Job's negative `backoffLimit` and its `restartPolicy`, a container port of 0, a Service
/// port left out.
#[tokio::test]
async fn rules_backoff_limits_and_zero_ports_are_validated() {
    let s = server().await;
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let role = json!({"metadata": {"name": "r"}, "rules": [{"verbs": ["get"]}]});
    let r = post(s.addr(), roles, &role).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        causes(&r),
        [
            "rules[0].apiGroups: \"Required value: resource rules must supply at least one api group\"",
            "rules[0].resources: \"Required value: resource rules must supply at least one resource\""
        ]
    );
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let job = json!({"metadata": {"name": "j"}, "spec": {"backoffLimit": -1, "template": {"spec": {
        "containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}});
    let r = post(s.addr(), jobs, &job).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        causes(&r),
        ["spec.backoffLimit: \"Invalid value: -1: must be greater than or equal to 0\""]
    );
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "i", "ports": [{"containerPort": 0}]}]}});
    let r = post(s.addr(), pods, &pod).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        causes(&r),
        ["spec.containers[0].ports[0].containerPort: \"Required value\""]
    );
    let svcs = "/api/v1/namespaces/default/services";
    let svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"targetPort": 80}]}});
    let r = post(s.addr(), svcs, &svc).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        causes(&r),
        ["spec.ports[0].port: \"Invalid value: 0: must be between 1 and 65535, inclusive\""]
    );
    let mut job = job;
    job["spec"]["backoffLimit"] = json!(1);
    job["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    let r = post(s.addr(), jobs, &job).await;
    assert_eq!(r.status, 422, "{}", r.json());
    assert_eq!(
        causes(&r),
        [
            "spec.template.spec.restartPolicy: \"Required value: valid values: \\\"OnFailure\\\", \\\"Never\\\"\""
        ]
    );
}
