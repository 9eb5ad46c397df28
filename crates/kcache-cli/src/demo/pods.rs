//! Realistic pods for the demo: the shape a Deployment's pods have on a real cluster
//! (labels, owner reference, two containers with probes and env, a projected service-account
//! volume, a scheduled node, a Running status and `managedFields`), about 4 KiB of JSON each.

use serde_json::{Value, json};

/// Namespaces the demo spreads its pods over.
pub(super) const NAMESPACES: usize = 10;
/// Nodes the demo's pods are scheduled on (`spec.nodeName`).
pub(super) const NODES: usize = 50;

/// The name of demo namespace `i`.
pub(super) fn namespace(i: usize) -> String {
    format!("demo-{:02}", i % NAMESPACES)
}

/// The name of demo node `i`.
pub(super) fn node(i: usize) -> String {
    format!("node-{:03}", i % NODES)
}

/// The collection path of pods in `ns`.
pub(super) fn collection(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods")
}

/// Pod number `i`, named `{prefix}-{i}`, in namespace `namespace(i)` on node `node(i * 7)`.
pub(super) fn pod(prefix: &str, i: usize) -> Value {
    let app = format!("app-{:02}", i % 25);
    let hash = format!(
        "{:010x}",
        (i as u64 / 25).wrapping_mul(0x9E37_79B9) & 0xff_ffff_ffff
    );
    let name = format!("{prefix}-{i:06}");
    let ns = namespace(i);
    let node = node(i * 7);
    let ip = format!(
        "10.{}.{}.{}",
        244 + (i >> 16) % 8,
        (i >> 8) & 0xff,
        i & 0xff
    );
    let time = "2026-11-29T12:00:00Z";
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "generateName": format!("{app}-{hash}-"),
            "labels": {
                "app": app,
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/part-of": "kcache-demo",
                "pod-template-hash": hash,
                "tier": if i.is_multiple_of(3) { "frontend" } else { "backend" }
            },
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": time,
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090"
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-{hash}"),
                "uid": format!("6b1c{:04x}-2f7e-4a8b-9c3d-{:012x}", i % 0xffff, i),
                "controller": true, "blockOwnerDeletion": true
            }],
            "managedFields": [
                {
                    "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                    "time": time, "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {},
                        "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                        "f:ownerReferences": {".": {}, "k:{\"uid\":\"6b1c\"}": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {},
                        "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {}, "f:resources": {}},
                        "k:{\"name\":\"metrics\"}": {".": {}, "f:image": {}, "f:name": {}}},
                        "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}}}
                },
                {
                    "manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": time,
                    "fieldsType": "FieldsV1", "subresource": "status",
                    "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {},
                        "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}}
                }
            ]
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": format!("registry.example.com/{app}:1.{}.{}", i % 7, i % 13),
                    "imagePullPolicy": "IfNotPresent",
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "env": [
                        {"name": "APP_NAME", "value": app},
                        {"name": "LOG_LEVEL", "value": "info"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}
                    ],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"cpu": "500m", "memory": "256Mi"}
                    },
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                        "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 1,
                        "successThreshold": 1, "failureThreshold": 3},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
                        "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                    "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"
                },
                {
                    "name": "metrics",
                    "image": "registry.example.com/metrics-sidecar:0.9.2",
                    "imagePullPolicy": "IfNotPresent",
                    "ports": [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"
                }
            ],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]}}],
            "nodeName": node,
            "serviceAccountName": "default",
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "securityContext": {},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": time},
                {"type": "Initialized", "status": "True", "lastTransitionTime": time},
                {"type": "Ready", "status": "True", "lastTransitionTime": time},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": time},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": time}
            ],
            "hostIP": format!("192.168.{}.{}", (i * 7 % NODES) / 250, (i * 7 % NODES) % 250 + 1),
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": time,
            "qosClass": "Burstable",
            "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 0, "started": true,
                 "image": format!("registry.example.com/{app}:1.{}.{}", i % 7, i % 13),
                 "imageID": format!("registry.example.com/{app}@sha256:{:064x}", i),
                 "containerID": format!("containerd://{:064x}", i.wrapping_mul(2_654_435_761)),
                 "state": {"running": {"startedAt": time}}, "lastState": {}},
                {"name": "metrics", "ready": true, "restartCount": 0, "started": true,
                 "image": "registry.example.com/metrics-sidecar:0.9.2",
                 "imageID": format!("registry.example.com/metrics-sidecar@sha256:{:064x}", 42),
                 "containerID": format!("containerd://{:064x}", i.wrapping_mul(40_503) + 1),
                 "state": {"running": {"startedAt": time}}, "lastState": {}}
            ]
        }
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn demo_pod_decodes_as_a_typed_pod_of_realistic_size() {
        let value = pod("seed", 1234);
        let size = serde_json::to_vec(&value).unwrap().len();
        assert!((3_000..8_192).contains(&size), "{size} bytes");
        let pod: Pod = serde_json::from_value(value).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("seed-001234"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("demo-04"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(node(1234 * 7).as_str()));
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(pod.metadata.managed_fields.unwrap().len(), 2);
    }
}
