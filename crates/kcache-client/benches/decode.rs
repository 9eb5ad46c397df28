//! Decode benchmark: realistic ~8 KB Pods through our decoder vs serde_json → k8s-openapi
//! (kube-client's path), for list pages and watch frames, plus bytes held per object in each
//! storage mode.
//!
//! `cargo bench -p kcache-client --bench decode` (release). Env: `KCACHE_BENCH_PODS` (10000),
//! `KCACHE_BENCH_RUNS` (3, the median is reported). Single-threaded; figures are per core.

use std::{convert::Infallible, hint::black_box, time::Instant};

use bytes::Bytes;
use futures::{StreamExt, executor::block_on, stream};
use k8s_openapi::api::core::v1::Pod;
use kcache_client::{
    compact::{Compact, CompactDecoder},
    decode::{Typed, decode_list, watch_events},
};
use kube_core::{ObjectList, PartialObjectMeta, WatchEvent};
use serde_json::{Value, json};

/// Counts live heap bytes, so that bytes held per object are exact.
#[global_allocator]
static ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// Live heap bytes held by the values `make` returns (measured around building them).
fn held_by<T>(make: impl FnOnce() -> Vec<T>) -> (Vec<T>, usize) {
    let before = ALLOC.current_usage();
    let mut v = make();
    v.shrink_to_fit();
    let after = ALLOC.current_usage();
    (v, after.saturating_sub(before))
}

fn pod(i: usize) -> Value {
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

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `f` `runs` times and returns the median seconds.
fn median_secs(runs: usize, mut f: impl FnMut() -> usize, expect: usize) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let n = f();
            let s = t.elapsed().as_secs_f64();
            assert_eq!(n, expect, "decoded object count");
            s
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn report(what: &str, secs: f64, bytes: usize, objects: usize, baseline: Option<f64>) {
    let mbs = bytes as f64 / secs / 1e6;
    let ops = objects as f64 / secs;
    let ratio = baseline.map_or(String::new(), |b| format!("  ({:.2}× baseline)", b / secs));
    println!("{what:<44} {mbs:>8.0} MB/s {ops:>10.0} objects/s{ratio}");
}

fn main() {
    let n = env_usize("KCACHE_BENCH_PODS", 10_000);
    let runs = env_usize("KCACHE_BENCH_RUNS", 3);
    let page = 500;
    let pods: Vec<String> = (0..n).map(|i| pod(i).to_string()).collect();
    let total: usize = pods.iter().map(String::len).sum();
    let mf_bytes: usize = pods
        .iter()
        .map(|p| {
            let v: Value = serde_json::from_str(p).unwrap();
            v["metadata"]["managedFields"].to_string().len()
        })
        .sum();
    println!(
        "{n} pods, {:.1} KB JSON each on average, managedFields {:.0}% of the bytes",
        total as f64 / n as f64 / 1024.0,
        100.0 * mf_bytes as f64 / total as f64
    );

    // List pages of 500, as the reflector asks for them.
    let pages: Vec<Vec<u8>> = pods
        .chunks(page)
        .map(|c| {
            format!(
                r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"200000"}},"items":[{}]}}"#,
                c.join(",")
            )
            .into_bytes()
        })
        .collect();
    let list_bytes: usize = pages.iter().map(Vec::len).sum();

    println!("\n-- list pages ({page} pods per page) --");
    let base = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(serde_json::from_slice::<ObjectList<Pod>>(p).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "serde_json -> ObjectList<Pod> (baseline)",
        base,
        list_bytes,
        n,
        None,
    );
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<Pod, _>(p, &Typed::new()).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report("kcache typed Pod", t, list_bytes, n, Some(base));
    let strip = Typed::new().strip_managed_fields(true);
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<Pod, _>(p, &strip).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "kcache typed Pod, managedFields skipped",
        t,
        list_bytes,
        n,
        Some(base),
    );
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<PartialObjectMeta<Pod>, _>(p, &strip).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "kcache metadata only (from full objects)",
        t,
        list_bytes,
        n,
        Some(base),
    );
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<Compact<Pod>, _>(p, &CompactDecoder::new()).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "kcache compact (split + metadata)",
        t,
        list_bytes,
        n,
        Some(base),
    );
    let cstrip = CompactDecoder::new().strip_managed_fields(true);
    let t = median_secs(
        runs,
        || {
            pages
                .iter()
                .map(|p| {
                    black_box(decode_list::<Compact<Pod>, _>(p, &cstrip).unwrap())
                        .items
                        .len()
                })
                .sum()
        },
        n,
    );
    report(
        "kcache compact, managedFields stripped",
        t,
        list_bytes,
        n,
        Some(base),
    );
    let t = median_secs(
        runs,
        || pages.iter().map(|p| black_box(split_keys(p))).sum(),
        n,
    );
    report(
        "item splitting + key extraction",
        t,
        list_bytes,
        n,
        Some(base),
    );

    // Watch frames: one ADDED event per line, delivered in 16 KiB chunks.
    let mut watch = Vec::with_capacity(total + n * 32);
    for p in &pods {
        watch.extend_from_slice(br#"{"type":"ADDED","object":"#);
        watch.extend_from_slice(p.as_bytes());
        watch.extend_from_slice(b"}\n");
    }
    let chunks: Vec<Bytes> = watch
        .chunks(16 * 1024)
        .map(Bytes::copy_from_slice)
        .collect();
    println!("\n-- watch frames (16 KiB chunks) --");
    let base = median_secs(
        runs,
        || {
            // kube-client's path: split lines, serde_json each line into WatchEvent<Pod>.
            let mut n = 0;
            for line in watch.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                black_box(serde_json::from_slice::<WatchEvent<Pod>>(line).unwrap());
                n += 1;
            }
            n
        },
        n,
    );
    report(
        "serde_json -> WatchEvent<Pod> (baseline)",
        base,
        watch.len(),
        n,
        None,
    );
    let run_watch = |strip: bool| {
        let s = stream::iter(chunks.clone().into_iter().map(Ok::<_, Infallible>));
        let events =
            watch_events::<Pod, _, _, _>(s, Typed::new().strip_managed_fields(strip), 1 << 24);
        block_on(events.map(|e| black_box(e.unwrap())).count())
    };
    let t = median_secs(runs, || run_watch(false), n);
    report("kcache typed Pod", t, watch.len(), n, Some(base));
    let t = median_secs(runs, || run_watch(true), n);
    report(
        "kcache typed Pod, managedFields skipped",
        t,
        watch.len(),
        n,
        Some(base),
    );
    let t = median_secs(
        runs,
        || {
            let s = stream::iter(chunks.clone().into_iter().map(Ok::<_, Infallible>));
            block_on(
                watch_events::<Compact<Pod>, _, _, _>(s, CompactDecoder::new(), 1 << 24)
                    .map(|e| black_box(e.unwrap()))
                    .count(),
            )
        },
        n,
    );
    report("kcache compact", t, watch.len(), n, Some(base));

    println!("\n-- bytes held per object (live heap, exact) --");
    let held = n.min(2000);
    let sample: Vec<Vec<u8>> = pods[..held].iter().map(|p| p.as_bytes().to_vec()).collect();
    let avg_json = sample.iter().map(Vec::len).sum::<usize>() as f64 / held as f64;
    println!("JSON per object: {avg_json:.0} B (a page's body is dropped once decoded)");
    let show = |what: &str, bytes: usize| {
        let per = bytes as f64 / held as f64;
        println!(
            "{what:<44} {per:>8.0} B/object  {:>5.2}× JSON",
            per / avg_json
        );
    };
    let obj =
        |b: &Vec<u8>, d: &Typed| -> Pod { kcache_client::decode::decode_object(b, d).unwrap() };
    let (full, bytes) = held_by(|| sample.iter().map(|b| obj(b, &Typed::new())).collect());
    show("full typed Pod", bytes);
    drop(full);
    let (stripped, bytes) = held_by(|| sample.iter().map(|b| obj(b, &strip)).collect());
    show("typed Pod, managedFields stripped", bytes);
    drop(stripped);
    let (meta, bytes) = held_by(|| {
        sample
            .iter()
            .map(|b| {
                kcache_client::decode::decode_object::<PartialObjectMeta<Pod>, _>(b, &strip)
                    .unwrap()
            })
            .collect()
    });
    show("metadata only (PartialObjectMeta)", bytes);
    drop(meta);
    let (compact, bytes) = held_by(|| {
        sample
            .iter()
            .map(|b| Compact::<Pod>::from_json(b, false).unwrap())
            .collect()
    });
    show("compact (JSON bytes + metadata)", bytes);
    drop(compact);
    let (compact, bytes) = held_by(|| {
        sample
            .iter()
            .map(|b| Compact::<Pod>::from_json(b, true).unwrap())
            .collect()
    });
    show("compact, managedFields stripped", bytes);
    drop(compact);
}

/// Splits a list page into its items' raw bytes and reads each item's namespace and name:
/// the floor of any decoder that must key objects.
fn split_keys(page: &[u8]) -> usize {
    #[derive(serde::Deserialize)]
    struct Page<'a> {
        #[serde(borrow)]
        items: Vec<&'a serde_json::value::RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Meta<'a> {
        #[serde(borrow)]
        metadata: Key<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Key<'a> {
        #[serde(borrow, default)]
        namespace: Option<&'a str>,
        #[serde(borrow)]
        name: &'a str,
    }
    let p: Page<'_> = serde_json::from_slice(page).unwrap();
    p.items
        .iter()
        .map(|raw| {
            let m: Meta<'_> = serde_json::from_str(raw.get()).unwrap();
            black_box((m.metadata.namespace, m.metadata.name));
        })
        .count()
}
