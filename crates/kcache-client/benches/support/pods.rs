//! The realistic Pod both benchmarks decode: labels, annotations, ownerReferences, three
//! managedFields entries, two containers with env, ports, resources and mounts, three volumes,
//! tolerations and a status with conditions and container statuses (~7.5 KB of JSON).

use serde_json::{Value, json};

/// The `i`th Pod's JSON value.
pub(crate) fn pod(i: usize) -> Value {
    let name = format!("web-{i:05}-7d9f8c6b5-x{:04}", i % 9973);
    let env: Vec<Value> = (0..10)
        .map(|k| json!({"name": format!("ENV_VAR_NUMBER_{k}"), "value": format!("value-{k}-{i}-abcdefghij")}))
        .collect();
    let container = |n: &str| {
        json!({
            "name": n, "image": format!("registry.example.com/team/{n}:v1.{}.{}", i % 17, i % 5),
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": env,
            "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
            "volumeMounts": [
                {"mountPath": "/etc/config", "name": "config"},
                {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access", "readOnly": true}
            ],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"
        })
    };
    let fields = |prefix: &str| {
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
               "f:ownerReferences": {".": {}, "k:{\"uid\":\"3c1f\"}": {}}},
               "f:spec": {"f:containers": {
                   format!("k:{{\"name\":\"{prefix}-app\"}}"): {".": {}, "f:env": {".": {}, "k:{\"name\":\"ENV_VAR_NUMBER_0\"}": {".": {}, "f:name": {}, "f:value": {}},
                   "k:{\"name\":\"ENV_VAR_NUMBER_1\"}": {".": {}, "f:name": {}, "f:value": {}}}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                   "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}},
                   "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}},
                   format!("k:{{\"name\":\"{prefix}-sidecar\"}}"): {".": {}, "f:image": {}, "f:name": {}}},
                 "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                 "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}, "f:volumes": {".": {}, "k:{\"name\":\"config\"}": {".": {}, "f:configMap": {}, "f:name": {}}}}})
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": format!("team-{}", i % 20), "uid": format!("4c1e2a8e-1f3b-4d6a-9c2e-{i:012}"),
            "resourceVersion": format!("{}", 100000 + i), "generateName": "web-7d9f8c6b5-",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "tier": "frontend", "pod-template-hash": "7d9f8c6b5", "team": format!("t{}", i % 20), "version": "v1"},
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
                "prometheus.io/scrape": "true",
                "example.com/description": "x".repeat(300),
            },
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5", "uid": "3c1f", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields("c")},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
                    "k:{\"type\":\"PodScheduled\"}": {".": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
                    "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"10.0.0.1\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}}},
                {"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields("k")}
            ]
        },
        "spec": {
            "containers": [container("app"), container("sidecar")],
            "volumes": [
                {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                {"name": "data", "emptyDir": {}},
                {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}
            ],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": format!("node-{}", i % 50), "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "hostIP": "10.1.0.1", "podIP": format!("10.0.{}.{}", i / 250 % 250, i % 250), "startTime": "2026-01-01T00:00:00Z",
            "qosClass": "Burstable",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
            "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 0, "image": "registry.example.com/team/app:v1", "imageID": "registry.example.com/team/app@sha256:0123456789abcdef", "containerID": "containerd://abcdef0123456789", "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
                {"name": "sidecar", "ready": true, "restartCount": 0, "image": "registry.example.com/team/sidecar:v1", "imageID": "registry.example.com/team/sidecar@sha256:0123456789abcdef", "containerID": "containerd://0123456789abcdef", "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
            ]
        }
    })
}
