//! kube-apiserver v1.36.5's answers to changes of stored objects, pinned over HTTP with the
//! field paths and words the update fuzzer (`kcache-conformance/tests/fuzz_updates.rs`) saw
//! from it: the URL-name check, bad labels reported once per object meta check, the fields
//! a kind keeps once stored, a DaemonSet's template generation, a Job's generated selector
//! and the order of a strategic merge patch's keyed list.

mod common;

use common::{patch, post, put};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

/// Creates `body` under `path`, returns the stored object.
async fn created(s: &RunningServer, path: &str, body: &Value) -> Value {
    let r = post(s.addr(), path, body).await;
    assert_eq!(r.status, 201, "{}", r.json());
    r.json()
}

/// `field reason` of each cause, sorted.
fn causes(r: &Value) -> Vec<String> {
    let mut c = common::cause_lines(r);
    c.sort();
    c
}

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1",
            "ports": [{"containerPort": 80}]}]}})
}

#[tokio::test]
async fn an_update_without_a_name_is_a_bad_request_before_any_other_check() {
    let s = server().await;
    let mut p = created(&s, PODS, &pod("p")).await;
    p["metadata"].as_object_mut().unwrap().remove("name");
    p["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let r = put(s.addr(), &format!("{PODS}/p"), &p).await;
    assert_eq!(r.status, 400, "{}", r.json());
    assert_eq!(
        r.json()["message"],
        "the name of the object (p based on URL) was undeterminable: name must be provided"
    );
    let r = patch(
        s.addr(),
        &format!("{PODS}/p"),
        "application/merge-patch+json",
        &json!({"metadata": null}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.json());
}

#[tokio::test]
async fn a_bad_label_is_reported_once_per_object_meta_check_of_the_kind() {
    let s = server().await;
    let bad = json!({"metadata": {"labels": {"a b": "c"}}});
    let merge = "application/merge-patch+json";
    created(&s, PODS, &pod("p")).await;
    let r = patch(s.addr(), &format!("{PODS}/p"), merge, &bad).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        causes(&r.json()),
        vec!["metadata.labels FieldValueInvalid"; 4]
    );
    // The message lists the error once.
    let message = r.json()["message"].as_str().unwrap().to_owned();
    assert_eq!(message.matches("metadata.labels").count(), 1, "{message}");
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    created(&s, leases, &json!({"metadata": {"name": "l"}})).await;
    let r = patch(s.addr(), &format!("{leases}/l"), merge, &bad).await;
    assert_eq!(
        causes(&r.json()),
        vec!["metadata.labels FieldValueInvalid"; 3]
    );
    let pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    created(
        &s,
        pdbs,
        &json!({"metadata": {"name": "b"}, "spec": {"minAvailable": 1}}),
    )
    .await;
    let r = patch(s.addr(), &format!("{pdbs}/b"), merge, &bad).await;
    assert_eq!(
        causes(&r.json()),
        vec!["metadata.labels FieldValueInvalid"; 2]
    );
}

#[tokio::test]
async fn fields_kept_once_stored_are_refused_in_kube_apiserver_words() {
    let s = server().await;
    let merge = "application/merge-patch+json";
    created(&s, PODS, &pod("p")).await;
    let r = patch(
        s.addr(),
        &format!("{PODS}/p"),
        merge,
        &json!({"spec": {"restartPolicy": "Never"}}),
    )
    .await;
    assert_eq!(causes(&r.json()), ["spec FieldValueForbidden"]);
    // An image may change, and what a patch leaves out is defaulted again.
    let r = patch(
        s.addr(),
        &format!("{PODS}/p"),
        merge,
        &json!({"spec": {"containers": [{"name": "c", "image": "nginx:2",
            "ports": [{"containerPort": 80}]}], "terminationGracePeriodSeconds": null}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());

    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let job = created(
        &s,
        jobs,
        &json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}}),
    )
    .await;
    let uid = job["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        job["spec"]["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["job-name"],
        "j"
    );
    assert_eq!(job["spec"]["completions"], 1);
    let r = patch(
        s.addr(),
        &format!("{jobs}/j"),
        merge,
        &json!({"spec": {"completions": 3}}),
    )
    .await;
    assert_eq!(causes(&r.json()), ["spec.completions FieldValueInvalid"]);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .ends_with("spec.completions: Invalid value: 3: field is immutable"),
        "{}",
        r.json()
    );

    // The generated labels are required of the template, and the selector must select it.
    let r = patch(
        s.addr(),
        &format!("{jobs}/j"),
        merge,
        &json!({"spec": {"template": {"metadata": {"labels": null}}}}),
    )
    .await;
    assert_eq!(
        causes(&r.json()),
        [
            "spec.template FieldValueInvalid",
            "spec.template.metadata.labels FieldValueInvalid",
            "spec.template.metadata.labels FieldValueInvalid",
            "spec.template.metadata.labels[batch.kubernetes.io/controller-uid] FieldValueRequired",
            "spec.template.metadata.labels[batch.kubernetes.io/job-name] FieldValueRequired",
            "spec.template.metadata.labels[controller-uid] FieldValueRequired",
            "spec.template.metadata.labels[job-name] FieldValueRequired",
        ]
    );

    let services = "/api/v1/namespaces/default/services";
    created(
        &s,
        services,
        &json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    let r = patch(
        s.addr(),
        &format!("{services}/svc"),
        merge,
        &json!({"spec": {"clusterIP": "10.0.0.123"}}),
    )
    .await;
    assert_eq!(causes(&r.json()), ["spec.clusterIPs[0] FieldValueInvalid"]);

    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    created(
        &s,
        claims,
        &json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let r = patch(
        s.addr(),
        &format!("{claims}/c"),
        merge,
        &json!({"spec": {"storageClassName": "other"}}),
    )
    .await;
    assert_eq!(causes(&r.json()), ["spec FieldValueForbidden"]);

    let sets = "/apis/apps/v1/namespaces/default/statefulsets";
    let template = json!({"metadata": {"labels": {"app": "w"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
    created(
        &s,
        sets,
        &json!({"metadata": {"name": "s"}, "spec": {"serviceName": "s",
            "selector": {"matchLabels": {"app": "w"}}, "template": template}}),
    )
    .await;
    let r = patch(
        s.addr(),
        &format!("{sets}/s"),
        merge,
        &json!({"spec": {"serviceName": "t"}}),
    )
    .await;
    assert_eq!(causes(&r.json()), ["spec FieldValueForbidden"]);
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    created(
        &s,
        deployments,
        &json!({"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "w"}}, "template": template}}),
    )
    .await;
    let r = patch(
        s.addr(),
        &format!("{deployments}/d"),
        merge,
        &json!({"spec": {"selector": {"matchLabels": {"extra": "x"}},
            "template": {"metadata": {"labels": {"extra": "x"}}}}}),
    )
    .await;
    assert_eq!(causes(&r.json()), ["spec.selector FieldValueInvalid"]);
}

#[tokio::test]
async fn a_daemon_set_counts_its_template_generations() {
    let s = server().await;
    let path = "/apis/apps/v1/namespaces/default/daemonsets";
    let generation = |v: &Value| {
        v["metadata"]["annotations"]["deprecated.daemonset.template.generation"].clone()
    };
    let ds = created(
        &s,
        path,
        &json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "w"}},
            "template": {"metadata": {"labels": {"app": "w"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}),
    )
    .await;
    assert_eq!(generation(&ds), "1");
    let merge = "application/merge-patch+json";
    let r = patch(
        s.addr(),
        &format!("{path}/d"),
        merge,
        &json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await;
    assert_eq!(generation(&r.json()), "1");
    let r = patch(
        s.addr(),
        &format!("{path}/d"),
        merge,
        &json!({"spec": {"template": {"metadata": {"labels": {"x": "y"}}}}}),
    )
    .await;
    assert_eq!(generation(&r.json()), "2", "{}", r.json());
}

#[tokio::test]
async fn a_strategic_merge_patch_puts_a_new_keyed_item_before_the_server_items() {
    let s = server().await;
    let services = "/api/v1/namespaces/default/services";
    created(
        &s,
        services,
        &json!({"metadata": {"name": "svc"},
            "spec": {"ports": [{"name": "http", "port": 80}]}}),
    )
    .await;
    let r = patch(
        s.addr(),
        &format!("{services}/svc"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"ports": [{"name": "http", "port": 70000, "targetPort": 8080}]}}),
    )
    .await;
    assert_eq!(
        causes(&r.json()),
        [
            "spec.ports[0].port FieldValueInvalid",
            "spec.ports[1].name FieldValueDuplicate"
        ]
    );
}
