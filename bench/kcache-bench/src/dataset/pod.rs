//! The pod template of the dataset: pod `i` as JSON, about 8 KB as the server returns it.

use serde_json::{Value, json};

use crate::labels::{APP_LABEL, app};

const TIERS: [&str; 4] = ["web", "api", "worker", "cache"];

/// The name of pod `i` of the dataset.
pub fn pod_name(i: usize) -> String {
    format!("bench-{i:06}")
}

/// Pod `i` of the dataset, as JSON: eight labels, six annotations (one of them a
/// `last-applied-configuration`-sized blob), two containers with six env vars each, resources, ports,
/// probes and mounts, five volumes and tolerations. About 3.7 KB; the server adds
/// `managedFields` (~4 KB), `uid`, timestamps and status for ~8 KB as read back.
pub fn pod(namespace: &str, i: usize) -> Value {
    let app = app(i);
    let env = |prefix: &str| -> Vec<Value> {
        (0..6)
            .map(|k| {
                json!({"name": format!("{prefix}_SETTING_{k}"),
                       "value": format!("value-{i}-{k}-{}", "x".repeat(12))})
            })
            .collect()
    };
    let applied = json!({"kind": "Pod", "app": app, "replica": i, "note": "y".repeat(200)});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(i),
            "namespace": namespace,
            "labels": {
                APP_LABEL: app,
                "app.kubernetes.io/instance": format!("{app}-prod"),
                "app.kubernetes.io/version": "1.24.3",
                "app.kubernetes.io/component": "backend",
                "app.kubernetes.io/part-of": "bench-platform",
                "app.kubernetes.io/managed-by": "kcache-bench",
                "pod-template-hash": format!("{:010x}", i * 2_654_435_761 % 0xff_ffff_ffff),
                "tier": TIERS[i % TIERS.len()],
            },
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": applied.to_string(),
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
                "prometheus.io/path": "/metrics",
                "bench.kcache.io/owner": format!("team-{}", i % 7),
                "bench.kcache.io/revision": format!("{}", i % 13),
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": format!("registry.example.invalid/{app}:1.24.3"),
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/server"],
                    "args": ["--port=8080", "--metrics-port=9090", "--log-level=info", "--config=/etc/app/config.yaml"],
                    "ports": [
                        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
                    ],
                    "env": env("MAIN"),
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"},
                    },
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/app", "readOnly": true},
                        {"name": "secrets", "mountPath": "/etc/secrets", "readOnly": true},
                        {"name": "data", "mountPath": "/var/lib/app"},
                        {"name": "tokens", "mountPath": "/var/run/secrets/tokens", "readOnly": true},
                    ],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080},
                                      "initialDelaySeconds": 10, "periodSeconds": 10},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080},
                                       "periodSeconds": 5, "failureThreshold": 3},
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 10001,
                                        "allowPrivilegeEscalation": false,
                                        "capabilities": {"drop": ["ALL"]}},
                },
                {
                    "name": "sidecar",
                    "image": "registry.example.invalid/log-shipper:3.2.1",
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["--input=/var/log/app", "--output=stdout"],
                    "env": env("SIDECAR"),
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "64Mi"},
                        "limits": {"cpu": "200m", "memory": "128Mi"},
                    },
                    "volumeMounts": [
                        {"name": "logs", "mountPath": "/var/log/app"},
                    ],
                },
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": format!("{app}-config")}},
                {"name": "secrets", "secret": {"secretName": format!("{app}-secrets")}},
                {"name": "data", "emptyDir": {}},
                {"name": "logs", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "tokens", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600, "audience": "bench"}},
                ]}},
            ],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "restartPolicy": "Always",
            "serviceAccountName": "bench-app",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        },
    })
}
