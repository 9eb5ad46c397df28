//! kube-apiserver v1.36.5's validation of HorizontalPodAutoscalers, Ingresses,
//! NetworkPolicies, role binding subjects, CronJobs, Job names and PodDisruptionBudget names,
//! pinned over HTTP with the field paths and words the differential fuzzer saw from it.

mod common;

use common::post;
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

/// The causes of a refused create, `field: message`, sorted; the status must be 422.
async fn refused(s: &RunningServer, path: &str, body: &Value) -> Vec<String> {
    let r = post(s.addr(), path, body).await;
    assert_eq!(r.status, 422, "{}", r.json());
    let mut causes: Vec<String> = r.json()["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    causes.sort();
    causes
}

async fn accepted(s: &RunningServer, path: &str, body: &Value) {
    let r = post(s.addr(), path, body).await;
    assert_eq!(r.status, 201, "{}", r.json());
}

fn with(base: &Value, pointer: &str, value: Value) -> Value {
    let mut v = base.clone();
    *v.pointer_mut(pointer).expect("pointer exists") = value;
    v
}

#[tokio::test]
async fn horizontal_pod_autoscalers() {
    let s = server().await;
    let path = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
    let hpa = json!({"metadata": {"name": "h"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
        "minReplicas": 1, "maxReplicas": 3,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
    accepted(&s, path, &hpa).await;
    let hpa = with(&hpa, "/metadata/name", json!("h2"));
    assert_eq!(
        refused(&s, path, &with(&hpa, "/spec/maxReplicas", json!(0))).await,
        [
            "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`",
            "spec.maxReplicas: Required value: must be set and greater than 0",
        ]
    );
    assert_eq!(
        refused(&s, path, &with(&hpa, "/spec/minReplicas", json!(0))).await,
        [
            "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
        ]
    );
    let utilization = "/spec/metrics/0/resource/target/averageUtilization";
    assert_eq!(
        refused(&s, path, &with(&hpa, utilization, json!(0))).await,
        [
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"
        ]
    );
    assert_eq!(
        refused(
            &s,
            path,
            &with(&hpa, "/spec/scaleTargetRef/apiVersion", json!(""))
        )
        .await,
        ["spec.scaleTargetRef.apiVersion: Invalid value: \"\": apiVersion must specify API group"]
    );
    let no_source = with(&hpa, "/spec/metrics/0", json!({"type": "Resource"}));
    assert_eq!(
        refused(&s, path, &no_source).await,
        [
            "spec.metrics[0].resource: Required value: must populate information for the given metric source"
        ]
    );
    let supported =
        "supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"";
    assert_eq!(
        refused(&s, path, &with(&hpa, "/spec/metrics/0/type", json!(""))).await,
        [
            "spec.metrics[0].type: Required value: must specify a metric source type".to_owned(),
            format!("spec.metrics[0].type: Unsupported value: \"\": {supported}"),
            format!("spec.metrics[0].type: Unsupported value: \"\": {supported}"),
        ]
    );
}

#[tokio::test]
async fn ingresses() {
    let s = server().await;
    let path = "/apis/networking.k8s.io/v1/namespaces/default/ingresses";
    let ing = json!({"metadata": {"name": "i"}, "spec": {"rules": [{"http": {"paths": [
        {"path": "/", "pathType": "Prefix",
         "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}});
    accepted(&s, path, &ing).await;
    let ing = with(&ing, "/metadata/name", json!("i2"));
    assert_eq!(
        refused(&s, path, &with(&ing, "/spec", json!({}))).await,
        ["spec: Invalid value: []: either `defaultBackend` or `rules` must be specified"]
    );
    let backend = "/spec/rules/0/http/paths/0/backend";
    assert_eq!(
        refused(&s, path, &with(&ing, backend, json!({}))).await,
        [
            "spec.rules[0].http.paths[0].backend: Invalid value: \"\": resource or service backend is required"
        ]
    );
}

#[tokio::test]
async fn network_policy_ports() {
    let s = server().await;
    let path = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies";
    let np = json!({"metadata": {"name": "n"}, "spec": {"podSelector": {},
        "ingress": [{"ports": [{"protocol": "TCP", "port": 80}]}]}});
    accepted(&s, path, &np).await;
    let np = with(&np, "/metadata/name", json!("n2"));
    assert_eq!(
        refused(
            &s,
            path,
            &with(&np, "/spec/ingress/0/ports/0/port", json!(0))
        )
        .await,
        ["spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"]
    );
}

#[tokio::test]
async fn role_binding_subjects() {
    let s = server().await;
    let path = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let rb = json!({"metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "name": "alice"}]});
    accepted(&s, path, &rb).await;
    let rb = with(&rb, "/metadata/name", json!("rb2"));
    assert_eq!(
        refused(&s, path, &with(&rb, "/subjects/0/name", json!(""))).await,
        ["subjects[0].name: Required value"]
    );
}

#[tokio::test]
async fn cron_jobs() {
    let s = server().await;
    let path = "/apis/batch/v1/namespaces/default/cronjobs";
    let cj = json!({"metadata": {"name": "c"}, "spec": {"schedule": "* * * * *",
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "i"}]}}}}}});
    accepted(&s, path, &cj).await;
    let cj = with(&cj, "/metadata/name", json!("c2"));
    let policy = "/spec/jobTemplate/spec/template/spec/restartPolicy";
    assert_eq!(
        refused(&s, path, &with(&cj, policy, json!("Always"))).await,
        [
            "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
        ]
    );
    let long = "c".repeat(53);
    assert_eq!(
        refused(&s, path, &with(&cj, "/metadata/name", json!(long))).await,
        [format!(
            "metadata.name: Invalid value: \"{long}\": must be no more than 52 characters"
        )]
    );
    let longer = "x".repeat(300);
    assert_eq!(
        refused(&s, path, &with(&cj, "/metadata/name", json!(longer))).await,
        [
            format!(
                "metadata.name: Invalid value: \"{longer}\": must be no more than 253 characters"
            ),
            format!(
                "metadata.name: Invalid value: \"{longer}\": must be no more than 52 characters"
            ),
        ]
    );
}

#[tokio::test]
async fn job_names_are_template_label_values() {
    let s = server().await;
    let path = "/apis/batch/v1/namespaces/default/jobs";
    let job = json!({"metadata": {"name": "a b"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}});
    let causes = refused(&s, path, &job).await;
    let fields: Vec<&str> = causes
        .iter()
        .map(|c| c.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(
        fields,
        [
            "metadata.name",
            "spec.template.labels",
            "spec.template.labels"
        ]
    );
    let long = "x".repeat(64);
    let job = with(&job, "/metadata/name", json!(long));
    assert_eq!(
        refused(&s, path, &job).await,
        vec![
            format!(
                "spec.template.labels: Invalid value: \"{long}\": must be no more than 63 bytes"
            );
            2
        ]
    );
}

#[tokio::test]
async fn pod_disruption_budget_names_are_path_segments() {
    let s = server().await;
    let path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    for name in ["a b", "Fuzz_Name"] {
        let pdb = json!({"metadata": {"name": name}, "spec": {"minAvailable": 1}});
        accepted(&s, path, &pdb).await;
    }
    let pdb = json!({"metadata": {"name": "a%b"}, "spec": {"minAvailable": 1}});
    assert_eq!(
        refused(&s, path, &pdb).await,
        ["metadata.name: Invalid value: \"a%b\": may not contain '%'"]
    );
}

#[tokio::test]
async fn pod_disruption_budget_bounds() {
    let s = server().await;
    let path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let pdb = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": -1}});
    assert_eq!(
        refused(&s, path, &pdb).await,
        ["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]
    );
    let pdb = json!({"metadata": {"name": "p"}, "spec": {"maxUnavailable": "101%"}});
    assert_eq!(
        refused(&s, path, &pdb).await,
        ["spec.maxUnavailable: Invalid value: \"101%\": must not be greater than 100%"]
    );
}

#[tokio::test]
async fn required_fields_of_cron_jobs_claims_and_env() {
    let s = server().await;
    let cj = json!({"metadata": {"name": "c"}, "spec": {
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "i"}]}}}}}});
    let path = "/apis/batch/v1/namespaces/default/cronjobs";
    assert_eq!(
        refused(&s, path, &cj).await,
        ["spec.schedule: Required value"]
    );
    let pvc = json!({"metadata": {"name": "v"}, "spec": {}});
    let path = "/api/v1/namespaces/default/persistentvolumeclaims";
    assert_eq!(
        refused(&s, path, &pvc).await,
        [
            "spec.accessModes: Required value: at least 1 access mode is required",
            "spec.resources[storage]: Required value",
        ]
    );
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "i", "env": [{"value": "v"}]}]}});
    let path = "/api/v1/namespaces/default/pods";
    assert_eq!(
        refused(&s, path, &pod).await,
        ["spec.containers[0].env[0].name: Required value"]
    );
    let svc =
        json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "targetPort": "7"}]}});
    let path = "/api/v1/namespaces/default/services";
    assert_eq!(
        refused(&s, path, &svc).await,
        ["spec.ports[0].targetPort: Invalid value: \"7\": must contain at least one letter (a-z)"]
    );
}

#[tokio::test]
async fn hpa_defaults_take_part_in_validation() {
    let s = server().await;
    let path = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
    let hpa = json!({"metadata": {"name": "h"}, "spec": {"maxReplicas": 2,
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}});
    let r = post(s.addr(), path, &hpa).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.json()["spec"]["minReplicas"], 1);
    assert_eq!(
        r.json()["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    let hpa = json!({"metadata": {"name": "h2"}, "spec": {"maxReplicas": 0,
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}});
    assert_eq!(
        refused(&s, path, &hpa).await,
        [
            "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`",
            "spec.maxReplicas: Required value: must be set and greater than 0",
        ]
    );
}

#[tokio::test]
async fn workload_selectors_missing_or_empty() {
    let s = server().await;
    let template = json!({"metadata": {"labels": {"app": "w"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let d = json!({"metadata": {"name": "d"}, "spec": {"selector": {}, "template": template}});
    assert_eq!(
        refused(&s, deployments, &d).await,
        ["spec.selector: Invalid value: {}: empty selector is invalid for deployment"]
    );
    let d = json!({"metadata": {"name": "d"}, "spec": {"template": template}});
    assert_eq!(
        refused(&s, deployments, &d).await,
        [
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: {\"app\":\"w\"}: `selector` does not match template `labels`",
        ]
    );
    let daemonsets = "/apis/apps/v1/namespaces/default/daemonsets";
    let ds = json!({"metadata": {"name": "ds"}, "spec": {"template": template}});
    assert_eq!(
        refused(&s, daemonsets, &ds).await,
        [
            "spec.template.metadata.labels: Invalid value: {\"app\":\"w\"}: `selector` does not match template `labels`"
        ]
    );
    let ds = json!({"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {}}, "template": template}});
    assert_eq!(
        refused(&s, daemonsets, &ds).await,
        ["spec.selector: Invalid value: {}: empty selector is invalid for daemonset"]
    );
}

#[tokio::test]
async fn requests_may_not_exceed_limits() {
    let s = server().await;
    let path = "/api/v1/namespaces/default/pods";
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
        "resources": {"requests": {"memory": "64Mi", "cpu": "100m"},
                      "limits": {"memory": "128Mi", "cpu": 1}}}]}});
    accepted(&s, path, &pod).await;
    let pod = with(&pod, "/metadata/name", json!("p2"));
    let limit = "/spec/containers/0/resources/limits/memory";
    assert_eq!(
        refused(&s, path, &with(&pod, limit, json!(7))).await,
        [
            "spec.containers[0].resources.requests: Invalid value: \"64Mi\": must be less than or equal to memory limit of 7"
        ]
    );
}
