//! The cache's memory estimate against a counting global allocator: realistic pods decoded
//! from JSON and inserted into an accounted store; the store's running total must be within
//! ±10% of the heap bytes the allocator saw it grow by (requested minus freed). One test in
//! this file, so that nothing else allocates meanwhile.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kcache::{memory, store::ThreadSafeStore};
use serde_json::{Value, json};

/// Counts live heap bytes: requested minus freed.
#[global_allocator]
static ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

const PODS: usize = 2_000;
const TOLERANCE: f64 = 0.10;

/// A pod as the API server returns a running one (~8 KB of JSON): labels, annotations with a
/// last-applied configuration, an owner, two managedFields entries, two containers with env,
/// ports, resources, probes and mounts, four volumes, a toleration, status with conditions
/// and container statuses.
fn pod(i: usize) -> Value {
    let container = |name: &str| {
        json!({
            "name": name, "image": format!("registry.example.com/team/{name}:v1.{i}.0"),
            "command": ["/bin/server"], "args": ["--port=8080", "--log-level=info", format!("--shard={i}")],
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": (0..10).map(|e| json!({"name": format!("ENV_VAR_{e}"), "value": format!("value-{e}-{i}")})).collect::<Vec<_>>(),
            "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
            "volumeMounts": [
                {"name": "config", "mountPath": "/etc/config", "readOnly": true},
                {"name": "data", "mountPath": "/var/lib/data"},
                {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"
        })
    };
    let status = |name: &str| {
        json!({"name": name, "state": {"running": {"startedAt": "2023-11-14T22:14:10Z"}}, "lastState": {},
            "ready": true, "restartCount": 0, "image": format!("registry.example.com/team/{name}:v1.{i}.0"),
            "imageID": format!("registry.example.com/team/{name}@sha256:{i:064x}"),
            "containerID": format!("containerd://{:064x}", i * 7 + 1), "started": true})
    };
    let condition = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2023-11-14T22:15:00Z"});
    let fields = json!({"f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
        "f:labels": {".": {}, "f:app": {}, "f:tier": {}, "f:version": {}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:args": {}, "f:command": {}, "f:env": {}, "f:image": {}, "f:name": {}}},
        "f:volumes": {"k:{\"name\":\"config\"}": {}, "k:{\"name\":\"data\"}": {}}}});
    let status_fields = json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}},
        "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}});
    let ip = format!("10.2.{}.{}", i / 250 % 250, i % 250);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("app-{i:06}-7d9f8b6c5d-x2k9p"), "generateName": "app-7d9f8b6c5d-", "namespace": "bench",
            "uid": format!("{i:08x}-0000-4000-8000-{i:012x}"), "resourceVersion": format!("{}", 100_000 + i),
            "generation": 1, "creationTimestamp": "2023-11-14T22:13:20Z",
            "labels": {"app": "app", "tier": "backend", "version": "v1", "pod-template-hash": "7d9f8b6c5d", "shard": format!("{}", i % 16)},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": format!("{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"app-{i}\",\"namespace\":\"bench\"}},\"spec\":{{\"containers\":[{{\"image\":\"registry.example.com/team/app:v1.0.0\",\"name\":\"app\"}}]}}}}\n"),
                "prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app-7d9f8b6c5d",
                "uid": "6a1f0b2c-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": "2023-11-14T22:13:20Z", "fieldsType": "FieldsV1", "fieldsV1": fields},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2023-11-14T22:15:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": status_fields, "subresource": "status"}]
        },
        "spec": {
            "containers": [container("app"), container("sidecar")],
            "volumes": [
                {"name": "config", "configMap": {"name": "app-config", "defaultMode": 420}},
                {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "secret", "secret": {"secretName": "app-secret", "defaultMode": 420}},
                {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": format!("node-{:03}", i % 100), "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "hostIP": format!("10.1.{}.{}", i / 250 % 250, i % 250), "podIP": ip.clone(), "podIPs": [{"ip": ip}],
            "startTime": "2023-11-14T22:13:30Z", "containerStatuses": [status("app"), status("sidecar")], "qosClass": "Burstable"
        }
    })
}

/// (estimate, allocator growth) for `PODS` pods decoded and stored.
fn measure(strip_managed_fields: bool) -> (usize, usize) {
    let jsons: Vec<Vec<u8>> = (0..PODS)
        .map(|i| {
            let mut p = pod(i);
            if strip_managed_fields {
                p["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("managedFields");
            }
            serde_json::to_vec(&p).unwrap()
        })
        .collect();
    let store = ThreadSafeStore::<Pod>::for_resource();
    assert!(store.set_sizer(memory::estimator()));
    // Warm up lazily built statics (the estimator's size table) before measuring.
    let warm: Pod = serde_json::from_slice(&jsons[0]).unwrap();
    assert!(memory::estimate(&warm) > 0);
    drop(warm);
    let before = ALLOC.current_usage();
    for json in &jsons {
        let pod: Pod = serde_json::from_slice(json).unwrap();
        store.add(Arc::new(pod)).unwrap();
    }
    let grown = ALLOC.current_usage() - before;
    let usage = store.memory().unwrap();
    assert_eq!(usage.objects, PODS);
    (usage.bytes, grown)
}

#[test]
fn the_estimate_is_within_a_tenth_of_what_the_allocator_counts_for_realistic_pods() {
    for strip in [false, true] {
        let (estimate, allocated) = measure(strip);
        let ratio = estimate as f64 / allocated as f64;
        eprintln!(
            "managedFields stripped: {strip}: {PODS} pods, estimate {estimate} B, allocator {allocated} B \
             ({:.0} / {:.0} B per pod), ratio {ratio:.3}",
            estimate as f64 / PODS as f64,
            allocated as f64 / PODS as f64,
        );
        assert!(
            (1.0 - TOLERANCE..=1.0 + TOLERANCE).contains(&ratio),
            "estimate {estimate} vs allocator {allocated}: ratio {ratio:.3} outside ±{TOLERANCE}"
        );
    }
}
