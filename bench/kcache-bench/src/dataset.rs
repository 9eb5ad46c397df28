//! The benchmark's dataset: realistic pods (~8 KB of JSON each as the server returns them,
//! `managedFields` included), loaded at high concurrency into a fresh namespace, and an updater
//! that changes every pod once (a merge patch of one annotation) so that each peer's update
//! phase sees exactly one event per pod.

use std::path::Path;

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube_client::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::{Value, json};

/// The field manager the loader and updater write as.
pub const FIELD_MANAGER: &str = "kcache-bench";

/// The annotation the updater sets.
pub const TOUCH_ANNOTATION: &str = "bench.kcache.io/touched";

const TIERS: [&str; 4] = ["web", "api", "worker", "cache"];

/// Loading or updating failed.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A request to the server failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The client's error.
        source: kube_client::Error,
    },
    /// The pod template did not convert to a typed Pod (a bug in the template).
    #[error("pod template: {0}")]
    Template(#[from] serde_json::Error),
}

/// A kube-client [`Client`] for the kubeconfig at `path` (its current context).
///
/// # Errors
/// [`DatasetError::Kubeconfig`] when the file cannot be read or describes no usable cluster.
pub async fn client(path: &Path) -> Result<Client, DatasetError> {
    let err = |source: Box<dyn std::error::Error + Send + Sync>| DatasetError::Kubeconfig {
        path: path.display().to_string(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| err(e.into()))?;
    let config =
        kube_client::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| err(e.into()))?;
    Client::try_from(config).map_err(|e| err(e.into()))
}

/// The name of pod `i` of the dataset.
pub fn pod_name(i: usize) -> String {
    format!("bench-{i:06}")
}

/// Pod `i` of the dataset, as JSON: eight labels, six annotations (one of them a
/// `last-applied-configuration`-sized blob), two containers with six env vars each, resources, ports,
/// probes and mounts, five volumes and tolerations. About 3.7 KB; the server adds
/// `managedFields` (~4 KB), `uid`, timestamps and status for ~8 KB as read back.
pub fn pod(namespace: &str, i: usize) -> Value {
    let app = format!("app-{}", i % 50);
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
                "app.kubernetes.io/name": app,
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

/// Creates `namespace` (an existing one is reused) and pods `0..n` in it, `concurrency`
/// requests in flight, then waits until a list at resourceVersion "0" returns them all.
///
/// # Errors
/// [`DatasetError::Api`] for the first failed request.
pub async fn load(
    client: &Client,
    namespace: &str,
    n: usize,
    concurrency: usize,
) -> Result<(), DatasetError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    let params = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    match namespaces.create(&params, &ns).await {
        Ok(_) => {}
        Err(kube_client::Error::Api(s)) if s.code == 409 => {}
        Err(source) => {
            return Err(DatasetError::Api {
                what: format!("create namespace {namespace}"),
                source,
            });
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            let params = params.clone();
            async move {
                let pod: Pod = serde_json::from_value(pod(namespace, i))?;
                pods.create(&params, &pod)
                    .await
                    .map(drop)
                    .map_err(|source| DatasetError::Api {
                        what: format!("create pod {}", pod_name(i)),
                        source,
                    })
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await?;
    cached(&pods, namespace, n).await
}

/// Waits (up to 60 s) until kube-apiserver's watch cache serves all `n` pods, so that the
/// first peer's initial list at resourceVersion "0" (served from that cache, which may lag the
/// last writes by a moment) sees the whole dataset like every later peer.
async fn cached(pods: &Api<Pod>, namespace: &str, n: usize) -> Result<(), DatasetError> {
    let params = kube_client::api::ListParams::default().match_any();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let listed = pods
            .list(&params)
            .await
            .map_err(|source| DatasetError::Api {
                what: format!("list pods of {namespace} from the watch cache"),
                source,
            })?;
        if listed.items.len() >= n || std::time::Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The size of pod 0 as the server returns it (JSON bytes, re-encoded from the typed object),
/// and the part of it that is `metadata.managedFields`.
///
/// # Errors
/// [`DatasetError::Api`] when the pod cannot be read.
pub async fn sample_size(client: &Client, namespace: &str) -> Result<(usize, usize), DatasetError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = pods
        .get(&pod_name(0))
        .await
        .map_err(|source| DatasetError::Api {
            what: format!("get pod {}", pod_name(0)),
            source,
        })?;
    let total = serde_json::to_vec(&pod)?.len();
    let managed = serde_json::to_vec(&pod.metadata.managed_fields)?.len();
    Ok((total, managed))
}

/// Changes pods `0..n` of `namespace` once each (merge patch of [`TOUCH_ANNOTATION`] to
/// `tag`), `concurrency` requests in flight.
///
/// # Errors
/// [`DatasetError::Api`] for the first failed request.
pub async fn touch_all(
    client: &Client,
    namespace: &str,
    n: usize,
    tag: &str,
    concurrency: usize,
) -> Result<(), DatasetError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"metadata": {"annotations": {TOUCH_ANNOTATION: tag}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    stream::iter(0..n)
        .map(|i| {
            let (pods, patch, params) = (pods.clone(), &patch, &params);
            async move {
                pods.patch(&pod_name(i), params, &Patch::Merge(patch))
                    .await
                    .map(drop)
                    .map_err(|source| DatasetError::Api {
                        what: format!("patch pod {}", pod_name(i)),
                        source,
                    })
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_template_is_a_valid_typed_pod_of_the_intended_size() {
        let value = pod("bench", 7);
        let size = value.to_string().len();
        assert!((3_000..5_000).contains(&size), "{size} bytes");
        let typed: Pod = serde_json::from_value(value).unwrap();
        assert_eq!(typed.metadata.name.as_deref(), Some("bench-000007"));
        let spec = typed.spec.unwrap();
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(spec.containers[0].env.as_ref().unwrap().len(), 6);
        assert_eq!(spec.volumes.unwrap().len(), 5);
    }

    #[test]
    fn pods_differ_by_index() {
        assert_ne!(pod("bench", 1), pod("bench", 2));
        assert_eq!(pod_name(42), "bench-000042");
    }
}
